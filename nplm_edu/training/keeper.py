"""What a training run keeps, saves, falls back to and says when it stops: the checkpoint keeper.

The training loop (:func:`nplm_edu.training.trainer.train`) asks the keeper to save after every
epoch, now and then inside one, and on Ctrl-C; everything else about checkpoints is here, so the
loop reads as the loop. The rules:

- ``checkpoint.npz`` in the output folder holds the run (:mod:`nplm_edu.training.checkpoint`);
  ``history.json`` beside it the epochs so far. Only the process that writes (rank 0) has a folder.
- A checkpoint written at an epoch's end has been validated; one written inside an epoch has not.
  While ``checkpoint.npz`` holds one from inside an epoch, the last validated one waits beside it in
  ``checkpoint.epoch.npz``, and a run that diverges falls back on it.
- Every way a run stops says in its one line what is kept and where resume continues from.

:func:`resume_state` reads a checkpoint back and returns where the run stands, refusing in one
line anything that would not continue the same run.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from ..data.files import atomic_write, remove_stale_temporaries
from ..errors import UserError, a_model
from .checkpoint import (TrainingDiverged, TrainState, check_space, check_types, check_writable, epoch_copy,
                         keep_aside, load_checkpoint, save_checkpoint, saved_at)
from .config import TRAJECTORY, TrainConfig


class CheckpointKeeper:
    """The checkpoints and history of one run in ``out`` (None: nothing is written, e.g. a rank > 0).

    ``state`` and ``history`` are the run's own (the keeper reads them when it saves and writes
    them when the run stops); ``resumed``: whether ``state`` was read from ``out``'s checkpoint."""

    def __init__(self, out, state: TrainState, history: dict, resumed: bool = False):
        self.out = Path(out) if out is not None else None
        self.path = self.out / "checkpoint.npz" if self.out is not None else None
        self.state, self.history = state, history
        # where the checkpoint this run can fall back on stands: the one it resumed from or last wrote
        # (a file left by an earlier run that a fresh start replaces is not it)
        self.last_saved = saved_at(state) if resumed and self.path is not None else None
        # whether checkpoint.npz holds an epoch's end (validated); if not, the last one that did waits
        # in checkpoint.epoch.npz
        self.holds_epoch_end = not (resumed and state.batch_in_epoch)
        if self.path is not None and resumed and self.holds_epoch_end:
            epoch_copy(self.path).unlink(missing_ok=True)  # an earlier epoch's (a fresh start's first save removes it)

    @staticmethod
    def prepare(out, params: dict, moments: int) -> None:
        """Before any training: ``out`` writable, temporaries of a killed run removed, and room for the
        checkpoints of ``params`` (with ``moments`` optimizer arrays per parameter)."""
        out = check_writable(out)
        path = out / "checkpoint.npz"
        remove_stale_temporaries(path, epoch_copy(path), out / "history.json")
        # a checkpoint holds the parameters, the best ones and the moments; while one is written inside
        # an epoch, the one before and the epoch's copy are still there (less what the folder holds)
        per = sum(p.nbytes for p in params.values()) * (2 + moments)
        there = sum(f.stat().st_size for f in (path, epoch_copy(path)) if f.exists())
        check_space(out, max(per, 3 * per - there), "the checkpoints of this model")

    # ----------------------------------------------------------------- saving
    def write_history(self) -> None:
        if self.out is not None:
            atomic_write(self.out / "history.json", lambda f: f.write(json.dumps(self.history, indent=1)),
                         binary=False)

    def save(self, params: dict | None, meta: dict, best: dict | None, extra: dict) -> None:
        """Save the run; at an epoch's end (``state.batch_in_epoch == 0``) that is a validated checkpoint,
        inside an epoch the last validated one is kept aside first
        (:func:`~nplm_edu.training.checkpoint.epoch_copy`). A failed write is one line saying what is
        kept; parameters that stopped being finite are a divergence."""
        if self.path is None:
            return
        at_end, aside, writing = self.state.batch_in_epoch == 0, False, self.path  # the file a failure names
        try:
            if self.last_saved is not None and not at_end and self.holds_epoch_end:
                writing = epoch_copy(self.path)
                keep_aside(self.path, writing)
                aside, writing = True, self.path
            save_checkpoint(self.path, params, meta, best, extra)
        except (TrainingDiverged, OSError) as e:  # checkpoint.npz is as it was: no copy of it is needed
            if aside:
                epoch_copy(self.path).unlink(missing_ok=True)
            if isinstance(e, OSError):  # a full disk, say: the one line names the file and what is kept
                raise UserError(self.with_kept(f"cannot write {writing}: {e.strerror or e}")) from None
            if at_end:  # the epoch just counted is not saved: the line and the history stand before it
                self.state.drop_last_epoch()
                self.history.update(best_valid_ppl=self.state.best_valid, best_epoch=self.state.best_epoch)
            raise self.diverged("the parameters stopped being finite") from None
        if at_end or self.last_saved is None:  # validated now, or this run's first save replaced an
            epoch_copy(self.path).unlink(missing_ok=True)  # earlier run's file: the copy is no one's
        self.last_saved, self.holds_epoch_end = saved_at(self.state), at_end

    # ----------------------------------------------------------------- what a stop says
    def kept(self) -> str | None:
        """What survives of the run, as the one line of a failure or of Ctrl-C says it."""
        if self.path is None:
            return None
        if self.last_saved is None:
            return "no checkpoint was written yet"
        return f"the checkpoint {self.last_saved} is kept in {self.path}; resume continues from there"

    def with_kept(self, message: str) -> str:
        said = self.kept()
        return f"{message} ({said})" if said else message

    def stopped(self, saved_now: bool) -> KeyboardInterrupt:
        """Ctrl-C or SIGTERM: the history written, and what the one line (interrupted (...)) says is kept."""
        self.write_history()
        said = (f"saved in {self.path}; resume continues from there" if saved_now and self.path is not None
                else self.kept())
        return KeyboardInterrupt(said) if said else KeyboardInterrupt()

    def fall_back(self) -> str | None:
        """After a divergence: checkpoint.npz back to the last checkpoint validated at an epoch's end,
        and what the one line says of it (a checkpoint saved inside the first epoch is removed)."""
        if self.path is None:
            return None
        if not self.holds_epoch_end:
            if self.state.epoch and epoch_copy(self.path).exists():  # kept aside at the last epoch's end
                os.replace(epoch_copy(self.path), self.path)
                self.last_saved, self.holds_epoch_end = f"at the end of epoch {self.state.epoch}", True
            elif not self.state.history:  # the first epoch: nothing validated to fall back on
                self.path.unlink(missing_ok=True)
                self.last_saved, self.holds_epoch_end = None, True
                return "no epoch was validated yet: the checkpoint saved inside it is removed"
            else:  # the copy is gone (a folder copied without it, say): the file stays, for what it is
                return (f"the checkpoint {self.last_saved} in {self.path} was saved inside an epoch, and no "
                        "validated one was kept aside")
        if self.last_saved is None:
            return "no checkpoint was written yet"
        return f"the last validated checkpoint, {self.last_saved}, is kept in {self.path}"

    def diverged(self, what: str, at: str | None = None, detail: str = "") -> TrainingDiverged:
        """The one line of a diverging run, after falling back on the last validated checkpoint."""
        self.write_history()
        where = f"at {at or f'update {self.state.step}'} of epoch {self.state.epoch + 1}{detail}"
        said = self.fall_back()
        return TrainingDiverged(f"{what} {where}" + (f" ({said})" if said else "") + "; try a smaller learning rate")


