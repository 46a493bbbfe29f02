"""A small reverse-mode automatic differentiation on numpy arrays, for the tests only.

It knows nothing of the package: each operation records its inputs and how to send a gradient back
to them, and :meth:`Var.backward` walks the recorded graph in reverse topological order (as
micrograd does for scalars). The tests write a model's forward pass with these operations, straight
from the equations, and compare the gradients it finds with the package's hand-derived ones:

* backpropagation through time of :mod:`nplm_edu.models.rnn`, :mod:`nplm_edu.models.lstm` and the GRU
  (tests/test_recurrent.py, test_gru.py);
* the backward of :mod:`nplm_edu.models.transformer` (test_transformer.py) and of the character-aware
  input, :mod:`nplm_edu.models.char_input` (test_char_input.py);
* the output layers that share out the vocabulary: the differentiated softmax,
  :mod:`nplm_edu.models.differentiated_softmax` (test_differentiated_softmax.py); the adaptive softmax,
  :mod:`nplm_edu.models.adaptive_softmax`, and its fast step, :mod:`nplm_edu.numerics.adaptive`
  (test_adaptive_softmax.py, test_fast_adaptive.py); LightRNN's row and column output and its input
  vectors, :mod:`nplm_edu.models.lightrnn` (test_lightrnn.py).

The operations those output layers need (log, logsumexp, pick and rows through gather, concat_cols,
total, subtraction) are each checked against central differences in test_autodiff.py.
"""

from __future__ import annotations

import numpy as np


class Var:
    """An array in the graph: its value, its gradient after :meth:`backward`, and where it came from."""

    def __init__(self, value, parents=(), back=None):
        self.value = np.asarray(value, dtype=np.float64)
        self.grad = np.zeros_like(self.value)
        self.parents, self.back = parents, back

    def backward(self) -> None:
        """d(self)/d(every Var it depends on), self being a scalar."""
        order, seen = [], set()

        def visit(v):
            if id(v) not in seen:
                seen.add(id(v))
                for p in v.parents:
                    visit(p)
                order.append(v)

        visit(self)
        self.grad = np.ones_like(self.value)
        for v in reversed(order):
            if v.back is not None:
                v.back(v.grad)

    # operators with broadcasting
    def __add__(self, other):
        other = lift(other)
        out = Var(self.value + other.value, (self, other))
        out.back = lambda g: (send(self, g), send(other, g))
        return out

    def __mul__(self, other):
        other = lift(other)
        out = Var(self.value * other.value, (self, other))
        out.back = lambda g: (send(self, g * other.value), send(other, g * self.value))
        return out

    def __sub__(self, other):
        other = lift(other)
        out = Var(self.value - other.value, (self, other))
        out.back = lambda g: (send(self, g), send(other, -g))
        return out

    def __rsub__(self, number):  # number - self
        out = Var(number - self.value, (self,))
        out.back = lambda g: send(self, -g)
        return out

    def __matmul__(self, other):
        out = Var(self.value @ other.value, (self, other))
        out.back = lambda g: (send(self, g @ other.value.T), send(other, self.value.T @ g))
        return out

    @property
    def T(self):
        out = Var(self.value.T, (self,))
        out.back = lambda g: send(self, g.T)
        return out

    def cols(self, lo: int, hi: int):
        out = Var(self.value[:, lo:hi], (self,))

        def back(g):
            full = np.zeros_like(self.value)
            full[:, lo:hi] = g
            send(self, full)

        out.back = back
        return out


def lift(x) -> Var:
    return x if isinstance(x, Var) else Var(x)


def send(v: Var, g: np.ndarray) -> None:
    """Add g to v's gradient, summed over the axes broadcasting added."""
    while g.ndim > v.value.ndim:
        g = g.sum(axis=0)
    for axis, n in enumerate(v.value.shape):
        if n == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    v.grad = v.grad + g


def tanh(x: Var) -> Var:
    out = Var(np.tanh(x.value), (x,))
    out.back = lambda g: send(x, g * (1 - out.value ** 2))
    return out


def exp(x: Var) -> Var:
    out = Var(np.exp(x.value), (x,))
    out.back = lambda g: send(x, g * out.value)
    return out


