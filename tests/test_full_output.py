"""The fast full-softmax output layer (nplm_edu.numerics.full_output) gives the reference layer's
loss and gradients (models.output.FullSoftmax) in float64, on one thread and as output blocks on two."""

from types import SimpleNamespace

import numpy as np
import pytest

from nplm_edu.models.output import FullSoftmax
from nplm_edu.numerics.full_output import FastOutput
from nplm_edu.numerics.threads import set_threads


class Head(FastOutput):
    def __init__(self, V, width):
        self.V, self.output = V, FullSoftmax(V, {"U": width})
        self.params = self.output.init_params(np.random.default_rng(0), np.float64)
        self.config = SimpleNamespace(dtype="float64")


@pytest.mark.parametrize("threads", [1, 2])
def test_equal_to_the_full_softmax(threads, monkeypatch):
    monkeypatch.setattr(Head, "MIN_BLOCK_WORK", 0)
    set_threads(threads)
    try:
        head = Head(23, 5)
        rng = np.random.default_rng(1)
        A, targets = rng.standard_normal((7, 5)), rng.integers(0, 23, 7)
        loss, cache = head.output.loss(head.params, {"U": A}, targets)
        g_in, grads = head.output.backward(head.params, cache)
        assert head._blocks(7) == threads
        fast_loss, gA, fast = head._output({"inputs": {"U": A}}, targets)
        assert fast_loss == pytest.approx(loss, rel=1e-13)
        np.testing.assert_allclose(gA, g_in["U"], rtol=1e-12, atol=1e-15)
        for k in ("U", "b"):
            np.testing.assert_allclose(fast[k], grads[k], rtol=1e-12, atol=1e-15)
    finally:
        set_threads(None)
