"""Training a Transformer with the NPLM's trainer: blocks of the training stream, every position predicted.

The NPLM learns from one window per example: n-1 words, one prediction. A causal Transformer reading
a block of T = n_ctx words predicts at every position t the word after it from the words up to t
(:mod:`nplm_edu.models.transformer`), so one block gives T predictions for the price of one pass.
An epoch cuts the training stream into blocks of T + 1 tokens overlapping by one (inputs
w_s .. w_{s+T-1}, next words w_{s+1} .. w_{s+T}) starting at s = o, o + T, o + 2T, ..., with an
offset o drawn anew each epoch in 0 .. T-1 (so a word is not always at the same position of its
block), and visits the blocks in the order of one permutation, K = ``TrainConfig.batch`` at a time;
both are drawn from the trainer's generator, so a resumed run visits the same blocks.

Scoring is the window model's (:meth:`~nplm_edu.models.transformer.Transformer.perplexity`): every
word of validation or test is predicted from exactly the n_ctx words before it (reaching back into
the split before it, as the NPLM's windows do), read at the last position of its own window, so no
word is scored with less context than another; it costs one pass over n_ctx positions per word.

:class:`BlockBackend` is a backend of :func:`nplm_edu.training.trainer.train`: the same loop,
checkpoints (Adam's moments and the clipping statistics in the extra arrays: a resumed run
continues bit for bit), early stopping, progress bar and stop on a non-finite loss as the NPLM. Each update: the mean
NLL over the K T positions and its gradient, the gradient norm clipped at ``clip`` when set
(:mod:`nplm_edu.training.clip`), then the paper's SGD rule or Adam, weight decay on the weight
matrices and tables only (``model.decayed``). No dropout.
"""

from __future__ import annotations

import time

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..data.corpus import Corpus
from ..errors import UserError
from ..models.transformer import Transformer, TransformerConfig
from ..numerics.threads import set_threads
from ..numerics.transformer import FastTransformer
from .backends import Backend
from .checkpoint import TrainState, build_from_meta, network_from_checkpoint
from .clip import check_clip, clip_grad_norm
from .optim import Adam, sgd_step


