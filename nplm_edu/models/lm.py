"""The interface every language model in this package shares (n-gram, neural, mixtures).

A model of order n predicts w_t from the n-1 previous words. Contexts are int arrays (K, n-1) in
chronological order (``contexts[:, -1]`` is w_{t-1}); :meth:`nplm_edu.data.corpus.Corpus.windows` makes them.
Perplexity is exp of the mean negative log-probability over every scored token (section 4 of the
paper: every token counts alike, words, punctuation and marks).
"""

from __future__ import annotations

import numpy as np

from ..progress import progress_bar


class LanguageModel:
    """Base class: subclasses set ``order`` and ``V`` and implement :meth:`probs` (and may
    override :meth:`log_prob` with something faster than gathering from full rows).

    ``fused_sgd``: a network that says True has ``sgd_update(contexts, targets, lr, weight_decay)``,
    the paper's SGD step taken as the gradients are found (none stored), which the trainer then uses
    for plain SGD; every other network is trained from ``loss_and_grads``."""

    order: int
    V: int
    fused_sgd = False

    def probs(self, contexts: np.ndarray) -> np.ndarray:
        """Next-word distributions for a batch of contexts (K, n-1): a (K, |V|) array, rows sum to 1."""
        raise NotImplementedError

    def log_prob(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Natural-log probability of each target given its context: (K,)."""
        p = self.probs(contexts)  # (K, |V|)
        with np.errstate(divide="ignore"):
            return np.log(p[np.arange(len(targets)), targets])

    def total_log_prob(self, contexts: np.ndarray, targets: np.ndarray, batch: int = 4096,
                       progress: str | None = None) -> float:
        """Sum of log P(w_t | context) over all windows, computed in batches to bound memory; with
        ``progress``, a progress bar of that name (shown once scoring has taken a second)."""
        total = 0.0
        with progress_bar(total=len(targets), desc=progress, unit="token", unit_scale=True, delay=1, leave=False,
                  disable=progress is None) as bar:
            for i in range(0, len(targets), batch):
                total += float(np.sum(self.log_prob(contexts[i:i + batch], targets[i:i + batch]), dtype=np.float64))
                bar.update(min(batch, len(targets) - i))
        return total

    def perplexity(self, contexts: np.ndarray, targets: np.ndarray, batch: int = 4096,
                   progress: str | None = None) -> float:
        """exp(-(1/T) sum_t log P(w_t | context_t)) over the given windows."""
        contexts = np.asarray(contexts)
        k = self.order - 1
        if contexts.shape[1] > k:  # longer windows than this model needs: keep the most recent words
            contexts = contexts[:, contexts.shape[1] - k:]
        return float(np.exp(-self.total_log_prob(contexts, targets, batch, progress) / len(targets)))
