"""The fast Transformer (nplm_edu.numerics.transformer) computes the reference's numbers: loss,
every gradient and the window log-probabilities equal in float64, on one thread and on two
(output blocks), tied and untied."""

import numpy as np
import pytest

from nplm_edu.models.transformer import Transformer, TransformerConfig
from nplm_edu.numerics.threads import set_threads
from nplm_edu.numerics.transformer import FastTransformer

CFG = dict(V=37, n_ctx=6, m=8, heads=2, layers=2, d_ff=16, dtype="float64", seed=0)


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setattr(FastTransformer, "MIN_BLOCK_WORK", 0)  # the blocks even on this tiny layer
    set_threads(2)
    yield
    set_threads(None)


def pair(tie):
    cfg = TransformerConfig(**CFG, tie=tie)
    return Transformer(cfg), FastTransformer(cfg)


def check_equal(tie):
    ref, fast = pair(tie)
    rng = np.random.default_rng(4)
    X, Y = rng.integers(0, 37, (5, 6)), rng.integers(0, 37, (5, 6))
    loss, grads = ref.loss_and_grads(X, Y)
    loss_f, grads_f = fast.loss_and_grads(X, Y)
    assert loss_f == pytest.approx(loss, rel=1e-13)
    assert set(grads_f) == set(grads)
    for k in grads:
        np.testing.assert_allclose(grads_f[k], grads[k], rtol=1e-11, atol=1e-15, err_msg=k)
    np.testing.assert_allclose(fast.next_log_prob(X, Y[:, -1]), ref.next_log_prob(X, Y[:, -1]), rtol=1e-12)


@pytest.mark.parametrize("tie", [True, False])
def test_equal_to_the_reference_on_one_thread(tie):
    set_threads(1)
    check_equal(tie)
    set_threads(None)


@pytest.mark.parametrize("tie", [True, False])
def test_equal_to_the_reference_on_two_threads(tie, two_threads):
    check_equal(tie)


def test_same_initial_values_and_float32_stays_float32():
    cfg = TransformerConfig(**{**CFG, "dtype": "float32"})
    ref, fast = Transformer(cfg), FastTransformer(cfg)
    assert all(np.array_equal(ref.params[k], fast.params[k]) for k in ref.params)
    X = np.random.default_rng(0).integers(0, 37, (3, 6))
    _, grads = fast.loss_and_grads(X, X)
    assert all(g.dtype == np.float32 for g in grads.values())