def sqrt(x: Var) -> Var:
    out = Var(np.sqrt(x.value), (x,))
    out.back = lambda g: send(x, g * 0.5 / out.value)
    return out


def recip(x: Var) -> Var:
    """1 / x."""
    out = Var(1 / x.value, (x,))
    out.back = lambda g: send(x, -g * out.value ** 2)
    return out


def log(x: Var) -> Var:
    out = Var(np.log(x.value), (x,))
    out.back = lambda g: send(x, g / x.value)
    return out


def total(x: Var) -> Var:
    """The sum of every entry: a scalar."""
    out = Var(x.value.sum(), (x,))
    out.back = lambda g: send(x, np.broadcast_to(g, x.value.shape))
    return out


def logsumexp(x: Var) -> Var:
    """log sum_j exp(x_ij) of each row: (N, M) -> (N, 1), computed after subtracting the row's largest entry."""
    mx = x.value.max(axis=1, keepdims=True)
    out = Var(mx + np.log(np.exp(x.value - mx).sum(axis=1, keepdims=True)), (x,))
    out.back = lambda g: send(x, g * np.exp(x.value - out.value))  # d/dx_ij = softmax(x)_ij
    return out


def pick(x: Var, cols) -> Var:
    """x[i, cols[i]] of each row: (N, M) -> (N,)."""
    cols = np.asarray(cols)
    return gather(x, (np.arange(len(cols)), cols))


def concat_cols(parts: list[Var]) -> Var:
    """The parts side by side along axis 1."""
    out = Var(np.concatenate([p.value for p in parts], axis=1), tuple(parts))

    def back(g):
        at = 0
        for p in parts:
            w = p.value.shape[1]
            send(p, g[:, at:at + w])
            at += w

    out.back = back
    return out


def sum_cols(x: Var) -> Var:
    """The sum of each row: (N, M) -> (N, 1)."""
    out = Var(x.value.sum(axis=1, keepdims=True), (x,))
    out.back = lambda g: send(x, np.broadcast_to(g, x.value.shape))
    return out


def sigmoid(x: Var) -> Var:
    out = Var(1 / (1 + np.exp(-x.value)), (x,))
    out.back = lambda g: send(x, g * out.value * (1 - out.value))
    return out


def rows(table: Var, ids) -> Var:
    """table[ids]: the look-up of a word's feature vector (any rows of any array, repeats adding up)."""
    return gather(table, np.asarray(ids))


def gather(x: Var, at) -> Var:
    """x[at] for a numpy index ``at``; the gradient of entries read several times adds up."""
    out = Var(x.value[at], (x,))

    def back(g):
        full = np.zeros_like(x.value)
        np.add.at(full, at, g)
        send(x, full)

    out.back = back
    return out


def concat_rows(parts: list[Var]) -> Var:
    """The parts stacked along axis 0."""
    out = Var(np.concatenate([p.value for p in parts]), tuple(parts))

    def back(g):
        at = 0
        for p in parts:
            send(p, g[at:at + len(p.value)])
            at += len(p.value)

    out.back = back
    return out


def mean_nll(y: Var, targets) -> Var:
    """Mean over rows of -log softmax(y)[target]."""
    targets = np.asarray(targets)
    z = y.value - y.value.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    N = len(targets)
    out = Var(-logp[np.arange(N), targets].mean(), (y,))

    def back(g):
        d = np.exp(logp)
        d[np.arange(N), targets] -= 1
        send(y, g * d / N)

    out.back = back
    return out


def relu(x: Var) -> Var:
    out = Var(np.maximum(x.value, 0), (x,))
    out.back = lambda g: send(x, g * (x.value > 0))
    return out


def group_max(x: Var, P: int) -> Var:
    """The largest entry of each column within consecutive groups of P rows: (N P, h) -> (N, h)."""
    v = x.value.reshape(-1, P, x.value.shape[1])  # (N, P, h)
    j = v.argmax(axis=1)[:, None]  # (N, 1, h)
    out = Var(np.take_along_axis(v, j, axis=1)[:, 0], (x,))

    def back(g):
        full = np.zeros_like(v)
        np.put_along_axis(full, j, g[:, None], axis=1)
        send(x, full.reshape(x.value.shape))

    out.back = back
    return out
