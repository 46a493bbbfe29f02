"""The output layer: from the network's features to P(w_t = i | context) (section 2 of the paper).

In the paper the last layer is ``y = b + W x + U a`` followed by a softmax over the |V| words. It is
about 99.3% of MLP9's multiply-adds on Brown (|V| h = 1,790,700 against (n-1) m h = 12,000), which
is why later work replaced it (section 5 of the paper; the class-factored and tree softmaxes,
importance sampling, NCE). Every output layer of this
package has the same small interface, so the rest of a network (the NPLM's look-up table and tanh
layer, a recurrent network's hidden state) is combined with any of them without changing:

* ``widths``: the inputs it reads, by the name of the weight matrix that multiplies each one,
  e.g. ``{"U": h, "W": (n-1)m}`` for the NPLM: ``y = b + U a + W x`` gets ``inputs={"U": a, "W": x}``;
* :meth:`~OutputLayer.init_params` draws its parameters (a dict of named arrays);
* :meth:`~OutputLayer.loss` returns the mean negative log-likelihood of a batch of targets and a
  cache; :meth:`~OutputLayer.backward` takes that cache and returns the gradients with respect to
  its inputs (keyed like ``inputs``) and to its parameters (keyed like its parameters);
* :meth:`~OutputLayer.log_prob` gives log P(target) and :meth:`~OutputLayer.log_probs` the whole
  (K, |V|) table, exactly (for perplexity and sampling).

Rows are examples (K of them): the paper writes column vectors, ``y = b + W x + U a``; with a batch
of rows that is ``y = b + x @ W.T + a @ U.T``. :class:`FullSoftmax` is the paper's layer, written to
be read; the fused, in-place version used for training is :mod:`nplm_edu.numerics.fused`.
"""

from __future__ import annotations

import numpy as np


class OutputLayer:
    """The interface (see the module docstring). Subclasses set ``V``, ``widths`` and ``decayed``."""

    V: int
    widths: dict[str, int]  # weight name -> width of the input it multiplies
    decayed: tuple[str, ...] = ()  # parameters under weight decay (never the biases)

    def init_params(self, rng: np.random.Generator, dtype) -> dict[str, np.ndarray]:
        """The layer's parameters, drawn from ``rng``: a dict of named arrays of ``dtype``."""
        raise NotImplementedError

    def loss(self, params: dict, inputs: dict, targets: np.ndarray) -> tuple[float, dict]:
        """Mean negative log-likelihood of ``targets`` (K,) and a cache for
        :meth:`~nplm_edu.models.output.OutputLayer.backward`."""
        raise NotImplementedError

    def backward(self, params: dict, cache: dict) -> tuple[dict, dict]:
        """(dL/d inputs keyed like ``inputs``, dL/d params keyed like the parameters) of the mean NLL."""
        raise NotImplementedError

    def log_probs(self, params: dict, inputs: dict) -> np.ndarray:
        """log P(w = i | context) for every word i: (K, |V|) float64."""
        raise NotImplementedError

    def log_prob(self, params: dict, inputs: dict, targets: np.ndarray) -> np.ndarray:
        """log P(target | context): (K,) float64 (default: read from :meth:`log_probs`)."""
        return self.log_probs(params, inputs)[np.arange(len(targets)), targets]


def softmax(y: np.ndarray) -> np.ndarray:
    """softmax of each row, the max subtracted first so exp never overflows (section 2)."""
    p = np.exp(y - y.max(axis=1, keepdims=True))  # (K, |V|), largest entry 1
    p /= p.sum(axis=1, keepdims=True)
    return p


def log_softmax(y: np.ndarray) -> np.ndarray:
    """log softmax of each row, the max subtracted first so exp never overflows (section 2)."""
    y = y - y.max(axis=1, keepdims=True)  # (K, |V|), largest entry 0
    return y - np.log(np.exp(y).sum(axis=1, keepdims=True))


class FullSoftmax(OutputLayer):
    """The paper's output layer: y = b + sum_k inputs[k] @ params[k].T, p = softmax(y) (equation 1).

    For the NPLM with direct connections ``widths = {"U": h, "W": (n-1)m}``, i.e. y = b + U a + W x.
    Initialisation: each weight k ~ U(-1/sqrt(width_k), 1/sqrt(width_k)), b = 0.

    >>> layer = FullSoftmax(V=3, widths={"U": 2})
    >>> P = layer.init_params(np.random.default_rng(0), np.float64)
    >>> a = np.array([[0.5, -1.0]])
    >>> float(np.exp(layer.log_probs(P, {"U": a})).sum())
    1.0
    """

    def __init__(self, V: int, widths: dict[str, int]):
        self.V, self.widths = V, dict(widths)
        self.decayed = tuple(k for k in self.widths)

    def init_params(self, rng, dtype) -> dict:
        P = {}
        for k, width in self.widths.items():  # drawn in this order: the seed fixes every value
            r = 1 / np.sqrt(width) if width else 0.0
            P[k] = rng.uniform(-r, r, size=(self.V, width)).astype(dtype)  # (|V|, width)
        P["b"] = np.zeros(self.V, dtype)  # (|V|,)
        return P

    def scores(self, params: dict, inputs: dict) -> np.ndarray:
        """y = b + sum_k inputs[k] @ params[k].T   (K, |V|)."""
        y = params["b"] + sum(inputs[k] @ params[k].T for k in self.widths)  # (K, |V|)
        return y

    def log_probs(self, params, inputs):
        return log_softmax(self.scores(params, inputs).astype(np.float64))  # (K, |V|)

    def loss(self, params, inputs, targets):
        y = self.scores(params, inputs)  # (K, |V|)
        y = y - y.max(axis=1, keepdims=True)  # subtract the max before exponentiating
        e = np.exp(y)  # (K, |V|)
        s = e.sum(axis=1, keepdims=True)  # (K, 1)
        p = e / s  # (K, |V|) p = softmax(y)
        K = len(targets)
        loss = float(np.mean(np.log(s[:, 0].astype(np.float64)) - y[np.arange(K), targets]))  # -log p(w_t)
        return loss, {"p": p, "inputs": inputs, "targets": targets}

    def backward(self, params, cache):
        p, inputs, targets = cache["p"], cache["inputs"], cache["targets"]
        K = len(targets)
        # backward through softmax + mean NLL: dL/dy = (p - onehot(w_t)) / K
        gy = p.copy()  # (K, |V|)
        gy[np.arange(K), targets] -= 1
        gy /= K
        # backward through y = b + sum_k inputs[k] @ params[k].T
        grads = {k: gy.T @ inputs[k] for k in self.widths}  # dL/dU = dL/dy^T a  (|V|, width)
        grads["b"] = gy.sum(axis=0)  # (|V|,)
        g_inputs = {k: gy @ params[k] for k in self.widths}  # dL/da = dL/dy U  (K, width)
        return g_inputs, grads
