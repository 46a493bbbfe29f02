"""Training the recurrent models on a stream with the NPLM's trainer (training.stream): the stream's
windows in order with the state carried, learning, bit-exact resume with the state in the checkpoint,
evaluation over every token with the state carried or reset at paragraph marks; bad input in one line."""

import hashlib

import numpy as np
import pytest

from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.models.nplm import NPLMConfig
from nplm_edu.models.rnn import RecurrentConfig
from nplm_edu.numerics.fused import FusedNPLM
from nplm_edu.numerics.recurrent import recurrent_model
from nplm_edu.training.guards import perplexity_of
from nplm_edu.training.stream import (StreamBackend, StreamBatches, StreamConfig, recurrent_from_checkpoint,
                                      split_log_probs, split_stream)
from nplm_edu.training.trainer import TrainConfig, train


@pytest.fixture(scope="module")
def corpus():
    return load_corpus("synthetic", synthetic_tokens=12_000, seed=3)


def digest(params):
    h = hashlib.sha256()
    for k in sorted(params):
        h.update(k.encode() + np.ascontiguousarray(params[k]).tobytes())
    return h.hexdigest()


def run(corpus, cell="lstm", out=None, resume=False, stream=None, **kw):
    cfg = TrainConfig(**{**dict(epochs=2, batch=4, lr=1.0, decay_rate=0.0, lr_decay=0.8, weight_decay=1e-5,
                                dropout_x=0.1, dropout_a=0.2, seed=2, patience=3), **kw})
    model = recurrent_model(RecurrentConfig(V=corpus.V, cell=cell, m=8, h=12, seed=1))
    backend = StreamBackend(model, cfg, stream or StreamConfig(T=9, clip=0.5))
    return model, train(model, corpus, cfg, out_dir=out, resume=resume, quiet=True, backend=backend)


def test_windows_in_order_cover_the_stream():
    ids = np.arange(103)
    plan = StreamBatches(ids, None, B=4, T=7)
    assert plan.data.shape == (4, 25) and plan.n_batches == 4 and plan.order(None) is None
    seen_x, seen_y = [], []
    for j in range(plan.n_batches):
        (X, Y, resets, first), count = plan.batch(None, j)
        assert first == (j == 0) and resets is None and count == X.size
        assert np.array_equal(Y, X + 1)  # each target is the next word of its stream
        seen_x.append(X)
        seen_y.append(Y)
    X, Y = np.concatenate(seen_x, 1), np.concatenate(seen_y, 1)
    assert np.array_equal(X, np.arange(100).reshape(4, 25)[:, :-1])  # row b is the b-th part, read in order
    assert plan.per_epoch == Y.size == plan.done(plan.n_batches)


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_training_learns_and_reports(corpus, cell):
    model, hist = run(corpus, cell, epochs=3)
    e = hist["epochs"]
    assert len(e) == 3 and e[-1]["valid_ppl"] < 0.5 * corpus.V  # far below the uniform model's |V|
    assert e[-1]["valid_ppl"] < e[0]["valid_ppl"] and all(0 <= x["clipped_fraction"] <= 1 for x in e)
    assert hist["best_valid_ppl"] == pytest.approx(perplexity_of(split_log_probs(model, corpus, "valid")))


def test_resume_is_bit_exact(corpus, tmp_path):
    """Interrupted inside epoch 2 (the carried state goes into the checkpoint), resumed: the same numbers."""
    whole, h1 = run(corpus, out=tmp_path / "a")
    _, part = run(corpus, out=tmp_path / "b", max_updates=300)  # 267 updates per epoch: stops inside epoch 2
    assert len(part["epochs"]) == 1
    resumed, h2 = run(corpus, out=tmp_path / "b", resume=True)
    assert [e["valid_ppl"] for e in h1["epochs"]] == [e["valid_ppl"] for e in h2["epochs"]]
    assert [e["train_ppl"] for e in h1["epochs"]] == [e["train_ppl"] for e in h2["epochs"]]
    assert [e["grad_norm_mean"] for e in h1["epochs"]] == [e["grad_norm_mean"] for e in h2["epochs"]]
    assert digest(whole.params) == digest(resumed.params)
    loaded = recurrent_from_checkpoint(tmp_path / "b" / "checkpoint.npz")
    assert digest(loaded.params) == digest(resumed.params)  # the best parameters


