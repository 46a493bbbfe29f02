"""The input layer: from word ids to the vectors x a network reads, and networks built on one.

In the NPLM (section 2 of the paper) and the recurrent networks a word becomes its row of the
look-up table C: x = C(w). An input layer generalizes that step with a small interface, the mirror
of the output layer's (:mod:`nplm_edu.models.output`):

* ``m``: the width of a word's vector; ``decayed``: its parameters under weight decay;
* :meth:`~nplm_edu.models.input.InputLayer.init_params` draws its parameters (a dict of named arrays);
* :meth:`~nplm_edu.models.input.InputLayer.forward` maps ids (any shape) to vectors (that shape + (m,)) and a cache;
* :meth:`~nplm_edu.models.input.InputLayer.backward` takes that cache and dL/dx and returns its parameters' gradients.

:class:`Table` is the paper's C; :class:`~nplm_edu.models.char_input.CharInput` computes x from a
word's spelling (Kim et al. 2016). :class:`WithInput` puts any input layer under a network written
with C: the network reads only the rows of C of the words in its batch, so the input layer computes
exactly those rows, the network runs unchanged, and the network's dL/dC of those rows is sent back
through the input layer.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError


class InputLayer:
    """The interface (see the module docstring). Subclasses set ``name``, ``m`` and ``decayed``."""

    name: str  # what a checkpoint's meta calls the layer (its ``input`` record): "table", "char", "lightrnn"
    m: int
    decayed: tuple[str, ...] = ()

    def init_params(self, rng: np.random.Generator, dtype) -> dict[str, np.ndarray]:
        """The layer's parameters, drawn from ``rng``: a dict of named arrays of ``dtype``."""
        raise NotImplementedError

    def forward(self, params: dict, ids: np.ndarray) -> tuple[np.ndarray, dict]:
        """x of every id: (ids.shape + (m,)), and a cache for :meth:`backward`."""
        raise NotImplementedError

    def backward(self, params: dict, cache: dict, gx: np.ndarray) -> dict:
        """dL/d params (keyed like the parameters) from dL/dx (shaped like x)."""
        raise NotImplementedError

    def describe(self) -> dict:
        """The settings a checkpoint's meta keeps, under the layer's ``name``, to rebuild it (its ``input``
        record); empty: none (the run's own settings rebuild it)."""
        return {}


class Table(InputLayer):
    """The paper's look-up table: x = C(w), C (|V|, m), drawn from U(-0.1, 0.1) as the NPLM's here.

    >>> layer = Table(V=4, m=2)
    >>> P = layer.init_params(np.random.default_rng(0), np.float64)
    >>> x, cache = layer.forward(P, np.array([[3, 3]]))
    >>> layer.backward(P, cache, np.ones_like(x))["C"][3].tolist()
    [2.0, 2.0]
    """

    name, decayed = "table", ("C",)

    def __init__(self, V: int, m: int):
        self.V, self.m = V, m

    def init_params(self, rng, dtype):
        return {"C": rng.uniform(-0.1, 0.1, size=(self.V, self.m)).astype(dtype)}  # (|V|, m)

    def forward(self, params, ids):
        return params["C"][ids], {"ids": ids}  # (..., m) x = C(w)

    def backward(self, params, cache, gx):
        # backward through the look-up: each place's gradient added to its word's row of C
        gC = np.zeros_like(params["C"])  # (|V|, m)
        np.add.at(gC, np.ravel(cache["ids"]), gx.reshape(-1, self.m))
        return {"C": gC}

    def num_params(self) -> int:
        return self.V * self.m


class WithInput:
    """A network written with a look-up table C (the NPLM, a recurrent network) reading its words
    through ``layer`` instead: the rows of C of a batch's words are the layer's x, and dL/dC of those
    rows goes back through the layer. ``params``: the layer's and the network's, C excepted.

    Every method that reads word ids takes them first (the NPLM's contexts, a recurrent network's
    inputs), as the network's own methods do; other attributes are the network's."""

    chunk = 1024  # words whose vectors are computed at once when no gradient is needed
    # the network's own shortcuts (a fused SGD step, dL/dC as rows) update C itself, not the input
    # layer: declared off, so a trainer takes loss_and_grads, which sends dL/dC through the layer
    fused_sgd = sparse_grads = False

    def __init__(self, model, layer: InputLayer, seed: int = 0):
        if layer.m != model.config.m:
            raise UserError(f"the input layer gives {layer.m} features per word, the network reads m = "
                            f"{model.config.m}", setting="m")
        self.model, self.input = model, layer
        C = model.params["C"]
        C[...] = 0  # from now on a scratch table: only the rows of the words read are ever filled
        own = layer.init_params(np.random.default_rng([seed, 2]), C.dtype)
        clash = sorted(set(own) & (set(model.params) - {"C"}))
        if clash:
            raise UserError(f"the input layer's parameters {clash} clash with the network's")
        self.params = {**own, **{k: p for k, p in model.params.items() if k != "C"}}
        self.decayed = tuple(layer.decayed) + tuple(k for k in model.decayed if k != "C")

    def __getattr__(self, name):
        if name in ("model", "params"):  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    def num_params(self) -> int:
        return int(sum(p.size for p in self.params.values()))

    def fill(self, ids, need_cache: bool = False):
        """Write the layer's x into the network's C for every word in ``ids``; the words and the cache."""
        P, net = self.params, self.model.params
        for k in P:
            if k in net and k != "C":
                net[k] = P[k]  # the same arrays (a resume may have replaced them)
        words = np.unique(np.asarray(ids))  # (N,)
        if need_cache:
            net["C"][words], cache = self.input.forward(P, words)  # (N, m) C(w) := x(w)
            return words, cache
        for i in range(0, len(words), self.chunk):
            net["C"][words[i:i + self.chunk]] = self.input.forward(P, words[i:i + self.chunk])[0]
        return words, None

    def loss_and_grads(self, ids, *args, **kwargs):
        """The network's loss and gradients, dL/dC replaced by the input layer's gradients."""
        words, cache = self.fill(ids, need_cache=True)
        loss, grads, *rest = self.model.loss_and_grads(ids, *args, **kwargs)
        gC = grads.pop("C")  # (|V|, m), zero outside the rows of ``words``
        # backward through C(w) := x(w)
        grads.update(self.input.backward(self.params, cache, gC[words]))
        return (loss, {k: grads[k] for k in self.params if k in grads}, *rest)  # no gradient for a state

    def _reads(name):  # noqa: N805 (a decorator factory for the class body)
        def method(self, ids, *args, **kwargs):
            self.fill(ids)
            return getattr(self.model, name)(ids, *args, **kwargs)

        method.__name__ = name
        method.__doc__ = f"The network's ``{name}``, its words' rows of C computed by the input layer first."
        return method

    log_probs, log_prob, perplexity, probs = _reads("log_probs"), _reads("log_prob"), _reads("perplexity"), _reads("probs")
    chunk_log_prob, log_prob_stream, forward = _reads("chunk_log_prob"), _reads("log_prob_stream"), _reads("forward")
    del _reads
