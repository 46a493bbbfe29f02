"""A recurrent network that sees only the last n-1 words: the recurrent cell read as a window model.

To measure what a recurrent network gains from the words beyond the NPLM's window, the same cell
(the same parameters, sizes and output layer) is given exactly the context an NPLM of order n has:
each word w_t is predicted from the n-1 words before it, read from a zero state::

    h_0 = 0,   h_k = cell(C(w_{t-n+k}), h_{k-1})  for k = 1 .. n-1,   P(w_t | w_{t-n+1} .. w_{t-1}) = softmax(b + U h_{n-1})

so no word further back can change the prediction. It is a window model like the NPLM
(:class:`~nplm_edu.models.lm.LanguageModel`: contexts (K, n-1), ``probs``, ``log_prob``), trained by
the NPLM's window trainer on shuffled windows (:class:`~nplm_edu.training.backends.SerialBackend`);
its dropout masks arrive as the NPLM's (``mask_x`` (K, (n-1) m) on the n-1 input rows, ``mask_a``
(K, h) on h_{n-1}). The loss of a batch is the mean NLL of its targets, each scored once, at the
last step of its window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from ..models.lm import LanguageModel
from ..models.rnn import RecurrentConfig
from .recurrent import recurrent_model


@dataclass
class WindowRecurrentConfig:
    """A recurrent cell (``cell``, m, h as :class:`~nplm_edu.models.rnn.RecurrentConfig`) read over
    windows of n-1 words."""

    V: int
    cell: str = "lstm"
    n: int = 5
    m: int = 256
    h: int = 256
    dtype: str = "float32"
    seed: int = 0

    def recurrent(self) -> RecurrentConfig:
        return RecurrentConfig(V=self.V, cell=self.cell, m=self.m, h=self.h, dtype=self.dtype, seed=self.seed)

    def validate(self) -> None:
        self.recurrent().validate()
        if not isinstance(self.n, int) or self.n < 2:
            raise UserError(f"n must be a whole number >= 2 (one context word), got {self.n!r}", setting="n")


class WindowRecurrent(LanguageModel):
    """The recurrent cell of ``config`` predicting each word from its n-1 predecessors only (see the
    module docstring). ``fast``: the cell of :mod:`nplm_edu.numerics.recurrent` (else the reference)."""

    def __init__(self, config: WindowRecurrentConfig, fast: bool = True):
        config.validate()
        self.config, self.V, self.order = config, config.V, config.n
        self.kind = f"{config.cell}-window"
        self.cell = recurrent_model(config.recurrent(), fast=fast)
        self.params, self.decayed, self.tied = self.cell.params, self.cell.decayed, False

    def num_params(self) -> int:
        return self.cell.num_params()

    def batch_bytes(self, K: int) -> int:
        """The scores of K windows' last steps and the cell's T K states."""
        dt = np.dtype(self.config.dtype).itemsize
        return K * (self.V + 8 * (self.order - 1) * self.config.h) * dt

    def _inputs(self, contexts, mask_x):
        """Contexts (K, n-1) as the cell's batch, and the NPLM-shaped mask (K, (n-1) m) time-major."""
        X = np.asarray(contexts)
        if X.ndim != 2 or X.shape[1] != self.order - 1:
            raise UserError(f"contexts must have shape (K, {self.order - 1}), got {X.shape}")
        if mask_x is not None:
            mask_x = mask_x.reshape(len(X), self.order - 1, self.config.m).transpose(1, 0, 2)  # (n-1, K, m)
        return X, mask_x

    def loss_and_grads(self, contexts, targets, mask_x=None, mask_a=None):
        """Mean NLL of the targets (K,) given their contexts (K, n-1), and its gradient (dense)."""
        X, mx = self._inputs(contexts, mask_x)
        if self.cell.sparse_grads:  # the fast cell
            loss, grads, words = self.cell.last_step_sparse_grads(X, targets, mx, mask_a)
            gC = np.zeros_like(self.params["C"])
            gC[words] = grads["C"]
            return loss, {**grads, "C": gC}
        return self._reference_loss_and_grads(X, np.asarray(targets), mx, mask_a)

    def _reference_loss_and_grads(self, X, y, mask_x, mask_a):
        """The same with the reference cell: its forward over the window, the output layer at the
        last step only, its backward from there."""
        P, cell, (K, T), h = self.params, self.cell, X.shape, self.config.h
        cache = cell.forward(X, None, mask_x)
        a = cache["inputs"]["U"][-K:]  # (K, h) h_{n-1}: the last step's rows (time-major)
        a = a if mask_a is None else a * mask_a  # dropout on it
        loss, out_cache = cell.output.loss(P, {"U": a}, y)
        g_in, grads = cell.output.backward(P, out_cache)
        ga = np.zeros((T, K, h), a.dtype)  # dL/dh_t: nothing from the steps before the last
        ga[-1] = g_in["U"] if mask_a is None else g_in["U"] * mask_a  # backward through dropout
        grads.update(cell.backward(cache, ga))
        return loss, {k: grads[k] for k in P}

    def _last(self, contexts) -> dict:
        X, _ = self._inputs(contexts, None)
        return {"U": self.cell.forward(X)["inputs"]["U"][-len(X):]}  # (K, h) h_{n-1}

    def log_probs(self, contexts) -> np.ndarray:
        """log P(. | context) (K, |V|)."""
        return self.cell.output.log_probs(self.params, self._last(contexts))

    def probs(self, contexts) -> np.ndarray:
        return np.exp(self.log_probs(contexts))

    def log_prob(self, contexts, targets) -> np.ndarray:
        return self.cell.output.log_prob(self.params, self._last(contexts), np.asarray(targets))

    def perplexity(self, contexts, targets, batch: int = 1024, progress: str | None = None) -> float:
        return super().perplexity(contexts, targets, batch, progress)