def test_state_matters_in_the_resume(corpus, tmp_path):
    """Resuming without the carried state (zeros instead) would give other numbers: the test above can fail."""
    whole, _ = run(corpus, out=tmp_path / "a", epochs=1)
    run(corpus, out=tmp_path / "b", epochs=1, max_updates=10)
    import nplm_edu.training.stream as stream

    orig = stream.StreamBackend.load_extra

    def forget(self, arrays, state):
        orig(self, arrays, state)
        self.state = None  # as if the state had not been saved

    stream.StreamBackend.load_extra = forget
    try:
        resumed, _ = run(corpus, out=tmp_path / "b", epochs=1, resume=True)
    finally:
        stream.StreamBackend.load_extra = orig
    assert digest(whole.params) != digest(resumed.params)


def test_resume_refuses_other_settings_and_kinds(corpus, tmp_path):
    run(corpus, "rnn", out=tmp_path / "r", epochs=1)
    with pytest.raises(UserError, match="holds an RNN model"):
        run(corpus, "lstm", out=tmp_path / "r", resume=True)
    with pytest.raises(UserError, match="cannot resume with T=5"):
        run(corpus, "rnn", out=tmp_path / "r", resume=True, stream=StreamConfig(T=5, clip=0.5))
    run(corpus, "rnn", out=tmp_path / "m", epochs=1, max_updates=200)  # inside the epoch, past a T = 40 epoch's end
    with pytest.raises(UserError, match="cannot resume with T=40"):  # the setting named, not a state said missing
        run(corpus, "rnn", out=tmp_path / "m", resume=True, stream=StreamConfig(T=40, clip=0.5))
    model = FusedNPLM(NPLMConfig(V=corpus.V, n=3, m=4, h=5))
    train(model, corpus, TrainConfig(epochs=1, batch=64), out_dir=tmp_path / "n", quiet=True)
    with pytest.raises(UserError, match="holds an NPLM model, not a recurrent one"):
        recurrent_from_checkpoint(tmp_path / "n" / "checkpoint.npz")


def test_evaluation_scores_every_token_carried_and_reset(corpus):
    model, _ = run(corpus, epochs=1)
    for split in ("valid", "test"):
        inputs, targets = split_stream(corpus, split)
        assert np.array_equal(targets, corpus.split(split)) and inputs[0] == corpus.ids[len(corpus.ids) - len(
            corpus.test) - 1 if split == "test" else len(corpus.train) - 1]
        carried = split_log_probs(model, corpus, split)
        reset = split_log_probs(model, corpus, split, reset_at_paragraph=True)
        assert len(carried) == len(reset) == len(targets) and np.all(np.isfinite(carried))
        p = corpus.vocab.index["<p>"]
        first_reset = int(np.flatnonzero(inputs == p)[0])
        assert np.array_equal(carried[:first_reset], reset[:first_reset])  # the same until the first <p>
        assert not np.allclose(carried[first_reset:], reset[first_reset:])


def test_training_with_resets_at_paragraphs(corpus):
    _, hist = run(corpus, "rnn", epochs=1, stream=StreamConfig(T=9, clip=0.5, reset_at_paragraph=True))
    assert np.isfinite(hist["epochs"][0]["valid_ppl"])


def test_bad_input_is_one_line(corpus):
    model = recurrent_model(RecurrentConfig(V=corpus.V, cell="rnn", m=4, h=4))
    with pytest.raises(UserError, match="T \\(time steps per batch\\) must be a whole number >= 1"):
        StreamBackend(model, TrainConfig(), StreamConfig(T=0))
    with pytest.raises(UserError, match="^batch \\(B, the parallel streams\\) must be at least 1"):
        StreamBackend(model, TrainConfig(batch=0), StreamConfig())
    with pytest.raises(UserError, match="clip norm must be a finite number > 0"):
        StreamBackend(model, TrainConfig(), StreamConfig(clip=0.0))
    with pytest.raises(UserError, match="SGD"):
        StreamBackend(model, TrainConfig(optimizer="adam"), StreamConfig())
    with pytest.raises(UserError, match="cannot be cut"):
        StreamBatches(np.arange(5), None, B=4, T=3)
