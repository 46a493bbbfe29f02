"""Class-based n-grams: words clustered by the exchange algorithm, Kneser-Ney on the class stream.

    P(w_t | w_{t-n+1} .. w_{t-1}) = P(w_t | g(w_t)) * P_KN(g(w_t) | g(w_{t-n+1}) .. g(w_{t-1}))

with g(w) the class of w, P(w | g) = N(w) / N(g) from training counts, and P_KN an interpolated
modified Kneser-Ney n-gram over the stream of classes (Brown et al. 1992; the paper's "class-based
back-off" rows of Table 1 used c = 150 .. 2000 classes).

The classes come from the exchange algorithm (Kneser & Ney 1993; Martin, Liermann & Ney 1998):
start from some assignment, then take each word in turn out of its class and put it in the class
that most increases the training log-likelihood of the class bigram model,

    F = sum_{g,h} N(g,h) log N(g,h) - sum_g N(g .) log N(g .) - sum_h N(. h) log N(. h) + const,

N(g,h) counting the training bigrams whose first word is in g and second in h. Moving one word
changes one row and one column of N: the gain of every target class is computed at once from the
word's bigram counts with each class (a (c, classes seen next to the word) slice of N), so a pass
costs a Python step per *word*, never per token or per class. F never decreases.
"""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from ...progress import progress_bar
from ..lm import LanguageModel
from .counts import NgramCounts, check_ids
from .models import KneserNey


def xlogx(x):
    """x log x with 0 log 0 = 0 (for counts, x = 0 or x >= 1)."""
    return x * np.log(np.maximum(x, 1.0))


def class_bigram_objective(M: np.ndarray) -> float:
    """F above without its constant: sum f(N(g,h)) - sum f(N(g .)) - sum f(N(. h))."""
    return float(xlogx(M).sum() - xlogx(M.sum(1)).sum() - xlogx(M.sum(0)).sum())


def exchange_classes(train_ids, V: int, n_classes: int, passes: int = 3, seed: int | None = None,
                     progress: bool = True):
    """Cluster the |V| words into ``n_classes`` classes; returns (classes (|V|,) int64, history).

    Initialization: words by decreasing frequency dealt round-robin into the classes (with a
    ``seed``, a random assignment instead). ``history`` holds F after initialization and after
    every pass. A word alone in its class stays, so no class is ever empty.
    """
    C = int(n_classes)
    if not 1 <= C <= V:
        raise UserError(f"classes (the number of classes) must be between 1 and |V| = {V}, got {C}", setting="classes")
    big = NgramCounts(train_ids, 2, V)
    u, v, n = big.keys[2] // V, big.keys[2] % V, big.counts[2].astype(np.float64)  # all bigrams, sorted by u
    self_loop = np.bincount(u[u == v], weights=n[u == v], minlength=V)  # (|V|,) N(w, w)
    nl, nr = np.bincount(u, weights=n, minlength=V), np.bincount(v, weights=n, minlength=V)  # N(w .), N(. w)
    keep = u != v
    ou, ov, on = u[keep], v[keep], n[keep]  # successors, grouped by word
    out_start = np.searchsorted(ou, np.arange(V + 1))
    by_v = np.argsort(ov, kind="stable")
    iv, iu, inn = ov[by_v], ou[by_v], on[by_v]  # predecessors, grouped by word
    in_start = np.searchsorted(iv, np.arange(V + 1))

    order = np.lexsort((np.arange(V), -(nl + nr)))  # most frequent first
    if seed is None:
        cls = np.empty(V, np.int64)
        cls[order] = np.arange(V) % C
    else:
        rng = np.random.default_rng(seed)
        cls = rng.permutation(np.arange(V) % C)
    M = np.bincount(cls[u] * C + cls[v], weights=n, minlength=C * C).reshape(C, C)  # (c, c) N(g, h)
    NL, NR = M.sum(1), M.sum(0)  # (c,) N(g .), N(. h)
    FM = xlogx(M)  # (c, c) f(N(g, h)), kept up to date
    size = np.bincount(cls, minlength=C)
    history = [class_bigram_objective(M)]
    words = order[(nl + nr)[order] > 0]  # words that occur in training
    bar = progress_bar(total=passes * len(words), desc=f"exchange ({C} classes)", unit="word", disable=not progress)
    for _ in range(passes):
        for w in words:
            a = cls[w]
            if size[a] == 1:
                bar.update()  # the only word of its class stays
                continue
            R, r = np.unique(cls[ov[out_start[w]:out_start[w + 1]]], return_inverse=True)
            rv = np.bincount(r, weights=on[out_start[w]:out_start[w + 1]])  # (|R|,) N(w, g) for g in R
            L, l = np.unique(cls[iu[in_start[w]:in_start[w + 1]]], return_inverse=True)
            lv = np.bincount(l, weights=inn[in_start[w]:in_start[w + 1]])  # (|L|,) N(g, w)
            s = self_loop[w]
            # take w out of class a (FM = f(M) follows every change of M)
            M[a, R] -= rv
            M[L, a] -= lv
            M[a, a] -= s
            FM[a, R], FM[L, a], FM[a, a] = xlogx(M[a, R]), xlogx(M[L, a]), xlogx(M[a, a])
            NL[a] -= nl[w]
            NR[a] -= nr[w]
            # gain of putting w into every class b at once
            Mr = M[:, R]  # (c, |R|) row b of N gains rv
            G = (xlogx(Mr + rv) - FM[:, R]).sum(1)  # (c,)
            Ml = M[L, :]  # (|L|, c) column b gains lv
            G += (xlogx(Ml + lv[:, None]) - FM[L, :]).sum(0)
            rd, ld, d = np.zeros(C), np.zeros(C), np.diagonal(M)
            rd[R], ld[L] = rv, lv
            G += xlogx(d + rd + ld + s) - xlogx(d + rd) - xlogx(d + ld) + xlogx(d)  # N(b, b) gains all three
            G -= xlogx(NL + nl[w]) - xlogx(NL) + xlogx(NR + nr[w]) - xlogx(NR)
            b = int(np.argmax(G))
            if G[b] <= G[a] + 1e-6:  # no real improvement: stay (keeps F non-decreasing)
                b = a
            M[b, R] += rv
            M[L, b] += lv
            M[b, b] += s
            FM[b, R], FM[L, b], FM[b, b] = xlogx(M[b, R]), xlogx(M[L, b]), xlogx(M[b, b])
            NL[b] += nl[w]
            NR[b] += nr[w]
            cls[w] = b
            size[a] -= 1
            size[b] += 1
            bar.update()
        history.append(class_bigram_objective(M))
        bar.set_postfix(F=f"{history[-1]:.6g}")
    bar.close()
    return cls, history


