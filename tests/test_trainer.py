"""The trainer's ``frozen`` option: named parameters never move; the others train as before."""

import numpy as np
import pytest

from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.numerics.fused import FusedNPLM
from nplm_edu.training.trainer import TrainConfig, train


@pytest.mark.parametrize("cls", [NPLM, FusedNPLM])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_frozen_parameters_stay(cls, optimizer):
    corpus = load_corpus("synthetic", synthetic_tokens=4_000, seed=1)
    model = cls(NPLMConfig(V=corpus.V, n=3, m=4, h=6, seed=0))
    before = {k: v.copy() for k, v in model.params.items()}
    cfg = TrainConfig(epochs=2, batch=16, lr=0.3 if optimizer == "sgd" else 1e-2, weight_decay=1e-3,
                      optimizer=optimizer, frozen="C, d")
    hist = train(model, corpus, cfg, quiet=True)
    for k in ("C", "d"):
        assert np.array_equal(model.params[k], before[k]), k  # no step, no weight decay
    for k in ("H", "U", "W", "b"):
        assert not np.array_equal(model.params[k], before[k]), k
    assert hist["epochs"][-1]["valid_ppl"] < corpus.V  # it still learned something


def test_frozen_resume_and_errors(tmp_path):
    corpus = load_corpus("synthetic", synthetic_tokens=4_000, seed=1)
    new = lambda: FusedNPLM(NPLMConfig(V=corpus.V, n=3, m=4, h=6, seed=0))  # noqa: E731
    cfg = TrainConfig(epochs=2, batch=16, lr=0.3, frozen="C", seed=3)
    whole = new()
    train(whole, corpus, cfg, quiet=True)
    part = new()
    train(part, corpus, TrainConfig(**{**cfg.__dict__, "epochs": 1}), out_dir=tmp_path, quiet=True)
    again = new()
    train(again, corpus, cfg, out_dir=tmp_path, resume=True, quiet=True)
    assert all(np.array_equal(whole.params[k], again.params[k]) for k in whole.params)
    with pytest.raises(UserError, match="frozen"):
        train(new(), corpus, TrainConfig(**{**cfg.__dict__, "frozen": ""}), out_dir=tmp_path, resume=True,
              quiet=True)
    with pytest.raises(UserError, match="unknown parameter"):
        TrainConfig(frozen="Q").validate()
    with pytest.raises(UserError, match="tied"):
        TrainConfig(frozen="C", tie=True).validate()


@pytest.mark.parametrize("cls", [NPLM, FusedNPLM])
@pytest.mark.parametrize("direct", [True, False])
def test_batch_bytes_is_a_lower_bound_of_what_an_update_holds(cls, direct):
    """The memory check refuses a batch only when it cannot fit: its estimate must never exceed what one
    update really allocates (numpy's allocations, traced)."""
    import tracemalloc

    model = cls(NPLMConfig(V=300, n=4, m=8, h=40, direct=direct, seed=0))
    K = 2000
    rng = np.random.default_rng(0)
    contexts, targets = rng.integers(0, 300, size=(K, 3)), rng.integers(0, 300, size=K)
    tracemalloc.start()
    try:
        model.loss_and_grads(contexts, targets)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 0.5 * peak <= model.batch_bytes(K) <= peak  # a lower bound, and not a vacuous one