def resume_state(path, model, config: TrainConfig, fingerprints, backend, n_batches: int):
    """(state, best parameters or None) of the checkpoint at ``path``, loaded into ``backend``; one
    clear UserError when it is not this model, these settings or this data (``fingerprints``)."""
    path = Path(path)
    meta, params, best, extra = load_checkpoint(path)
    check_types(TrainConfig, meta["train"], "training", path)
    kind = model.kind
    if meta["kind"] != kind or meta["model"] != asdict(model.config):
        raise UserError(f"{path} holds {a_model(meta['kind'])} model {meta['model']}, not this {kind} model "
                        f"{asdict(model.config)}")
    for k in TRAJECTORY:
        if meta["train"].get(k) != getattr(config, k):
            raise UserError(f"cannot resume with {k}={getattr(config, k)}: the checkpoint used {meta['train'].get(k)}")
    if meta["train"].get("frozen", "") != config.frozen:  # older checkpoints froze nothing
        raise UserError(f"cannot resume with frozen={config.frozen!r}: the checkpoint used "
                        f"{meta['train'].get('frozen', '')!r}")
    if meta.get("data") not in fingerprints:
        raise UserError(f"{path} was trained on other data (another corpus, split or vocabulary): "
                        "resume it on the same corpus, or start afresh instead of resuming", setting="resume")
    state = TrainState.from_meta(meta["state"])
    state.done = state.done and state.bad_epochs >= config.patience  # a larger patience goes on
    if not isinstance(state.rng_state, dict):
        raise UserError(f"{path} holds no training state to resume from (no example order)")
    backend.load(params)
    backend.load_extra(extra, state)  # a backend's own settings first (a stream's T sets the epoch's length)
    if state.batch_in_epoch > n_batches:
        raise UserError(f"{path} holds no training state to resume from (batch {state.batch_in_epoch:,} of "
                        f"an epoch of {n_batches:,})")
    return state, best