class ClassNgram(LanguageModel):
    """P(w | g(w)) * P_KN(g(w) | class history), KN of order n over the class stream."""

    def __init__(self, order: int, V: int, n_classes: int, passes: int = 3, seed: int | None = None,
                 progress: bool = True):
        self.order, self.V, self.n_classes = int(order), int(V), int(n_classes)
        self.passes, self.seed, self.progress = passes, seed, progress
        self.classes: np.ndarray | None = None
        self.history: list[float] = []

    def fit(self, train_ids, classes=None) -> "ClassNgram":
        """Cluster (unless ``classes`` (|V|,) is given, e.g. from an earlier fit), then count."""
        train_ids = check_ids(train_ids, self.V, "training ids")
        if classes is None:
            classes, self.history = exchange_classes(train_ids, self.V, self.n_classes, self.passes,
                                                     self.seed, self.progress)
        _, self.classes = np.unique(np.asarray(classes), return_inverse=True)  # labels 0..c'-1, none empty
        self.classes = self.classes.reshape(-1)
        C = int(self.classes.max()) + 1
        N = np.maximum(np.bincount(train_ids, minlength=self.V), 1).astype(np.float64)  # unseen words: 1
        self.member = N / np.bincount(self.classes, weights=N, minlength=C)[self.classes]  # (|V|,) P(w | g(w))
        self.kn = KneserNey(self.order, C).fit(self.classes[train_ids])
        return self

    def log_prob(self, contexts, targets) -> np.ndarray:
        contexts = check_ids(contexts, self.V, "context ids")
        targets = check_ids(targets, self.V, "target ids")
        g = self.classes
        return self.kn.log_prob(g[contexts], g[targets]) + np.log(self.member[targets])

    def probs(self, contexts) -> np.ndarray:
        contexts = check_ids(contexts, self.V, "context ids")
        Pc = self.kn.probs(self.classes[contexts])  # (K, c) next-class distribution
        return Pc[:, self.classes] * self.member  # (K, |V|)
