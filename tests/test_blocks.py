"""Training a Transformer on blocks (nplm_edu.training.blocks): the blocks, the window scoring, the
backend's settings, learning through the one trainer (its resume is in test_resume_every_model.py)."""

from dataclasses import replace

import numpy as np
import pytest

from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.models.transformer import Transformer, TransformerConfig
from nplm_edu.training.blocks import BlockBackend, BlockBatches
from nplm_edu.training.trainer import TrainConfig, train

CFG = TrainConfig(epochs=2, batch=8, lr=3e-3, optimizer="adam", decay_rate=0.0, weight_decay=0.0, seed=0, tie=True)


def small(V, n_ctx=6, **kw):
    return Transformer(TransformerConfig(V=V, n_ctx=n_ctx, m=16, heads=2, layers=1, d_ff=32, seed=0, **kw))


def test_an_epoch_visits_every_block_once_each_predicting_the_words_after():
    ids = np.arange(103)
    plan = BlockBatches(ids, None, T=5, K=4)
    assert plan.n_blocks == 19 and plan.per_epoch == 95 and plan.n_batches == 5
    order = plan.order(np.random.default_rng(0))
    offset = order.min()
    assert 0 <= offset < 5 and sorted(order - offset) == list(range(0, 95, 5))
    seen = []
    for j in range(plan.n_batches):
        (X, Y), count = plan.batch(order, j)
        assert X.shape[1] == 5 and count == X.size
        np.testing.assert_array_equal(Y, X + 1)  # each position's target is the word after it
        seen += X[:, 0].tolist()
    assert sorted(seen) == sorted(order.tolist()) and plan.done(plan.n_batches) == 95
    offsets = {int(plan.order(np.random.default_rng(s)).min()) for s in range(20)}
    assert len(offsets) > 1  # the offset changes from epoch to epoch


def test_a_window_is_scored_at_its_last_position():
    model = small(13, dtype="float64")
    rng = np.random.default_rng(1)
    X, y = rng.integers(0, 13, (4, 6)), rng.integers(0, 13, 4)
    np.testing.assert_allclose(model.next_log_prob(X, y), model.log_probs(X)[np.arange(4), -1, y], atol=1e-13)
    ppl = model.perplexity(X, y, batch=3)
    assert ppl == pytest.approx(np.exp(-model.next_log_prob(X, y).mean()), rel=1e-12)
    assert model.order == 7


def test_training_through_the_trainer_lowers_the_validation_perplexity(tmp_path):
    corpus = load_corpus("synthetic", synthetic_tokens=6000, seed=3)
    model = small(corpus.V)
    history = train(model, corpus, CFG, out_dir=tmp_path, quiet=True, backend=BlockBackend(model, CFG, clip=1.0))
    contexts, targets = corpus.windows("valid", model.order)
    assert len(targets) == len(corpus.valid)  # every validation word scored, with its 6 words before it
    first, best = history["epochs"][0]["valid_ppl"], history["best_valid_ppl"]
    assert best < first < corpus.V and best == pytest.approx(model.perplexity(contexts, targets), rel=1e-9)
    assert history["epochs"][0]["clipped_fraction"] >= 0 and (tmp_path / "checkpoint.npz").exists()
    assert all(p.dtype == np.float32 for p in model.params.values())


def test_sgd_trains_too_and_bare_ids_are_data():
    corpus = load_corpus("synthetic", synthetic_tokens=3000, seed=3)
    model = small(corpus.V, tie=False)
    cfg = replace(CFG, optimizer="sgd", lr=0.3, tie=False, epochs=1)
    history = train(model, (corpus.train, corpus.valid), cfg, quiet=True, backend=BlockBackend(model, cfg))
    assert history["epochs"][0]["valid_ppl"] < corpus.V and "clipped_fraction" not in history["epochs"][0]


@pytest.mark.parametrize("change, match", [(dict(dropout_x=0.1), "dropout"), (dict(tie=False), "tie")])
def test_settings_the_backend_does_not_offer_are_refused(change, match):
    with pytest.raises(UserError, match=match):
        BlockBackend(small(13), replace(CFG, **change))


def test_resuming_with_another_clip_is_refused(tmp_path):
    corpus = load_corpus("synthetic", synthetic_tokens=3000, seed=3)
    cfg = replace(CFG, epochs=1)
    model = small(corpus.V)
    train(model, corpus, cfg, out_dir=tmp_path, quiet=True, backend=BlockBackend(model, cfg, clip=1.0))
    model = small(corpus.V)
    with pytest.raises(UserError, match="clip"):
        train(model, corpus, replace(cfg, epochs=2), out_dir=tmp_path, resume=True, quiet=True,
              backend=BlockBackend(model, cfg, clip=0.5))


def test_a_stream_too_short_for_two_blocks_is_refused():
    with pytest.raises(UserError, match="no two blocks"):
        BlockBatches(np.arange(9), None, T=5, K=2)
