"""The differentiated softmax (Chen, Grangier and Auli 2016), written to be read.

The full softmax gives every word an output vector of the same h features. Chen, Grangier and Auli
(2016) give frequent words more capacity than rare ones: words ranked by training frequency are cut
into bands at the ``cutoffs`` c_1 < ... < c_n < |V| (band 1 the c_1 most frequent words, band j
those of rank c_{j-1} .. c_j - 1, c_{n+1} = |V|), the hidden layer a (K, h) is cut into consecutive
slices a_1, ..., a_{n+1} of ``widths`` w_1 + ... + w_{n+1} = h, and band j's output weights read its
slice only::

    y_w = b_w + U_j[w] . a_j          w in band j, a_j = a[:, o_j : o_j + w_j]      (K, n_j)
    p(w | h) = softmax(y)_w           one softmax over all |V| words

The output matrix is block diagonal: sum_j n_j w_j weights (n_j the words of band j) instead of
|V| h, and as many multiply-adds per example (with w_1 > w_2 > ..., a frequent word gets more
weights than a rare one). The normalization still runs over the whole vocabulary, so the |V|
probabilities sum to 1 exactly.
Backward (mean NLL L over K examples), the full softmax's rule band by band::

    dL/dy = (p - 1[w]) / K                                  (K, |V|)
    dL/dU_j = dL/dy_j^T a_j,   dL/db = sum_k dL/dy,   dL/da_j = dL/dy_j U_j
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .adaptive_softmax import check_cutoffs, frequency_rank
from .output import log_softmax
from .sparse_output import SparseOutputLayer, check_sizes, check_targets


def check_widths(widths, bands: int, h: int) -> list[int]:
    """One width per band, each a whole number >= 1, adding up to h; else one UserError."""
    w = list(widths)
    ok = len(w) == bands and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 1 for x in w)
    if not ok or sum(w) != h:
        raise UserError(f"widths must be {bands} whole numbers >= 1 (one per band) adding up to h = {h}, "
                        f"got {widths!r}", setting="widths")
    return [int(x) for x in w]


class DifferentiatedSoftmax(SparseOutputLayer):
    """The differentiated softmax over |V| words and h hidden units (see the module docstring).

    ``cutoffs``: where each band after the first starts, in frequency ranks; ``widths``: the slice
    of the hidden layer each band reads (adding up to h); ``counts`` (|V|,): the training counts that
    rank the words (None: word ids are ranks). Parameters: ``U_j`` (n_j, w_j) for j = 1..n+1, n_j the
    words of band j, and ``b`` (|V|,) in word-id order.

    >>> layer = DifferentiatedSoftmax(V=10, h=8, cutoffs=[3, 6], widths=[5, 2, 1])
    >>> P = layer.init_params(np.random.default_rng(0), np.float64)
    >>> [P[f"U_{j}"].shape for j in (1, 2, 3)]
    [(3, 5), (3, 2), (4, 1)]
    >>> a = np.random.default_rng(1).standard_normal((2, 8))
    >>> np.exp(layer.log_probs(P, {"U": a})).sum(axis=1).round(12).tolist()
    [1.0, 1.0]
    """

    name = "differentiated"

    def __init__(self, V: int, h: int, cutoffs, widths, counts=None):
        check_sizes(V, h)
        self.V, self.h, self.widths = V, h, {"U": h}
        self.bounds = [0] + check_cutoffs(cutoffs, V) + [V]  # band j holds ranks bounds[j-1]..bounds[j]
        self.bands = len(self.bounds) - 1
        self.w = check_widths(widths, self.bands, h)  # w_j
        self.offsets = np.r_[0, np.cumsum(self.w)]  # a_j = a[:, offsets[j-1]:offsets[j]]
        self.order = frequency_rank(V, counts)  # (|V|,) word of each rank
        self.rank = np.empty(V, np.int64)
        self.rank[self.order] = np.arange(V)  # (|V|,) rank of each word
        self.decayed = tuple(f"U_{j}" for j in range(1, self.bands + 1))

    def init_params(self, rng, dtype) -> dict:
        P = {}
        for j, w in enumerate(self.w, start=1):
            size = self.bounds[j] - self.bounds[j - 1]
            P[f"U_{j}"] = rng.uniform(-1 / np.sqrt(w), 1 / np.sqrt(w), size=(size, w)).astype(dtype)  # (|band j|, w_j)
        P["b"] = np.zeros(self.V, dtype)  # (|V|,)
        return P

    def band(self, j: int, a: np.ndarray):
        """(lo, hi) ranks of band j and its slice a_j of the hidden layer (K, w_j)."""
        return self.bounds[j - 1], self.bounds[j], a[:, self.offsets[j - 1]:self.offsets[j]]

    def scores(self, params, a) -> np.ndarray:
        """y (K, |V|) in RANK order: band j's columns are b + a_j @ U_j.T."""
        y = np.empty((len(a), self.V), a.dtype)  # (K, |V|)
        for j in range(1, self.bands + 1):
            lo, hi, aj = self.band(j, a)
            y[:, lo:hi] = aj @ params[f"U_{j}"].T  # (K, |band j|)
        return y + params["b"][self.order]

    def loss(self, params, inputs, targets):
        a = self.input(inputs)
        targets = check_targets(targets, self.V)
        lp = log_softmax(self.scores(params, a))  # (K, |V|) log p, rank order
        t = self.rank[targets]  # (K,) the targets' columns
        loss = float(-lp[np.arange(len(t)), t].astype(np.float64).mean())
        return loss, {"a": a, "t": t, "lp": lp}

    def backward_sparse(self, params, cache):
        a, t = cache["a"], cache["t"]
        K = len(t)
        # backward through softmax + mean NLL: dL/dy = (p - 1[w]) / K   (K, |V|), rank order
        gy = np.exp(cache["lp"])
        gy[np.arange(K), t] -= 1
        gy /= K
        grads, ga = {}, np.empty_like(a)  # ga (K, h)
        gb = np.empty(self.V, a.dtype)
        gb[self.order] = gy.sum(axis=0)  # dL/db, back to word-id order
        for j in range(1, self.bands + 1):
            # backward through y_j = b_j + a_j @ U_j.T
            lo, hi, aj = self.band(j, a)
            grads[f"U_{j}"] = gy[:, lo:hi].T @ aj  # (|band j|, w_j)
            ga[:, self.offsets[j - 1]:self.offsets[j]] = gy[:, lo:hi] @ params[f"U_{j}"]  # dL/da_j (K, w_j)
        grads["b"] = gb
        return {"U": ga}, grads

    def log_prob(self, params, inputs, targets):
        """log p(target | h) = y_w - log sum_v exp(y_v): (K,) float64, from the scores in rank order (no
        (K, |V|) table put back in word order: what evaluation costs)."""
        a = self.input(inputs)
        t = self.rank[check_targets(targets, self.V)]  # (K,) the targets' columns
        y = self.scores(params, a)  # (K, |V|) rank order
        mx = y.max(axis=1, keepdims=True)
        lse = mx[:, 0].astype(np.float64) + np.log(np.exp(y - mx).sum(axis=1).astype(np.float64))  # (K,) log Z
        return y[np.arange(len(t)), t].astype(np.float64) - lse

    def log_probs(self, params, inputs):
        """log p(w | h) of every word: (K, |V|) float64, in word-id order."""
        lp = log_softmax(self.scores(params, self.input(inputs)).astype(np.float64))  # rank order
        out = np.empty_like(lp)
        out[:, self.order] = lp
        return out
