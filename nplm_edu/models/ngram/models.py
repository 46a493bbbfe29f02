"""Maximum likelihood and interpolated modified Kneser-Ney n-grams: one recursion, two count tables.

Both models compute, for orders k = 1..n, from the uniform p_0(w) = 1/|V| upwards,

    p_k(w | h) = ( max(c_k(h w) - D_k(c_k(h w)), 0) + gamma_k(h) p_{k-1}(w | h') ) / c_k(h .)
    gamma_k(h) = D_k(1) N_1(h .) + D_k(2) N_2(h .) + D_k(3+) N_3+(h .)

where h is the context of k-1 words, h' drops its oldest word, c_k(h .) = sum_w c_k(h w) and
N_i(h .) counts the words seen exactly i times (3 or more for N_3+) after h. A context never seen
(c_k(h .) = 0) leaves p_{k-1} unchanged. The rows sum to 1 at every order by construction.

* Maximum likelihood: c_k are raw counts and D = 0, so p_k = c(h w) / c(h .), zeros included.
* Modified Kneser-Ney (Kneser & Ney 1995; Chen & Goodman 1999, section 3.5): raw counts at the
  highest order, *continuation counts* N_1+(. h w) (how many different words precede h w) below
  it, and three discounts per order from that order's counts of counts n_1..n_4:
  Y = n_1 / (n_1 + 2 n_2), D(1) = 1 - 2Y n_2/n_1, D(2) = 2 - 3Y n_3/n_2, D(3+) = 3 - 4Y n_4/n_3.

The token stream is one sequence (section 4 of the paper): the paragraph and text marks are
ordinary tokens, there is no sentence padding.
"""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from ..lm import LanguageModel
from .counts import NgramCounts, check_ids
from .memory import retained_memory


def running_text(contexts: np.ndarray, targets: np.ndarray) -> bool:
    """Whether the windows (K, c) and targets (K,) are consecutive positions of one token stream:
    each window is the one before shifted by a word, the word shifted in being the target before."""
    if len(targets) < 2 or contexts.shape[1] == 0:
        return False
    return bool(np.array_equal(contexts[1:, :-1], contexts[:-1, 1:]) and np.array_equal(contexts[1:, -1], targets[:-1]))


