"""How one minibatch is computed: the trainer's backends (:func:`nplm_edu.training.trainer.train`).

A backend holds the model (or its share of it), updates it on a minibatch with the learning rate
the trainer gives, evaluates it, and hands the trainer what a checkpoint needs. :class:`SerialBackend`
is one process with the paper's SGD or Adam (and dropout, tied or frozen parameters); the
algorithms of section 3 are backends in :mod:`nplm_edu.training.parallel`.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .checkpoint import TrainState, set_params
from .optim import Adam, dropout_mask, sgd_step


class ModelBackend:
    """What every backend shares when the process holds the whole model: evaluation with it, its
    parameters for checkpoints, no optimizer state, no random state of its own. A backend adds
    ``update(contexts, targets, lr) -> loss`` (one minibatch) or ``run_epoch(order, state, config)``."""

    writer = True  # this process writes the checkpoint and history
    interruptible = True  # Ctrl-C / SIGTERM and timed checkpoints inside an epoch
    stops_together = False  # if not interruptible: Ctrl-C / SIGTERM still stop it, at an update stop_requested agrees on

    def __init__(self, model):
        self.model = model

    def perplexity(self, contexts, targets) -> float:
        return self.model.perplexity(contexts, targets, batch=1024)

    def params(self) -> dict:
        return self.model.params

    def load(self, params: dict) -> None:
        set_params(self.model, params)

    def extra_arrays(self) -> dict:
        return {}

    def load_extra(self, arrays: dict, state: TrainState) -> None:
        pass

    def save_rng(self, state: TrainState) -> None:
        pass

    def epoch_extra(self) -> dict:
        return {}

    def batch_bytes(self, K: int) -> int:
        """A lower bound on the memory one update on K examples takes beside the parameters, in all
        the processes of this machine (0 when the model cannot say)."""
        return self.model.batch_bytes(K) if hasattr(self.model, "batch_bytes") else 0

    def stop_requested(self, flag: bool, now: bool = False) -> bool:
        """Whether to stop now, given this process's Ctrl-C / SIGTERM flag (called after every update
        when ``stops_together``, and with ``now`` at the end of every epoch)."""
        return flag


class SerialBackend(ModelBackend):
    """One process: the model's own forward/backward and the optimizer of ``config`` (a
    :class:`~nplm_edu.training.trainer.TrainConfig`).

    The paper's SGD without dropout uses the model's fused ``sgd_update`` when it has one (the
    gradient of [U W] is never stored); otherwise ``loss_and_grads`` and
    :func:`~nplm_edu.training.optim.sgd_step` or Adam."""

    def __init__(self, model, config):
        super().__init__(model)
        self.config = config
        if config.tie and not model.tied:
            model.tie()
        frozen = config.frozen_names()
        self.trained = {k: p for k, p in model.params.items() if not (model.tied and k == "U") and k not in frozen}
        self.adam = (Adam(self.trained, config.beta1, config.beta2, config.eps, config.weight_decay,
                          decayed=model.decayed) if config.optimizer == "adam" else None)
        self.drop_rng = np.random.default_rng([config.seed, 1])  # the dropout masks
        cfg = model.config
        self._widths = ((cfg.n - 1) * cfg.m, cfg.h)
        self._fused_sgd = (config.optimizer == "sgd" and not config.dropout_x and not config.dropout_a
                           and hasattr(model, "sgd_update") and not model.tied and not frozen)

    def update(self, contexts, targets, lr: float) -> float:
        """One minibatch update; returns its mean NLL before the update."""
        c, m = self.config, self.model
        if self._fused_sgd:
            return m.sgd_update(contexts, targets, lr, c.weight_decay)
        dt = np.dtype(m.config.dtype)
        mx = dropout_mask(self.drop_rng, (len(targets), self._widths[0]), c.dropout_x, dt)
        ma = dropout_mask(self.drop_rng, (len(targets), self._widths[1]), c.dropout_a, dt)
        loss, grads = m.loss_and_grads(contexts, targets, mx, ma)
        grads = {k: g for k, g in grads.items() if k in self.trained}  # frozen parameters stay as they are
        if self.adam is None:
            sgd_step(self.trained, grads, lr, c.weight_decay, m.decayed)
        else:
            self.adam.step(m.params, grads, lr)
        return loss

    def extra_arrays(self) -> dict:
        return self.adam.arrays() if self.adam is not None else {}

    def load_extra(self, arrays: dict, state: TrainState) -> None:
        if self.adam is not None:
            try:
                self.adam.load(arrays, state.step)
            except KeyError as e:
                raise UserError(f"the checkpoint has no Adam state {e}: it was not trained with Adam") from None
        if state.drop_state is not None:
            self.drop_rng.bit_generator.state = state.drop_state

    def save_rng(self, state: TrainState) -> None:
        state.drop_state = self.drop_rng.bit_generator.state