class BlockBatches:
    """The plan of one epoch: blocks of T inputs and their T next words, K blocks a batch."""

    unit = "tok"

    def __init__(self, train, valid, T: int, K: int):
        train = np.asarray(train)
        self.n_blocks = (len(train) - T) // T  # as many at every offset 0 .. T-1
        if self.n_blocks < 1:
            raise UserError(f"a training stream of {len(train)} tokens has no two blocks of n_ctx = {T} words")
        self.win = sliding_window_view(train, T + 1)  # (N - T, T + 1) a view: the block at s is row s
        self.T, self.K = T, K
        self.n_batches = -(-self.n_blocks // K)
        self.per_epoch = self.n_blocks * T  # words predicted per epoch
        self.valid = valid
        self.fingerprint = (train, None if valid is None else valid[1])

    def order(self, rng: np.random.Generator) -> np.ndarray:
        """The start of every block of this epoch, in the order visited: offset + T * permutation."""
        offset = int(rng.integers(self.T))
        return offset + self.T * rng.permutation(self.n_blocks)

    def limit(self, order, updates_left):
        return order

    def done(self, batches: int) -> int:
        return min(batches * self.K, self.n_blocks) * self.T

    def batch(self, order, j: int):
        w = self.win[order[j * self.K:(j + 1) * self.K]]  # (K, T + 1)
        return (w[:, :-1], w[:, 1:]), w.shape[0] * self.T  # inputs, next words (K, T); words predicted


class BlockBackend(Backend):
    """One process training a :class:`~nplm_edu.models.transformer.Transformer` on blocks (see the
    module docstring) with SGD or Adam, and gradient-norm clipping at ``clip`` (None: none)."""

    def __init__(self, model, config, clip: float | None = None):
        super().__init__(model)
        self.config, self.clip = config, (None if clip is None else check_clip(clip))
        set_threads(config.threads)
        if config.dropout_x or config.dropout_a:
            raise UserError("dropout is not offered for the Transformer: set dropout_x and dropout_a to 0")
        if config.tie != model.tied:
            raise UserError(f"tie={config.tie} but the Transformer was built with tie={model.tied}: tying is "
                            "the model's setting (TransformerConfig.tie); give the training the same", setting="tie")
        self.trained = {k: p for k, p in model.params.items() if not (model.tied and k == "U")}
        self.adam = (Adam(self.trained, config.beta1, config.beta2, config.eps, config.weight_decay,
                          decayed=model.decayed) if config.optimizer == "adam" else None)
        self.norms = np.zeros(3)  # this epoch: sum of gradient norms, updates, updates clipped
        self.valid_seconds = 0.0

    def batches(self, data, config):
        """The epoch plan from a Corpus, or from (train ids, valid ids or None)."""
        config.validate()
        T = self.model.config.n_ctx
        if isinstance(data, Corpus):
            train, valid = data.train, (data.windows("valid", T + 1) if len(data.valid) else None)
        else:
            train, v = data
            valid = None if v is None else _windows(np.asarray(v), T)
        return BlockBatches(train, valid, T, config.batch)

    def update(self, X, Y, lr: float) -> float:
        """One update on K blocks (K, T): returns their mean NLL before the update."""
        loss, grads = self.model.loss_and_grads(X, Y)
        if self.clip is not None:
            norm = clip_grad_norm(grads, self.clip)
            self.norms += (norm, 1, norm > self.clip)
        if self.adam is None:
            sgd_step(self.trained, grads, lr, self.config.weight_decay, self.model.decayed, fast=True)
        else:
            self.adam.step(self.model.params, grads, lr)
        return loss

    def perplexity(self, contexts, targets) -> float:
        t0 = time.monotonic()
        out = self.model.perplexity(contexts, targets)
        self.valid_seconds = time.monotonic() - t0
        return out

    def epoch_extra(self) -> dict:
        s, n, clipped = self.norms
        self.norms = np.zeros(3)
        out = {"valid_seconds": round(self.valid_seconds, 2)}
        if self.clip is not None:
            out.update(grad_norm_mean=round(float(s / max(n, 1)), 4), clipped_fraction=round(float(clipped / max(n, 1)), 4))
        return out

    def extra_arrays(self) -> dict:
        out = {"blocks/clip": np.array([np.nan if self.clip is None else self.clip]), "blocks/norms": self.norms.copy()}
        return {**out, **(self.adam.arrays() if self.adam is not None else {})}

    def load_extra(self, arrays: dict, state: TrainState) -> None:
        got = arrays.get("blocks/clip")
        mine = np.array([np.nan if self.clip is None else self.clip])
        if got is None or not np.array_equal(got, mine, equal_nan=True):
            raise UserError(f"cannot resume with clip={self.clip}: the checkpoint was trained with another clip "
                            "(or not by blocks)", setting="clip")
        self.norms = arrays["blocks/norms"].copy()
        if self.adam is not None:
            try:
                self.adam.load(arrays, state.step)
            except KeyError as e:
                raise UserError(f"the checkpoint has no Adam state {e}: it was not trained with Adam") from None


def _windows(ids: np.ndarray, T: int):
    """(contexts (N, T), targets (N,)): each word of ``ids`` after the first T, with the T words before it."""
    win = sliding_window_view(ids, T + 1)
    return win[:, :-1], win[:, -1]


def transformer_from_checkpoint(path, best: bool = True):
    """The fast Transformer of a checkpoint, with its best parameters (lowest validation perplexity)
    when stored and ``best``, else the latest; one clear error for another kind of model. Its
    :meth:`~nplm_edu.models.transformer.Transformer.window_model` scores and samples it."""
    def build(meta):
        return build_from_meta(path, lambda config: FastTransformer(TransformerConfig(**config)), meta["model"])

    return network_from_checkpoint(path, (Transformer.kind,), "a Transformer", build, best)
