"""The paper's deleted-interpolation trigram (section 4.1), weights fitted by EM on validation data.

    P(w_t | w_{t-1}, w_{t-2}) = a_0(q) p_0 + a_1(q) p_1(w_t) + a_2(q) p_2(w_t | w_{t-1})
                                + a_3(q) p_3(w_t | w_{t-2}, w_{t-1})

p_0 = 1/|V|; p_1, p_2, p_3 the unigram, bigram and trigram relative frequencies of the training
set; q = l(freq(w_{t-2}, w_{t-1})) with l(x) = ceil(-log((1 + x) / T)), T the training size, so
contexts seen often land in low bins and rare ones in high bins; one weight vector a(q) >= 0,
sum 1, per bin. A context never seen in training has no relative frequency: there p_3 (or p_2)
is replaced by the next lower order, which keeps every row a distribution (an unseen pair always
lands in the last bin, where EM learns how little to trust that copy).

Usage: ``InterpolatedTrigram(V).fit(train_ids, valid=(contexts, targets))``, or ``fit(train_ids)``
then ``fit_weights(contexts, targets, iterations=5)``. Each EM iteration cannot lower the
validation log-likelihood (EM for mixture weights; Dempster, Laird & Rubin 1977); the history is
kept in ``em_history``.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import UserError
from ..lm import LanguageModel
from .models import MaximumLikelihood


class InterpolatedTrigram(LanguageModel):
    """Deleted interpolation of p_0..p_3 with one weight vector per context-frequency bin."""

    order = 3

    def __init__(self, V: int, verbose: bool = True):
        self.V, self.verbose = int(V), verbose
        self.mle = MaximumLikelihood(3, V)  # p_1, p_2, p_3 are its levels (with the fallback above)
        self.alpha: np.ndarray | None = None  # (n_bins, 4)
        self.em_history: list[float] = []

    def fit(self, train_ids, valid=None, iterations: int = 5) -> "InterpolatedTrigram":
        """Count the training stream; with ``valid=(contexts, targets)``, also run EM on it."""
        self.mle.fit(train_ids)
        self.T = self.mle.ngrams.T
        self.n_bins = int(math.ceil(math.log(self.T))) + 1  # q = 0 .. ceil(log T) (x = 0)
        self.alpha = np.full((self.n_bins, 4), 0.25)
        self.em_history = []
        if valid is not None:
            self.fit_weights(*valid, iterations=iterations)
        return self

    def bins(self, contexts) -> np.ndarray:
        """Bin q of each context (K, >=2): ceil(-log((1 + freq(w_{t-2}, w_{t-1})) / T)), (K,) int."""
        contexts = self.mle._check(contexts)
        g = self.mle.ngrams.find(contexts[:, -2:])  # (K,) id of the bigram (w_{t-2}, w_{t-1})
        freq = np.where(g >= 0, self.mle.ngrams.counts[2][np.maximum(g, 0)], 0)
        q = np.ceil(-np.log((1.0 + freq) / self.T) - 1e-12).astype(np.int64)  # - 1e-12: exact powers
        return np.clip(q, 0, self.n_bins - 1)

    def components(self, contexts, targets) -> np.ndarray:
        """p_0, p_1, p_2, p_3 of each target: (K, 4)."""
        contexts, targets = self.mle._check(contexts, targets)
        return np.stack(self.mle.levels(contexts, targets), axis=1)  # (K, 4)

    def fit_weights(self, contexts, targets, iterations: int = 5) -> list[float]:
        """EM on held-out windows: E-step, each component's share of each target's probability;
        M-step, a(q) = mean share over the windows of bin q. Returns the log-likelihood before
        each iteration and after the last (never decreasing)."""
        if iterations < 0:
            raise UserError(f"em_iterations must be >= 0, got {iterations}", setting="em_iterations")
        comp = self.components(contexts, targets)  # (K, 4)
        q = self.bins(contexts)  # (K,)
        n_q = np.bincount(q, minlength=self.n_bins)  # (n_bins,) windows per bin
        K = len(q)
        for it in range(iterations + 1):
            mix = self.alpha[q] * comp  # (K, 4)
            p = mix.sum(axis=1)  # (K,)
            ll = float(np.sum(np.log(p)))
            self.em_history.append(ll)
            if self.verbose:
                print(f"EM {'start' if it == 0 else f'iteration {it}'}: validation log-likelihood "
                      f"{ll:,.1f} (perplexity {math.exp(-ll / K):.2f})")
            if it == iterations:
                break
            share = mix / p[:, None]  # (K, 4) E-step: posterior of each component
            totals = np.stack([np.bincount(q, weights=share[:, j], minlength=self.n_bins) for j in range(4)], 1)
            self.alpha = np.where(n_q[:, None] > 0, totals / np.maximum(n_q, 1)[:, None], self.alpha)  # M-step
        return self.em_history

    def log_prob(self, contexts, targets) -> np.ndarray:
        comp = self.components(contexts, targets)  # (K, 4)
        return np.log(np.sum(self.alpha[self.bins(contexts)] * comp, axis=1))

    def probs(self, contexts) -> np.ndarray:
        contexts = self.mle._check(contexts)
        a = self.alpha[self.bins(contexts)]  # (K, 4)
        P = np.zeros((len(contexts), self.V))  # (K, |V|)
        for j, rows in enumerate(self.mle.level_rows(contexts)):
            P += a[:, j, None] * rows
        return P