def test_a_batch_beyond_the_memory_available_is_refused_before_training(tmp_path, monkeypatch, capsys):
    """Linux hands out memory page by page until its out-of-memory killer ends the process without a
    word: a batch that cannot fit is one line before the first update, and nothing is written."""
    from nplm_edu.cli import main
    from nplm_edu.training import guards

    model = FusedNPLM(NPLMConfig(V=47, n=3, m=5, h=8, seed=0))
    need = model.batch_bytes(1000)
    monkeypatch.setattr(guards, "available_memory", lambda: need - 1)
    with pytest.raises(UserError, match="one update on a batch of 1,000 examples needs at least"):
        train(model, load_corpus("synthetic"), TrainConfig(epochs=1, batch=1000), out_dir=tmp_path / "a", quiet=True)
    assert not (tmp_path / "a" / "checkpoint.npz").exists()
    monkeypatch.setattr(guards, "available_memory", lambda: need)  # exactly enough: trains
    train(model, load_corpus("synthetic"), TrainConfig(epochs=1, batch=1000), quiet=True)
    monkeypatch.setattr(guards, "available_memory", lambda: 10 ** 6)
    assert main(["train", "--corpus", "synthetic", "--batch", "100000000", "--h", "2000", "--out",
                 str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # the batch is the whole training set: 24,000 tokens, n = 5, so 23,996 windows; per window
    # |V| + 3 (h + (n-1) m) = 47 + 3 (2000 + 120) = 6,407 float32 numbers: 23,996 x 6,407 x 4 B = 0.57 GiB
    assert len(err) == 1 and err[0].startswith("error: one update on a batch of 23,996 examples needs at least "
                                               "0.6 GiB of memory and 0.0 GiB are available"), err
    assert not (tmp_path / "b").exists()  # the folder the output check made is gone with the refused run


def test_each_backend_counts_the_memory_of_its_processes():
    """The memory check asks the backend: one process holds the model's batch (serial), P workers hold
    P of them (hogwild), a rank holds its block of the scores (output blocks; with M = 1 the whole)."""
    from nplm_edu.training.backends import SerialBackend
    from nplm_edu.training.parallel.hogwild import HogwildBackend
    from nplm_edu.training.parallel.output_block import OutputBlockBackend

    corpus = load_corpus("synthetic")
    model = FusedNPLM(NPLMConfig(V=corpus.V, n=3, m=5, h=8, seed=0))
    config = TrainConfig(batch=64)
    one = model.batch_bytes(64)
    assert one == 64 * (corpus.V + 3 * (8 + 2 * 5)) * 4  # (K, |V|) scores, 3 x (K, h + (n-1)m), float32
    assert SerialBackend(model, config).batch_bytes(64) == one
    assert HogwildBackend(model, config, corpus.windows("train", 3), workers=3).batch_bytes(64) == 3 * one
    assert OutputBlockBackend(model, config).batch_bytes(64) == one  # one rank owns every output unit


def test_output_blocks_agree_to_stop_every_few_updates_or_when_asked_now():
    """Rank 0 of 1: the flag is seen at the STOP_CHECK_EVERY-th call and at any call with ``now``, not
    between (the ranks agree only at those calls, all at the same ones)."""
    from nplm_edu.training.parallel.output_block import OutputBlockBackend

    corpus = load_corpus("synthetic")
    backend = OutputBlockBackend(FusedNPLM(NPLMConfig(V=corpus.V, n=3, m=5, h=8, seed=0)), TrainConfig(batch=64))
    every = backend.STOP_CHECK_EVERY
    assert [backend.stop_requested(True) for _ in range(every)] == [False] * (every - 1) + [True]
    assert backend.stop_requested(True, now=True) and not backend.stop_requested(False, now=True)
    assert backend.sgd.any_rank(True) and not backend.sgd.any_rank(False)


def test_an_error_inside_an_epoch_closes_its_progress_bar_first(monkeypatch):
    """The error's one line must not be glued to the bar: the epoch's bar is closed (erased) before any
    error leaves the loop, not only before a divergence."""
    from progress_bars import recorded_bars

    bars = recorded_bars(monkeypatch)

    def fail(step, model):
        raise RuntimeError("the disk is full")

    model = FusedNPLM(NPLMConfig(V=47, n=3, m=5, h=8, seed=0))
    with pytest.raises(RuntimeError) as raised:  # its traceback keeps the loop's frame (and bar) alive
        train(model, load_corpus("synthetic"), TrainConfig(epochs=1, batch=64), callback=fail, callback_every=1)
    assert raised.traceback and [b["desc"] for b in bars] == ["epoch 1/1"]
