"""The adaptive softmax's fast step (nplm_edu.numerics.adaptive) against the readable layer and against an
independent reverse-mode AD of Grave et al.'s equations (tests/autodiff.py), in float64."""

from __future__ import annotations

import numpy as np
import pytest

from nplm_edu.models.adaptive_softmax import AdaptiveSoftmax
from nplm_edu.models.nplm import NPLMConfig
from nplm_edu.models.sparse_output import densify
from nplm_edu.numerics.adaptive import AdaptiveNPLM
from nplm_edu.numerics.sparse import SparseNPLM
from nplm_edu.numerics.threads import set_threads

from test_adaptive_softmax import adaptive_autodiff_loss, against_autodiff

V, H, K = 40, 12, 24
COUNTS = np.random.default_rng(0).integers(1, 60, V)


@pytest.fixture(params=[1, 2, 3])
def threads(request):
    set_threads(request.param)
    yield request.param
    set_threads(None)


def models(cutoffs, seed=0):
    """The fast and the readable network (same parameters, away from their initial values), split on any thread count."""
    net = NPLMConfig(V=V, n=4, m=3, h=H, direct=False, dtype="float64", seed=1)
    layer = AdaptiveSoftmax(V, H, cutoffs, COUNTS, div=2)
    fast, slow = AdaptiveNPLM(net, layer), SparseNPLM(net, layer)
    fast.MIN_BLOCK_WORK = 0
    rng = np.random.default_rng(seed)
    for k, p in fast.params.items():
        if k != "lazy_scale":
            p[...] = 0.5 * rng.standard_normal(p.shape)
            slow.params[k][...] = p
    return fast, slow, layer


def batch(layer, rng, tails=True):
    """Contexts and targets; with ``tails``, a head word and a word of each tail at least, one repeated;
    without, only head words (every tail gets no target)."""
    c = rng.integers(0, V, (K, 3))
    if not tails:
        return c, layer.order[rng.integers(0, layer.bounds[1], K)]
    t = rng.integers(0, V, K)
    t[:len(layer.bounds) - 1] = layer.order[layer.bounds[:-1]]
    t[-1] = t[1]
    return c, t


@pytest.mark.parametrize("cutoffs", [[8, 20], [8, 20, 33], [30]])
@pytest.mark.parametrize("tails", [True, False])
def test_loss_and_every_gradient_equal_the_readable_layer(threads, cutoffs, tails):
    fast, _, layer = models(cutoffs)
    rng = np.random.default_rng(2)
    c, t = batch(layer, rng, tails)
    P = fast.params
    a = rng.standard_normal((K, H))
    loss, cache = layer.loss(P, {"U": a}, t)
    g_in, grads = layer.backward_sparse(P, cache)
    loss2, g_in2, grads2 = fast.output_step(P, {"U": a}, t)
    assert fast._blocks(K) == threads
    assert abs(loss - loss2) < 1e-12
    assert np.abs(g_in["U"] - g_in2["U"]).max() < 1e-12
    assert set(grads) == set(grads2)
    for k in grads:
        assert np.abs(densify(grads[k], P[k]) - grads2[k]).max() < 1e-12, k


@pytest.mark.parametrize("cutoffs", [[8, 20], [8, 20, 33], [30]])
def test_fast_step_equals_automatic_differentiation(threads, cutoffs):
    """The fast step's loss, every gradient and dL/da on 1, 2, 3 threads against an independent reverse-mode AD."""
    fast, _, layer = models(cutoffs)
    rng = np.random.default_rng(4)
    c, t = batch(layer, rng)
    P, a = fast.params, rng.standard_normal((K, H))
    loss, g_in, grads = fast.output_step(P, {"U": a}, t)
    assert fast._blocks(K) == threads and set(grads) == set(layer.init_params(rng, np.float64))
    against_autodiff(loss, g_in["U"], grads, P, a, t, lambda P, a, t: adaptive_autodiff_loss(P, a, t, cutoffs, COUNTS))


@pytest.mark.parametrize("cutoffs", [[8, 20], [8, 20, 33]])  # two and three tails (owners spread them)
def test_training_steps_equal_the_readable_layers_and_repeat(threads, cutoffs):
    fast, slow, layer = models(cutoffs)
    again, _, _ = models(cutoffs)
    rng = np.random.default_rng(3)
    for step in range(4):
        c, t = batch(layer, rng, tails=step != 2)
        losses = [m.sgd_update(c, t, 0.1, 1e-3) for m in (fast, slow, again)]
        assert abs(losses[0] - losses[1]) < 1e-12 and losses[0] == losses[2]
    for k in fast.params:
        assert np.abs(fast.params[k] - slow.params[k]).max() < 1e-12, k
        assert np.array_equal(fast.params[k], again.params[k]), k  # same seed, same threads: same numbers
