"""What one epoch of the NPLM visits: n-gram windows in the order of one permutation, K at a time.

The trainer (:func:`nplm_edu.training.trainer.train`) draws each epoch's permutation from its one
generator, so the same seed visits the same examples in the same order, also after a resume; a
backend may bring its own plan instead (a recurrent model's stream, :mod:`nplm_edu.training.stream`).
``config`` is the trainer's :class:`~nplm_edu.training.trainer.TrainConfig`.
"""

from __future__ import annotations

import numpy as np

from ..data.corpus import Corpus
from ..errors import UserError


def epoch_order(n_examples: int, rng: np.random.Generator) -> np.ndarray:
    """The order in which one epoch visits the examples: one permutation drawn from ``rng``."""
    return rng.permutation(n_examples)


def _windows(data, n: int):
    """(train_ctx, train_tgt), (valid_ctx, valid_tgt) or None from a Corpus or a pair of pairs."""
    if isinstance(data, Corpus):
        return data.windows("train", n), data.windows("valid", n)
    train, valid = data if len(data) == 2 and isinstance(data[0], (tuple, list)) else (data, None)
    return tuple(train), (tuple(valid) if valid is not None else None)


def training_windows(data, n: int, config):
    """Validate ``config``; return (train contexts, train targets, valid windows or None, examples per epoch)."""
    config.validate()
    (tr_ctx, tr_tgt), valid = _windows(data, n)
    N = len(tr_tgt)
    if N == 0:
        raise UserError("no training examples")
    per_epoch = N if config.examples_per_epoch is None else min(N, config.examples_per_epoch)
    return tr_ctx, tr_tgt, valid, per_epoch


class WindowBatches:
    """The NPLM's epoch: the first ``examples_per_epoch`` windows of one permutation drawn from the
    trainer's generator, K = ``config.batch`` at a time."""
    unit = "ex"

    def __init__(self, data, n: int, config):
        self.ctx, self.tgt, self.valid, self.per_epoch = training_windows(data, n, config)
        self.K, self.n_batches = config.batch, -(-self.per_epoch // config.batch)
        self.fingerprint = (self.tgt, None if self.valid is None else self.valid[1])

    def order(self, rng: np.random.Generator) -> np.ndarray:
        return epoch_order(len(self.tgt), rng)[:self.per_epoch]

    def limit(self, order, updates_left):  # each batch is one update: the trainer counts them itself
        return order

    def done(self, batches: int) -> int:  # examples in the first `batches` batches of an epoch
        return min(batches * self.K, self.per_epoch)

    def batch(self, order, j: int):  # (the arguments of backend.update before lr, examples in batch j)
        idx = order[j * self.K:(j + 1) * self.K]
        return (self.ctx[idx], self.tgt[idx]), len(idx)
