"""The adaptive softmax (Grave, Joulin, Cissé, Grangier and Jégou 2017), written to be read.

Words are ranked by training frequency and cut into a head and tails at the ``cutoffs``
c_1 < c_2 < ... < c_n < |V|: the head holds the c_1 most frequent words, tail i the words of rank
c_i .. c_{i+1} - 1 (c_{n+1} = |V|). The head is a softmax over its words plus one token per tail;
a tail word's probability is its tail token's times a softmax inside the tail. The tails read a
smaller, projected copy of the hidden layer a (K, h): tail i has d_i = h / 4^i features
(``div`` = 4; at least 1), so rare words, which are seen rarely and cost most, get less capacity::

    y_head = b_head + a @ U_head.T                    (K, c_1 + n)   head words, then the n tail tokens
    q_i    = a @ Proj_i.T                             (K, d_i)       the projection of tail i
    y_i    = b_i + q_i @ U_i.T                        (K, n_i)       n_i: the words of tail i
    log p(w | h) = log softmax(y_head)_w                                      w in the head
    log p(w | h) = log softmax(y_head)_{c_1 + i - 1} + log softmax(y_i)_w     w in tail i

Both factors are normalized, so the |V| probabilities sum to 1 exactly. A batch's cost is the head
for every example plus, for each tail, only the examples whose target lies in it; with Zipfian
words most targets are in the head (Grave et al. 2017, section 4). This is the layer PyTorch ships
as ``nn.AdaptiveLogSoftmaxWithLoss`` (whose tails have no biases b_i and whose head has none by
default, as in Grave et al.'s own code). Backward (mean NLL L over K)
is the softmax rule twice, as in the class-factored softmax (:mod:`nplm_edu.models.class_softmax`)::

    dL/dy_head = (softmax(y_head) - 1[head index of w]) / K
    dL/dy_i    = (softmax(y_i) - 1[w]) / K          (the examples of tail i only)
    dL/dq_i = dL/dy_i U_i,   dL/dU_i = dL/dy_i^T q_i,   dL/dProj_i = dL/dq_i^T a
    dL/da = dL/dy_head U_head + sum_i dL/dq_i Proj_i
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .output import log_softmax
from .sparse_output import SparseOutputLayer, check_counts, check_sizes, check_targets


def frequency_rank(V: int, counts=None) -> np.ndarray:
    """Word ids from the most to the least frequent (ties by id); without counts, ids in order
    (a vocabulary already sorted by frequency)."""
    if counts is None:
        return np.arange(V)
    return np.lexsort((np.arange(V), -check_counts(counts, V)))  # (|V|,)


def check_cutoffs(cutoffs, V: int) -> list[int]:
    """Cutoffs as whole numbers 0 < c_1 < ... < c_n < |V|, else one UserError."""
    cut = list(cutoffs)
    ok = len(cut) >= 1 and all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in cut)
    if not ok or any(b <= a for a, b in zip([0] + cut, cut + [V])):
        raise UserError(f"cutoffs must be increasing whole numbers between 1 and |V| - 1 = {V - 1}, "
                        f"got {cutoffs!r}", setting="cutoffs")
    return [int(c) for c in cut]


class AdaptiveSoftmax(SparseOutputLayer):
    """The adaptive softmax over |V| words and h hidden units (see the module docstring).

    ``cutoffs``: the head's size and where each tail starts, in frequency ranks; ``counts``
    (|V|,): the training counts that rank the words (None: word ids are ranks); ``div``: tail i
    reads h / div^i features. Parameters: ``U_head`` (c_1 + n, h), ``b_head``; per tail i = 1..n:
    ``Proj_i`` (d_i, h), ``U_i`` (n_i, d_i), ``b_i`` (n_i,), n_i the words of tail i.

    >>> layer = AdaptiveSoftmax(V=10, h=8, cutoffs=[4, 7])
    >>> P = layer.init_params(np.random.default_rng(0), np.float64)
    >>> [P[k].shape for k in ("U_head", "Proj_1", "U_1", "Proj_2", "U_2")]
    [(6, 8), (2, 8), (3, 2), (1, 8), (3, 1)]
    >>> a = np.random.default_rng(1).standard_normal((2, 8))
    >>> np.exp(layer.log_probs(P, {"U": a})).sum(axis=1).round(12).tolist()
    [1.0, 1.0]
    """

    name = "adaptive"
    lazy_decay = False  # a tail's score is U_i (Proj_i a): two decayed matrices, so s a would count s twice

    def __init__(self, V: int, h: int, cutoffs, counts=None, div: int = 4):
        check_sizes(V, h)
        self.V, self.h, self.widths = V, h, {"U": h}
        cut = check_cutoffs(cutoffs, V)
        self.n = len(cut)  # tails
        self.bounds = [0] + cut + [V]  # rank bounds: the head is 0..c_1, tail i is bounds[i]..bounds[i + 1]
        self.order = frequency_rank(V, counts)  # (|V|,) word of each rank
        self.rank = np.empty(V, np.int64)
        self.rank[self.order] = np.arange(V)  # (|V|,) rank of each word
        self.cluster = np.searchsorted(self.bounds, self.rank, side="right") - 1  # (|V|,) 0: head, i: tail i
        self.d = [max(1, h // div ** i) for i in range(1, self.n + 1)]  # tail i reads d_i features
        self.decayed = ("U_head",) + tuple(f"{k}_{i}" for i in range(1, self.n + 1) for k in ("Proj", "U"))

    def init_params(self, rng, dtype) -> dict:
        h, c1 = self.h, self.bounds[1]
        r = 1 / np.sqrt(h)
        P = {"U_head": rng.uniform(-r, r, size=(c1 + self.n, h)).astype(dtype),  # (c_1 + n, h)
             "b_head": np.zeros(c1 + self.n, dtype)}
        for i in range(1, self.n + 1):
            size, d = self.bounds[i + 1] - self.bounds[i], self.d[i - 1]
            P[f"Proj_{i}"] = rng.uniform(-r, r, size=(d, h)).astype(dtype)  # (d_i, h)
            P[f"U_{i}"] = rng.uniform(-1 / np.sqrt(d), 1 / np.sqrt(d), size=(size, d)).astype(dtype)  # (|tail i|, d_i)
            P[f"b_{i}"] = np.zeros(size, dtype)  # (|tail i|,)
        return P

    def head_index(self, targets) -> np.ndarray:
        """Where each target is in the head: its rank (a head word) or c_1 + i - 1 (a word of tail i)."""
        c = self.cluster[targets]
        return np.where(c == 0, self.rank[targets], self.bounds[1] + c - 1)  # (K,)

    # ----------------------------------------------------------------- forward
    def _forward(self, P, a, targets):
        """log p(target | h) (K,) float64 and what backward needs."""
        lh = log_softmax(a @ P["U_head"].T + P["b_head"])  # (K, c_1 + n) log softmax(y_head)
        K = len(targets)
        logp = lh[np.arange(K), self.head_index(targets)].astype(np.float64)  # (K,) the head's factor
        tails = []
        for i in range(1, self.n + 1):
            sel = np.flatnonzero(self.cluster[targets] == i)  # the examples whose target is in tail i
            if not len(sel):
                continue
            q = a[sel] @ P[f"Proj_{i}"].T  # (k_i, d_i) q_i = Proj_i a
            lt = log_softmax(q @ P[f"U_{i}"].T + P[f"b_{i}"])  # (k_i, |tail i|) log softmax(y_i)
            j = self.rank[targets[sel]] - self.bounds[i]  # (k_i,) the target's place in its tail
            logp[sel] += lt[np.arange(len(sel)), j]  # log p(tail i | h) + log p(w | tail i, h)
            tails.append((i, sel, q, lt, j))
        return logp, {"a": a, "targets": targets, "lh": lh, "tails": tails}

    def loss(self, params, inputs, targets):
        a = self.input(inputs)
        logp, cache = self._forward(params, a, check_targets(targets, self.V))
        return float(-logp.mean()), cache

    def backward_sparse(self, params, cache):
        a, targets = cache["a"], cache["targets"]
        K, dt = len(targets), a.dtype
        # backward through the head's softmax + NLL: dL/dy_head = (softmax(y_head) - 1[head index]) / K
        gyh = np.exp(cache["lh"]).astype(dt)  # (K, c_1 + n)
        gyh[np.arange(K), self.head_index(targets)] -= 1
        gyh /= K
        # backward through y_head = b_head + a @ U_head.T
        grads = {"U_head": gyh.T @ a, "b_head": gyh.sum(axis=0)}
        ga = gyh @ params["U_head"]  # (K, h) dL/da through the head
        for i in range(1, self.n + 1):
            for k in ("Proj", "U", "b"):
                grads[f"{k}_{i}"] = np.zeros_like(params[f"{k}_{i}"])  # a tail no target reached: zero
        for i, sel, q, lt, j in cache["tails"]:
            # backward through the tail's softmax + NLL: dL/dy_i = (softmax(y_i) - 1[w]) / K
            gy = np.exp(lt).astype(dt)  # (k_i, |tail i|)
            gy[np.arange(len(sel)), j] -= 1
            gy /= K
            # backward through y_i = b_i + q_i @ U_i.T
            grads[f"U_{i}"], grads[f"b_{i}"] = gy.T @ q, gy.sum(axis=0)
            gq = gy @ params[f"U_{i}"]  # (k_i, d_i) dL/dq_i
            # backward through q_i = a @ Proj_i.T
            grads[f"Proj_{i}"] = gq.T @ a[sel]  # (d_i, h)
            ga[sel] += gq @ params[f"Proj_{i}"]  # (k_i, h)
        return {"U": ga}, grads

    # ----------------------------------------------------------------- probabilities
    def log_prob(self, params, inputs, targets):
        """log p(w | h) of each target: (K,) float64, at the cost of training."""
        return self._forward(params, self.input(inputs), check_targets(targets, self.V))[0]

    def log_probs(self, params, inputs):
        """log p(w | h) of every word: (K, |V|) float64, in word-id order."""
        a = self.input(inputs)
        lh = log_softmax((a @ params["U_head"].T + params["b_head"]).astype(np.float64))  # (K, c_1 + n)
        out = np.empty((len(a), self.V))  # (K, |V|)
        c1 = self.bounds[1]
        out[:, self.order[:c1]] = lh[:, :c1]  # the head's words
        for i in range(1, self.n + 1):
            q = a @ params[f"Proj_{i}"].T  # (K, d_i)
            lt = log_softmax((q @ params[f"U_{i}"].T + params[f"b_{i}"]).astype(np.float64))  # (K, |tail i|)
            out[:, self.order[self.bounds[i]:self.bounds[i + 1]]] = lh[:, c1 + i - 1:c1 + i] + lt
        return out
