"""Finite-difference gradient check (float64) of every parameter, three architectures."""

import numpy as np
import pytest

from nplm_edu.models.gradcheck import gradcheck, numerical_grad, relative_error
from nplm_edu.models.nplm import NPLM, NPLMConfig


def model_and_batch(h, direct, seed=0):
    model = NPLM(NPLMConfig(V=13, n=4, m=3, h=h, direct=direct, dtype="float64", seed=seed))
    rng = np.random.default_rng(seed)
    for p in model.params.values():
        p[...] = 0.5 * rng.standard_normal(p.shape)
    c = rng.integers(0, 13, (6, 3))
    c[0] = 2  # repeated word inside a context and across contexts
    c[1, 1] = 2
    return model, c, rng.integers(0, 13, 6)


@pytest.mark.parametrize("h,direct", [(4, True), (4, False), (0, True)])
def test_every_parameter_passes(h, direct):
    model, c, t = model_and_batch(h, direct)
    errors = gradcheck(model, c, t, max_entries=400)
    assert set(errors) == set(model.params)
    for name, err in errors.items():
        assert err < 1e-6, (name, err)


def test_a_wrong_gradient_is_caught():
    model, c, t = model_and_batch(4, True)
    good = model.loss_and_grads

    def wrong(contexts, targets):  # forgets the tanh derivative's effect on H: gradient doubled
        loss, g = good(contexts, targets)
        g = {k: v.copy() for k, v in g.items()}
        g["H"] *= 2
        return loss, g

    model.loss_and_grads = wrong
    errors = gradcheck(model, c, t)
    assert errors["H"] > 0.3  # |2g - g| / (|2g| + |g|) = 1/3
    assert errors["U"] < 1e-6


def test_numerical_grad_of_a_quadratic():
    class Quad:  # L = sum(w^2) / 2, dL/dw = w
        params = {"w": np.array([1.0, -2.0, 3.0])}

        def loss_and_grads(self, c, t):
            return 0.5 * float(np.sum(self.params["w"] ** 2)), None

    q = Quad()
    assert np.allclose(numerical_grad(q, None, None, "w"), [1.0, -2.0, 3.0], atol=1e-8)
    assert relative_error(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.0
    assert np.isclose(relative_error(np.array([1.0]), np.array([3.0])), 0.5)


def test_float32_is_refused():
    model = NPLM(NPLMConfig(V=5, n=2, m=2, h=2))
    with pytest.raises(ValueError):
        gradcheck(model, np.zeros((1, 1), int), np.zeros(1, int))
