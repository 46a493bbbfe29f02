"""The class-factored softmax: p(w | h) = p(g(w) | h) p(w | g(w), h), exact (Goodman 2001; Mikolov et
al. 2011).

Every word w belongs to one class g(w). The network's hidden layer a (K, h) scores the classes and,
inside the target's class only, the words::

    y_c = b_c + U_c a           p(c | h)    = softmax over the n_classes classes      (K, n_classes)
    y_w = b_w + U_w a           p(w | c, h) = softmax over the words of class c        (K, |c|)
    log p(w | h) = log p(g(w) | h) + log p(w | g(w), h)

Both factors are normalized, so the |V| probabilities sum to 1 for every context, exactly. An
example costs n_classes + ``|g(w)|`` dot products instead of |V|: with about sqrt|V| classes of
about sqrt|V| words each, O(sqrt|V|) (134 + 134 instead of 17,907 on Brown). Classes binned by
frequency (Mikolov et al. 2011: each class holds about 1/n_classes of the training tokens) give
the same expected cost, |V| / n_classes words per example, with very unequal class sizes.

Storage: the words of each class are stored together, rows ``start[c]:start[c+1]`` of ``U`` and
``b`` (word w at row ``pos[w]``), so the word part of a batch is one matrix product per class
present: the examples whose target is in class c (gathered) times that slice of U.

Backward (mean negative log-likelihood L over K examples), the softmax rule used twice::

    dL/dy_c = (p(c | h) - 1[c = g(w)]) / K                    (K, n_classes)
    dL/dy_w = (p(w' | g(w), h) - 1[w' = w]) / K  for w' in g(w)     (K, |g(w)|)
    dL/dU_c = dL/dy_c^T a,   dL/dU_w = dL/dy_w^T a (rows of the class only),   dL/da = both back through U
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .output import log_softmax
from .sparse_output import Blocks, SparseOutputLayer, check_counts, check_sizes, check_targets


def check_n_classes(n_classes, V: int) -> int:
    """The number of classes as an int in 1..|V|, else one UserError."""
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or not 1 <= n_classes <= V:
        raise UserError(f"n_classes (the number of classes) must be a whole number between 1 and |V| = {V}, got "
                        f"{n_classes!r}", setting="n_classes")
    return int(n_classes)


def default_n_classes(V: int) -> int:
    """round(sqrt |V|): 134 on Brown (Goodman 2001: about sqrt|V| balanced classes)."""
    return max(1, int(round(np.sqrt(V))))


def frequency_classes(counts, n_classes: int) -> np.ndarray:
    """Frequency binning (Mikolov et al. 2011): words in order of decreasing training count fill the
    classes in turn, each class taking about 1/n_classes of the tokens; returns labels (|V|,).

    The class index moves on when the cumulative share passes the next 1/n_classes, by at most one
    class per word (a frequent word alone in its class), and never so late that words run out
    before the last class: exactly ``n_classes`` classes, none empty.

    >>> frequency_classes([50, 20, 10, 10, 5, 5], 3).tolist()
    [0, 1, 2, 2, 2, 2]
    """
    counts = np.asarray(counts, dtype=np.float64)
    V = len(counts)
    C = check_n_classes(n_classes, V)
    check_counts(counts, V)
    order = np.lexsort((np.arange(V), -counts))  # most frequent first, ties by id
    share = np.cumsum(counts[order]) / max(counts.sum(), 1.0)  # (|V|,) cumulative share after each word
    labels = np.empty(V, np.int64)
    c, before = 0, 0.0
    for i, w in enumerate(order):
        target = min(int(C * before), C - 1)  # the bin the word starts in
        c = min(max(c, target), c + 1) if i else 0  # advance by at most one class per word ...
        c = max(c, C - (V - i))  # ... but leave enough words for the classes still empty
        labels[w] = c
        before = share[i]
    return labels


def check_classes(labels, V: int) -> np.ndarray:
    """Class labels (|V|,) as ints 0..n_classes-1 with no empty class (gaps are closed up); one
    UserError when they do not give every word of the vocabulary exactly one class."""
    labels = np.asarray(labels)
    if labels.shape != (V,):
        raise UserError(f"a class assignment must give each of the |V| = {V} words a class, got shape "
                        f"{labels.shape}")
    if labels.dtype.kind not in "iu" or (labels.size and labels.min() < 0):
        raise UserError("class labels must be whole numbers >= 0")
    _, dense = np.unique(labels, return_inverse=True)
    return dense.astype(np.int64)


class ClassSoftmax(SparseOutputLayer):
    """p(w | h) = p(g(w) | h) p(w | g(w), h) over the classes ``labels`` (|V|,) (see the module docstring).

    Parameters: ``U_class`` (n_classes, h), ``b_class`` (n_classes,), ``U`` (|V|, h) and ``b`` (|V|,)
    with the words stored class by class (word w at row ``pos[w]``). ``U`` is drawn in word order
    exactly as the full softmax draws it, then stored class by class: word w starts with the same
    output vector as in the paper's network.

    >>> layer = ClassSoftmax(5, 3, np.array([0, 0, 1, 1, 1]))
    >>> P = layer.init_params(np.random.default_rng(0), np.float64)
    >>> a = np.random.default_rng(1).standard_normal((2, 3))
    >>> np.exp(layer.log_probs(P, {"U": a})).sum(axis=1).round(12).tolist()
    [1.0, 1.0]
    """

    name = "class-factored"

    def __init__(self, V: int, h: int, labels):
        check_sizes(V, h)
        self.V, self.h = V, h
        self.widths = {"U": h}
        self.decayed = ("U", "U_class")
        self.labels = check_classes(labels, V)  # (|V|,) class of each word
        self.n_classes = int(self.labels.max()) + 1
        self.order = np.argsort(self.labels, kind="stable")  # (|V|,) row r of U holds word order[r]
        self.pos = np.empty(V, np.int64)
        self.pos[self.order] = np.arange(V)  # (|V|,) row of each word
        self.start = np.searchsorted(self.labels[self.order], np.arange(self.n_classes + 1))  # (n_classes + 1,)
        self.sizes = np.diff(self.start)  # words per class

    def init_params(self, rng, dtype) -> dict:
        r = 1 / np.sqrt(self.h)
        U = rng.uniform(-r, r, size=(self.V, self.h)).astype(dtype)  # (|V|, h) drawn in word order ...
        P = {"U": np.ascontiguousarray(U[self.order]), "b": np.zeros(self.V, dtype)}  # ... stored by class
        P["U_class"] = rng.uniform(-r, r, size=(self.n_classes, self.h)).astype(dtype)  # (n_classes, h)
        P["b_class"] = np.zeros(self.n_classes, dtype)
        return P

    # ----------------------------------------------------------------- forward
    def _forward(self, P, a, targets):
        """log p(g(w) | h) + log p(w | g(w), h) of each target (K,) float64, and what backward needs.

        The examples are sorted by their target's class; each example's scores over the words of its
        class go one after the other into one flat buffer (one product per class present), and the
        softmax of every example's stretch of it is done at once with ``reduceat``."""
        K = len(targets)
        g = self.labels[targets]  # (K,) the targets' classes
        lc = log_softmax(a @ P["U_class"].T + P["b_class"])  # (K, n_classes) log p(c | h), y_c = b_c + U_c a
        by = np.argsort(g, kind="stable")  # (K,) examples grouped by class
        gs = g[by]
        cut = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1], True])  # (groups + 1,) where each class's examples start
        size = self.sizes[gs]  # (K,) |g(w)| of each example, in class order
        off = np.r_[0, np.cumsum(size)]  # (K + 1,) where each example's scores start
        a_s = a[by]  # (K, h) the examples in class order
        y = np.empty(off[-1], a.dtype)  # (sum of |g(w)|,) y_w = b_w + U_w a, example after example
        groups = []
        for i in range(len(cut) - 1):
            e0, e1 = cut[i], cut[i + 1]
            lo, hi = self.start[gs[e0]], self.start[gs[e0] + 1]
            yg = y[off[e0]:off[e1]].reshape(e1 - e0, hi - lo)  # (n_c, |c|) a view of the buffer
            np.matmul(a_s[e0:e1], P["U"][lo:hi].T, out=yg)
            yg += P["b"][lo:hi]
            groups.append((e0, e1, lo, hi))
        starts = off[:-1]
        y -= np.repeat(np.maximum.reduceat(y, starts), size)  # subtract each example's max
        e = np.exp(y)  # (sum |g(w)|,)
        s = np.add.reduceat(e, starts, dtype=np.float64)  # (K,) sum over each example's class
        tflat = starts + self.pos[targets[by]] - self.start[gs]  # (K,) where each target's score is
        logp = np.empty(K)
        logp[by] = y[tflat] - np.log(s) + lc[by, gs]  # log p(w | c, h) + log p(c | h)
        return logp, {"a": a, "targets": targets, "lc": lc, "by": by, "gs": gs, "size": size, "off": off,
                      "a_s": a_s, "e": e, "s": s, "tflat": tflat, "groups": groups}

    def loss(self, params, inputs, targets):
        a = self.input(inputs)
        logp, cache = self._forward(params, a, check_targets(targets, self.V))
        return float(-logp.mean()), cache

    def backward_sparse(self, params, cache):
        a, targets, by, gs, size, off = (cache[k] for k in ("a", "targets", "by", "gs", "size", "off"))
        K, dt = len(targets), a.dtype
        gyc = np.exp(cache["lc"]).astype(dt)  # (K, n_classes) p(c | h)
        gyc[np.arange(K), self.labels[targets]] -= 1  # dL/dy_c = (p(c | h) - 1[c = g(w)]) / K
        gyc /= K
        ga = gyc @ params["U_class"]  # (K, h) dL/da through the class part
        grads = {"U_class": gyc.T @ a, "b_class": gyc.sum(axis=0)}  # (n_classes, h), (n_classes,)
        gy = cache["e"] / np.repeat((cache["s"] * K).astype(dt), size)  # p(w' | c, h) / K, flat
        gy[cache["tflat"]] -= dt.type(1.0 / K)  # dL/dy_w = (p(w' | c, h) - 1[w' = w]) / K
        ga_s = np.empty_like(cache["a_s"])  # (K, h) dL/da through the word part, in class order
        blocks = []
        for e0, e1, lo, hi in cache["groups"]:
            gyg = gy[off[e0]:off[e1]].reshape(e1 - e0, hi - lo)  # (n_c, |c|)
            np.matmul(gyg, params["U"][lo:hi], out=ga_s[e0:e1])
            blocks.append((lo, hi, gyg, cache["a_s"][e0:e1]))  # dL/dU_w = gyg^T a on the class's rows
        ga[by] += ga_s
        row = np.repeat(self.start[gs] - off[:-1], size) + np.arange(off[-1])  # (sum |g(w)|,) row of b of each score
        grads["U"], grads["b"] = Blocks(blocks), np.bincount(row, weights=gy, minlength=self.V).astype(dt)
        return {"U": ga}, grads

    # ----------------------------------------------------------------- probabilities
    def log_prob(self, params, inputs, targets):
        """log p(w | h) of each target: (K,) float64, at the cost of training (n_classes + ``|g(w)|`` per example)."""
        a = self.input(inputs)
        return self._forward(params, a, check_targets(targets, self.V))[0]

    def log_probs(self, params, inputs):
        """log p(w | h) of every word: (K, |V|) float64, in word-id order (one product with all of U)."""
        a = self.input(inputs)
        lc = log_softmax((a @ params["U_class"].T + params["b_class"]).astype(np.float64))  # (K, n_classes)
        y = (a @ params["U"].T + params["b"]).astype(np.float64)  # (K, |V|) class by class
        starts = self.start[:-1]
        mx = np.maximum.reduceat(y, starts, axis=1)  # (K, n_classes) max of each class's scores
        y -= np.repeat(mx, self.sizes, axis=1)
        lse = np.log(np.add.reduceat(np.exp(y), starts, axis=1))  # (K, n_classes)
        y += np.repeat(lc - lse, self.sizes, axis=1)  # log p(c | h) + log p(w | c, h)
        return y[:, self.pos]  # (K, |V|) back to word-id order