class RecursiveNgram(LanguageModel):
    """The recursion above, for any per-order count arrays and discounts (subclasses pick them)."""

    def __init__(self, order: int, V: int):
        if not 1 <= order <= 5:
            raise UserError(f"n-gram order must be 1..5, got {order}")
        self.order, self.V = int(order), int(V)
        self.ngrams: NgramCounts | None = None

    # subclasses: the counts c_k (aligned with the table of order k) and discounts (D(1), D(2), D(3+))
    def model_counts(self, k: int) -> np.ndarray:
        raise NotImplementedError

    def model_discounts(self, k: int, c: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def fit(self, train_ids, ngrams: NgramCounts | None = None, progress: bool = False) -> "RecursiveNgram":
        """Count every order of ``train_ids`` (or reuse ``ngrams`` of at least this order) and
        precompute, per order, the discounted numerators and each context's c(h .) and gamma(h);
        ``progress``: a bar while counting a corpus large enough to take more than a second."""
        if ngrams is not None and (ngrams.order < self.order or ngrams.V != self.V):
            raise UserError(f"counts of order {ngrams.order}, |V| = {ngrams.V} cannot serve a model of "
                            f"order {self.order}, |V| = {self.V}")
        with retained_memory():  # one pool of pages for counting and every order's sums
            self.ngrams = ngrams if ngrams is not None else NgramCounts(train_ids, self.order, self.V, progress)
            self._precompute()
        return self

    def _precompute(self) -> None:
        """Per order: the discounted numerators, and each context's c(h .) and gamma(h) numerator."""
        self.num, self.denom, self.gamma, self.D = [None], [None], [None], [None]
        for k in range(1, self.order + 1):  # in place where it can be: at scale new arrays cost more than sums
            c = self.model_counts(k)  # (N_k,)
            D = np.concatenate([[0.0], self.model_discounts(k, c)])  # D[min(c, 3)], D[0] = 0
            d = D.take(np.minimum(c, 3))  # (N_k,)
            num = c.astype(np.float64)  # (N_k,) c, then the discounted counts
            del c
            prefix, n_ctx = self.ngrams.prefix(k), self.ngrams.size(k - 1)
            self.denom.append(np.bincount(prefix, weights=num, minlength=n_ctx))  # (N_{k-1},) c(h .)
            self.gamma.append(np.bincount(prefix, weights=d, minlength=n_ctx))  # sum of discounts = gamma num.
            del prefix
            num -= d
            self.num.append(np.maximum(num, 0.0, out=num))  # (N_k,) discounted counts
            self.D.append(D[1:])

    def _check(self, contexts, targets=None):
        if self.ngrams is None:
            raise UserError("fit the model before asking for probabilities")
        contexts = check_ids(contexts, self.V, "context ids")
        if contexts.ndim != 2 or contexts.shape[1] < self.order - 1:
            raise UserError(f"contexts must be (K, {self.order - 1}), got shape {contexts.shape}")
        contexts = contexts[:, contexts.shape[1] - (self.order - 1):]
        if targets is None:
            return contexts
        targets = check_ids(targets, self.V, "target ids")
        if targets.shape != (len(contexts),):
            raise UserError(f"targets must be ({len(contexts)},), got shape {targets.shape}")
        return contexts, targets

    def context_ids(self, contexts: np.ndarray, k: int) -> np.ndarray:
        """Id (in table k-1) of the last k-1 words of each context, -1 if never seen: (K,)."""
        return self.ngrams.find(contexts[:, contexts.shape[1] - (k - 1):]) if k > 1 else np.zeros(len(contexts), np.int64)

    def levels(self, contexts: np.ndarray, targets: np.ndarray) -> list[np.ndarray]:
        """[p_0, p_1, ..., p_n] of each target, each (K,): the recursion, one step down the trie per word.

        On running text (:func:`running_text`) the context of order k of each window, its k-1 last
        words, is the last k-2 words of the window before it followed by that window's target: the
        (k-1)-gram whose id the order below has just found there. Only the first window then walks
        down the trie for its contexts (a stream's scorer carries the same state from word to word,
        as KenLM's does)."""
        p = np.full(len(targets), 1.0 / self.V)  # p_0, uniform
        out = [p]
        running, g = running_text(contexts, targets), None
        for k in range(1, self.order + 1):
            if running and k > 1:  # the k-1 words before w_t are the (k-1)-gram ending at w_{t-1}
                h = np.concatenate([self.context_ids(contexts[:1], k), g[:-1]])  # (K,)
            else:
                h = self.context_ids(contexts, k)  # (K,)
            g = self.ngrams.extend(k, h, targets)  # (K,) id of the k-gram (h, w), -1 if unseen
            hs = np.maximum(h, 0)
            c_h = self.denom[k].take(hs)  # (K,) c(h .), gathered once
            seen = (h >= 0) & (c_h > 0)
            num = np.where(g >= 0, self.num[k].take(np.maximum(g, 0)), 0.0)
            p = np.where(seen, (num + self.gamma[k].take(hs) * p) / np.where(seen, c_h, 1.0), p)
            out.append(p)
        return out

    def level_rows(self, contexts: np.ndarray, up_to: int | None = None):
        """Yield the full rows p_k(. | h) for k = 0..up_to, each (K, |V|). The same array is updated in
        place from one order to the next (no copies of a possibly large array): use it before advancing."""
        K = len(contexts)
        P = np.full((K, self.V), 1.0 / self.V)  # (K, |V|)
        yield P
        for k in range(1, (self.order if up_to is None else up_to) + 1):
            h = self.context_ids(contexts, k)
            hs = np.maximum(h, 0)
            r = np.flatnonzero((h >= 0) & (self.denom[k][hs] > 0))  # rows whose context was seen
            rows = P[r] * self.gamma[k][h[r], None]  # (R, |V|) back-off mass
            i, e = self.ngrams.ranges(k, h[r])  # every k-gram extending those contexts
            rows[i, self.ngrams.keys[k][e] % self.V] += self.num[k][e]
            P[r] = rows / self.denom[k][h[r], None]
            yield P

    def probs(self, contexts) -> np.ndarray:
        """Full next-word distributions (K, |V|), float64, rows summing to 1."""
        contexts = self._check(contexts)
        for P in self.level_rows(contexts):
            pass
        return P

    def perplexity(self, contexts, targets, batch: int = 1 << 16, progress: str | None = None) -> float:
        """As for every model, in batches of 65,536 windows: scoring holds a few numbers per window,
        not a row of |V|, and each batch walks down the trie for its first window only."""
        return super().perplexity(contexts, targets, batch, progress)

    def log_prob(self, contexts, targets) -> np.ndarray:
        """log P(w_t | context) per window (K,), without building (K, |V|) rows."""
        contexts, targets = self._check(contexts, targets)
        with np.errstate(divide="ignore"):
            return np.log(self.levels(contexts, targets)[-1])


class MaximumLikelihood(RecursiveNgram):
    """Relative frequencies c(h w) / c(h .): the textbook estimate, with its zeros.

    An unseen context has no relative frequency; it falls back to the shorter context (and the
    unigram has a context everyone has seen), so every row is still a distribution. A word never
    seen after a seen context gets probability 0, and the perplexity of a test set is infinite as
    soon as one such word appears.
    """

    def model_counts(self, k):
        return self.ngrams.counts[k]

    def model_discounts(self, k, c):
        return np.zeros(3)


def modified_kn_discounts(n: np.ndarray) -> np.ndarray:
    """(D(1), D(2), D(3+)) from counts of counts n[1..4] (Chen & Goodman 1999, eq. 26).

    When some n_i is 0 (tiny corpora) the formula is undefined, and on small vocabularies whose
    n-grams are all frequent it can give D(i) <= 0 (no mass left to back off with: unseen n-grams
    would get probability 0). In both cases we fall back to the single absolute discount
    Y = n_1 / (n_1 + 2 n_2) for every count (Ney et al. 1994; 0.5 when n_1 = 0), at most 1.
    """
    n1, n2, n3, n4 = (float(x) for x in n[1:5])
    if min(n1, n2, n3, n4) > 0:
        Y = n1 / (n1 + 2 * n2)
        D = np.array([1 - 2 * Y * n2 / n1, 2 - 3 * Y * n3 / n2, 3 - 4 * Y * n4 / n3])
        if np.all((D > 0) & (D <= [1.0, 2.0, 3.0])):
            return D
    Y = n1 / (n1 + 2 * n2) if n1 > 0 else 0.5
    return np.full(3, min(Y, 1.0))


class KneserNey(RecursiveNgram):
    """Interpolated modified Kneser-Ney of order 2..5 (Chen & Goodman 1999), recursing to 1/|V|.

    ``discounts``: optional list of n (D(1), D(2), D(3+)) triples, lowest order first, to replace
    the estimates from counts of counts (for teaching, and to check a small example by hand).
    """

    def __init__(self, order: int, V: int, discounts=None):
        super().__init__(order, V)
        self.fixed = None if discounts is None else [np.asarray(d, float) for d in discounts]

    def model_counts(self, k):
        """Raw counts at the highest order; below it, continuation counts N_1+(. h w): the number
        of distinct (k+1)-grams whose last k words are (h w), i.e. of distinct words before them."""
        if k == self.order:
            return self.ngrams.counts[k]
        return np.bincount(self.ngrams.suffix[k + 1], minlength=self.ngrams.size(k))  # int64

    def model_discounts(self, k, c):
        if self.fixed is not None:
            return self.fixed[k - 1]
        return modified_kn_discounts(self.ngrams.counts_of_counts(k, c))
