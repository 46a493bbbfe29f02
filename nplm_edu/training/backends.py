"""How one minibatch is computed: the trainer's backends (:func:`nplm_edu.training.trainer.train`).

A backend holds the model (or its share of it), updates it on a minibatch with the learning rate
the trainer gives, evaluates it, and hands the trainer what a checkpoint needs. :class:`SerialBackend`
is one process with the paper's SGD or Adam (and dropout, tied or frozen parameters); the
algorithms of section 3 are backends in :mod:`nplm_edu.training.parallel`.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..numerics.threads import set_threads
from .batches import WindowBatches
from .checkpoint import TrainState, set_params
from .clip import check_clip, clip_grad_norm
from .optim import Adam, dropout_mask, sgd_step


class Backend:
    """What the trainer asks of every backend, declared once. The defaults are those of a process
    holding the whole model: the n-gram windows of :class:`~nplm_edu.training.batches.WindowBatches`,
    evaluation with the model, its parameters for checkpoints, no optimizer state, no random state
    of its own, one update per call of :meth:`update`, Ctrl-C taken between updates.

    ``writer``: this process writes the checkpoint and history (rank 0 of an MPI job).
    ``saves_inside_epochs``: timed and Ctrl-C checkpoints between updates (else at epoch ends only).
    ``flags_signals``: Ctrl-C and SIGTERM set a flag read between updates (else they raise at once:
    hogwild, whose epoch is one call). ``progress``: set by the trainer, called with the examples
    done so far while one call of :meth:`update` runs (hogwild's epoch)."""

    writer = True
    saves_inside_epochs = True
    flags_signals = True
    progress = None

    def __init__(self, model):
        self.model = model

    def batches(self, data, config):
        """The plan of an epoch (its batches, validation data, fingerprint of the data)."""
        return WindowBatches(data, self.model.order, config)

    def update(self, *batch_and_lr) -> float:
        """One call on a batch of the plan, with the learning rate last; returns its mean training loss."""
        raise NotImplementedError

    def updates_in(self, count: int) -> int:
        """Updates one call of :meth:`update` made, on a batch of ``count`` examples."""
        return 1

    def stop_requested(self, flag: bool, now: bool = False) -> bool:
        """Whether to stop now, given this process's Ctrl-C / SIGTERM flag (called after every update,
        and with ``now`` at the end of every epoch)."""
        return flag

    def perplexity(self, contexts, targets) -> float:
        return self.model.perplexity(contexts, targets, batch=1024)

    def params(self) -> dict:
        """The arrays a checkpoint saves as the parameters."""
        return self.model.params

    def load(self, params: dict) -> None:
        set_params(self.model, params)

    def extra_arrays(self) -> dict:
        """More arrays for the checkpoint (optimizer state, a stream's carried state)."""
        return {}

    def load_extra(self, arrays: dict, state: TrainState) -> None:
        pass

    def save_rng(self, state: TrainState) -> None:
        """Put this backend's random state (the dropout masks') into ``state`` before a checkpoint."""

    def epoch_extra(self) -> dict:
        """More fields for the epoch's line of the history."""
        return {}

    def batch_bytes(self, K: int) -> int:
        """A lower bound on the memory one update on K examples takes beside the parameters, in all
        the processes of this machine."""
        return self.model.batch_bytes(K)


class SerialBackend(Backend):
    """One process: the model's own forward/backward and the optimizer of ``config`` (a
    :class:`~nplm_edu.training.trainer.TrainConfig`).

    The paper's SGD without dropout uses the model's fused ``sgd_update`` when the model declares
    one (``fused_sgd``: the gradient of [U W] is never stored); otherwise ``loss_and_grads`` and
    :func:`~nplm_edu.training.optim.sgd_step` or Adam. ``clip``: the gradient's norm clipped at this
    value before each step (:mod:`nplm_edu.training.clip`; None: never), as the recurrent models are."""

    def __init__(self, model, config, clip: float | None = None):
        super().__init__(model)
        self.config, self.clip = config, None if clip is None else check_clip(clip)
        set_threads(config.threads)  # the output layer split among this many threads (numerics.threads)
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
                           and model.fused_sgd and not model.tied and not frozen and clip is None)

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
        if self.clip is not None:
            clip_grad_norm(grads, self.clip)
        if self.adam is None:
            sgd_step(self.trained, grads, lr, c.weight_decay, m.decayed, fast=True)
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
