"""tests/autodiff.py's operations for the output layers: each gradient against central differences in
float64 (the operations the recurrent, transformer and character-input checks use are checked there,
through whole networks)."""

import numpy as np
import pytest

from autodiff import Var, concat_cols, log, logsumexp, pick, rows, total
from nplm_edu.models.gradcheck import relative_error

RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 3))
W = RNG.standard_normal((4, 8))  # weights that make a scalar of an (N, M) output: total(out * W)


def numerical(f, arrays, i, eps=1e-6):
    """Central differences of the scalar f(*arrays) with respect to arrays[i]."""
    x = arrays[i]
    num = np.zeros_like(x)
    for j in np.ndindex(x.shape):
        old = x[j]
        x[j] = old + eps
        up = float(f(*map(Var, arrays)).value)
        x[j] = old - eps
        down = float(f(*map(Var, arrays)).value)
        x[j] = old
        num[j] = (up - down) / (2 * eps)
    return num


CASES = {  # name: (scalar function of Vars, its inputs)
    "sub": (lambda x, y: total((x.cols(0, 3) - y) * W[:, :3]), [X, Y]),
    "log": (lambda x: total(log(x) * W[:, :5]), [np.abs(X) + 0.5]),
    "logsumexp": (lambda x: total(logsumexp(x) * W[:, :1]), [X]),
    "pick": (lambda x: total(pick(x, [4, 0, 4, 2]) * W[:, 0]), [X]),  # row 0 and row 2 pick the same column
    "concat_cols": (lambda x, y: total(concat_cols([y, x]) * W), [X, Y]),
    "rows of a vector, repeated": (lambda b: total(rows(b, [3, 1, 3, 0, 2]) * W[0, :5]), [X[0].copy()]),
}


@pytest.mark.parametrize("name", CASES)
def test_gradient_against_central_differences(name):
    f, arrays = CASES[name]
    arrays = [a.copy() for a in arrays]
    Vars = [Var(a) for a in arrays]
    out = f(*Vars)
    assert out.value.shape == ()
    out.backward()
    for i, v in enumerate(Vars):
        num = numerical(f, arrays, i)
        assert np.abs(num).max() > 1e-3  # the output depends on every input
        assert relative_error(v.grad, num) < 1e-8, (name, i, relative_error(v.grad, num))


def test_values():
    """Each operation's value is the numpy expression it stands for; logsumexp and its gradient stay finite
    on scores whose exp overflows."""
    x, y = Var(X), Var(Y)
    assert np.array_equal((x.cols(0, 3) - y).value, X[:, :3] - Y)
    assert np.array_equal(pick(x, [4, 0, 4, 2]).value, [X[0, 4], X[1, 0], X[2, 4], X[3, 2]])
    assert np.array_equal(concat_cols([y, x]).value, np.hstack([Y, X]))
    assert np.allclose(logsumexp(x).value[:, 0], np.log(np.exp(X).sum(axis=1)), rtol=1e-14)
    big = logsumexp(Var(X + 1000.0)).value[:, 0]  # exp(1000) overflows: the shift keeps it finite
    assert np.allclose(big - 1000.0, np.log(np.exp(X).sum(axis=1)), rtol=1e-12)
    shifted, plain = Var(X + 1000.0), Var(X)  # and so does its gradient, the softmax, the same for any shift
    total(logsumexp(shifted) * W[:, :1]).backward()
    total(logsumexp(plain) * W[:, :1]).backward()
    assert np.allclose(shifted.grad, plain.grad, rtol=1e-12) and np.isfinite(shifted.grad).all()
    assert float(total(x).value) == pytest.approx(X.sum(), rel=1e-14)
