"""One training loop for every way of training the NPLM (section 4 of the paper, and after).

Epochs visit the training examples in the order of one permutation per epoch, drawn from one
``numpy.random.Generator`` seeded with ``TrainConfig.seed``; minibatches of K examples update the
parameters by the rule of :mod:`nplm_edu.training.optim` (the paper's SGD or Adam, with the schedule
lr / (1 + r t) * lr_decay^epoch); after every epoch the validation perplexity decides early stopping
(``patience`` epochs without a better one), and the best parameters are kept.

The batches of an epoch are :class:`~nplm_edu.training.batches.WindowBatches` (n-gram windows,
permuted) unless the backend brings its own plan (``backend.batches``: a recurrent model's stream,
:mod:`nplm_edu.training.stream`).
How one minibatch is computed is a *backend* (:class:`SerialBackend` here; the output-block and
hogwild algorithms of section 3 are backends in :mod:`nplm_edu.training.parallel`). The loop, its
:class:`~nplm_edu.training.checkpoint.TrainState`, its checkpoint format and its guards are the same
for all: checkpoints after every epoch, every ``checkpoint_every_minutes`` and on Ctrl-C or SIGTERM
(where the backend allows it), bit-exact resume on the same data, ``max_updates``, and a clear stop
with the last checkpoint validated at an epoch's end kept when the loss becomes NaN, infinite or
explodes (a checkpoint saved inside the epoch since then is not: no validation has seen it).
"""

from __future__ import annotations

import json
import math
import os
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..data.files import atomic_write
from ..errors import UserError, a_model, check_field_types, check_seed, option
from ..progress import progress_bar
from ..models.nplm import PARAM_NAMES
from .checkpoint import (TrainingDiverged, TrainState, check_space, check_types, check_writable, data_fingerprints,
                         epoch_copy, keep_aside, load_checkpoint, nothing_to_train, remove_stale_temporaries, saved_at,
                         save_checkpoint)
from .backends import ModelBackend, SerialBackend
from .batches import WindowBatches, epoch_order, training_windows  # noqa: F401 -- importable from here too
from .guards import Interrupt, check_memory, exploded, interruption_says, safe_exp, sigterm_as_ctrl_c
from .optim import learning_rate

__all__ = ["TrainConfig", "TrainingDiverged", "ModelBackend", "SerialBackend", "train"]

OPTIMIZERS = ("sgd", "adam")  # the paper's SGD rule; Adam (Kingma and Ba 2015)


@dataclass
class TrainConfig:
    """Every training choice (section 4; the paper on Brown: K = 1, lr 1e-3, r = 1e-8, weight decay 1e-4).

    ``optimizer``: "sgd" (the paper's rule) or "adam"; ``lr_decay``: lr multiplied by it after every
    epoch; ``dropout_x``, ``dropout_a``: inverted-dropout probabilities on x and a; ``tie``: U = C.
    ``examples_per_epoch`` limits each epoch to the first examples of its shuffled order;
    ``max_updates`` stops the run after that many updates (None: no limit).
    ``frozen``: comma-separated parameters never updated (e.g. "C": the word features stay as they
    were initialised or loaded, the paper's fixed-feature comparison of section 1.2); serial only."""

    epochs: int = 20
    batch: int = 128
    lr: float = 0.1
    decay_rate: float = 1e-8
    lr_decay: float = 1.0
    weight_decay: float = 1e-4
    optimizer: str = "sgd"
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    dropout_x: float = 0.0
    dropout_a: float = 0.0
    tie: bool = False
    seed: int = 0
    patience: int = 3
    checkpoint_every_minutes: float = 10.0
    examples_per_epoch: int | None = None
    max_updates: int | None = None
    frozen: str = ""

    def frozen_names(self) -> tuple[str, ...]:
        """The parameters ``frozen`` names, as a tuple ("C, H" -> ("C", "H"))."""
        return tuple(x.strip() for x in self.frozen.split(",") if x.strip())

    def validate(self) -> None:
        check_field_types(self)  # a checkpoint written now must read back (1e4 is no count of updates)
        for name in ("epochs", "batch", "patience"):
            if getattr(self, name) < 1:
                raise UserError(f"{option(name)} must be at least 1, got {getattr(self, name)}")
        for name in ("lr", "decay_rate", "weight_decay", "checkpoint_every_minutes", "eps", "lr_decay"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise UserError(f"{option(name)} must be a finite number >= 0, got {v}")
        for name in ("lr", "lr_decay"):
            if getattr(self, name) == 0:
                raise UserError(f"{option(name)} must be positive, got 0")
        for name in ("beta1", "beta2", "dropout_x", "dropout_a"):
            v = getattr(self, name)
            if not 0 <= v < 1:
                raise UserError(f"{option(name)} must lie in [0, 1), got {v}")
        if self.optimizer not in OPTIMIZERS:
            raise UserError(f"--optimizer must be {' or '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        check_seed(self.seed, option("seed"))
        for name in ("examples_per_epoch", "max_updates"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise UserError(f"{option(name)} must be at least 1, got {v}")
        bad = [x for x in self.frozen_names() if x not in PARAM_NAMES]
        if bad:
            raise UserError(f"--frozen: unknown parameter {bad[0]!r}: use names among {', '.join(PARAM_NAMES)}")
        if self.tie and "C" in self.frozen_names():
            raise UserError("--frozen C with tied embeddings (--tie) would freeze U too: untie them or train C")


# these change the trajectory: a resumed run must use the same values
TRAJECTORY = ("batch", "lr", "decay_rate", "lr_decay", "weight_decay", "optimizer", "beta1", "beta2", "eps",
              "dropout_x", "dropout_a", "tie", "seed", "examples_per_epoch")


# --------------------------------------------------------------------------- the loop
def train(model, corpus_or_windows, config: TrainConfig, out_dir=None, resume: bool = False, callback=None,
          callback_every: int = 100, quiet: bool = False, backend=None, on_epoch=None, info: dict | None = None) -> dict:
    """Minibatch training with validation after every epoch and early stopping (section 4).

    ``corpus_or_windows``: a Corpus, or ((train_contexts, train_targets), (valid_contexts,
    valid_targets) or None). ``callback(step, model)`` runs every ``callback_every`` updates;
    ``on_epoch(history)`` after every epoch. With ``out_dir``: ``checkpoint.npz`` and ``history.json``.
    ``resume``: continue from ``out_dir/checkpoint.npz`` (one clear error if there is none).
    At the end the model holds the parameters with the best validation perplexity (the last ones
    without validation data). Returns the history dict."""
    if config.frozen_names() and backend is not None and not isinstance(backend, SerialBackend):
        raise UserError("frozen parameters are for serial training only")
    backend = backend or SerialBackend(model, config)
    plan = (backend.batches(corpus_or_windows, config) if hasattr(backend, "batches")
            else WindowBatches(corpus_or_windows, model.order, config))
    valid, per_epoch, V = plan.valid, plan.per_epoch, model.V
    first = min(config.batch, per_epoch)  # the largest batch an update meets, checked before the first
    check_memory(backend.batch_bytes(first), f"one update on a batch of {first:,} examples")  # not once out
    words = getattr(getattr(corpus_or_windows, "vocab", None), "words", None)  # a corpus's, not bare windows'
    fingerprints = data_fingerprints(V, *plan.fingerprint, words=words)  # (recorded, or by ids alone)
    fingerprint = fingerprints[0]
    out = Path(out_dir) if out_dir is not None and backend.writer else None
    ckpt = out / "checkpoint.npz" if out is not None else None
    if resume and out_dir is None:
        raise UserError("resume needs an output folder holding checkpoint.npz")
    if out is not None:
        check_writable(out)
        remove_stale_temporaries(ckpt, epoch_copy(ckpt), out / "history.json")
        # a checkpoint holds the parameters, the best ones and Adam's two moments; while one is written
        # inside an epoch, the one before and the epoch's copy are still there (less what the folder holds)
        per = sum(p.nbytes for p in model.params.values()) * (4 if config.optimizer == "adam" else 2)
        there = sum(f.stat().st_size for f in (ckpt, epoch_copy(ckpt)) if f.exists())
        check_space(out, max(per, 3 * per - there), "the checkpoints of this model")
    kind = getattr(model, "kind", "nplm")
    rng = np.random.default_rng(config.seed)
    state = TrainState(rng_state=rng.bit_generator.state)
    best = None
    if resume:
        path = Path(out_dir) / "checkpoint.npz"
        meta, params, best, extra = load_checkpoint(path)
        check_types(TrainConfig, meta["train"], "training", path)
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
                            "resume it on the same corpus, or start afresh with --force instead of --resume")
        state = TrainState.from_meta(meta["state"])
        state.done = state.done and state.bad_epochs >= config.patience  # a larger patience goes on
        if not isinstance(state.rng_state, dict):
            raise UserError(f"{path} holds no training state to resume from (no example order)")
        backend.load(params)
        backend.load_extra(extra, state)  # a backend's own settings first (a stream's T sets the epoch's length)
        if state.batch_in_epoch > plan.n_batches:
            raise UserError(f"{path} holds no training state to resume from (batch {state.batch_in_epoch:,} of "
                            f"an epoch of {plan.n_batches:,})")
    # where the checkpoint this run can fall back on stands: the one it resumed from or last wrote (a
    # file left by an earlier run that --force restarts is not it)
    last_saved = saved_at(state) if resume and ckpt is not None else None
    # whether checkpoint.npz holds an epoch's end (validated); if not, the last one that did waits in
    # checkpoint.epoch.npz, and a run that diverges falls back on it
    holds_epoch_end = not (resume and state.batch_in_epoch)
    if ckpt is not None and resume and holds_epoch_end:
        epoch_copy(ckpt).unlink(missing_ok=True)  # an earlier epoch's (a fresh start's first save removes it)
    history = {"model": asdict(model.config), "train": asdict(config), **({"parallel": info} if info else {}),
               "epochs": state.history}

    def write_history():
        if out is not None:
            atomic_write(out / "history.json", lambda f: f.write(json.dumps(history, indent=1)), binary=False)

    def checkpoint():
        """Save the run; at an epoch's end (``state.batch_in_epoch == 0``) that is a validated checkpoint,
        inside an epoch the last validated one is kept aside first (:func:`epoch_copy`)."""
        nonlocal last_saved, holds_epoch_end
        params = backend.params()  # collective for the output-block backend: every rank calls it
        if ckpt is None:
            return
        at_end, aside = state.batch_in_epoch == 0, False
        backend.save_rng(state)
        meta = {"kind": kind, "model": asdict(model.config), "train": asdict(config), "data": fingerprint,
                "state": asdict(state)}
        writing = ckpt  # the file a failed write names
        try:
            if last_saved is not None and not at_end and holds_epoch_end:
                writing = epoch_copy(ckpt)
                keep_aside(ckpt, writing)
                aside, writing = True, ckpt
            save_checkpoint(ckpt, params, meta, best, backend.extra_arrays())
        except (TrainingDiverged, OSError) as e:  # checkpoint.npz is as it was: no copy of it is needed
            if aside:
                epoch_copy(ckpt).unlink(missing_ok=True)
            if isinstance(e, OSError):  # a full disk, say: the one line names the file and what is kept
                raise UserError(with_kept(f"cannot write {writing}: {e.strerror or e}")) from None
            if at_end:  # the epoch just counted is not saved: the line and the history stand before it
                state.drop_last_epoch()
                history.update(best_valid_ppl=state.best_valid, best_epoch=state.best_epoch)
            raise diverged("the parameters stopped being finite") from None
        if at_end or last_saved is None:  # validated now, or this run's first save replaced an earlier
            epoch_copy(ckpt).unlink(missing_ok=True)  # run's file: the copy is no longer anyone's
        last_saved, holds_epoch_end = saved_at(state), at_end

    def fall_back() -> str | None:
        """After a divergence: checkpoint.npz back to the last checkpoint validated at an epoch's end,
        and what the one line says of it (a checkpoint saved inside the first epoch is removed)."""
        nonlocal last_saved, holds_epoch_end
        if ckpt is None:
            return None
        if not holds_epoch_end:
            if state.epoch and epoch_copy(ckpt).exists():  # kept aside at the end of the last finished epoch
                os.replace(epoch_copy(ckpt), ckpt)
                last_saved, holds_epoch_end = f"at the end of epoch {state.epoch}", True
            elif not state.history:  # the first epoch: nothing validated to fall back on
                ckpt.unlink(missing_ok=True)
                last_saved, holds_epoch_end = None, True
                return "no epoch was validated yet: the checkpoint saved inside it is removed"
            else:  # the copy is gone (a folder copied without it, say): the file stays, for what it is
                return (f"the checkpoint {last_saved} in {ckpt} was saved inside an epoch, and no validated one "
                        "was kept aside")
        if last_saved is None:
            return "no checkpoint was written yet"
        return f"the last validated checkpoint, {last_saved}, is kept in {ckpt}"

    def kept() -> str | None:  # what survives of the run, as the one line of a failure or of Ctrl-C says it
        if ckpt is None:
            return None
        if last_saved is None:
            return "no checkpoint was written yet"
        return f"the checkpoint {last_saved} is kept in {ckpt}; resume continues from there"

    def with_kept(message: str) -> str:
        said = kept()
        return f"{message} ({said})" if said else message

    def stopped(saved_now: bool) -> KeyboardInterrupt:  # Ctrl-C or SIGTERM: the history written, and
        write_history()  # what the one line (interrupted (...)) says is kept
        said = f"saved in {ckpt}; resume continues from there" if saved_now and ckpt is not None else kept()
        return KeyboardInterrupt(said) if said else KeyboardInterrupt()

    def diverged(what: str, at: str | None = None, detail: str = ""):
        bar.close()
        write_history()
        where = f"at {at or f'update {state.step}'} of epoch {state.epoch + 1}{detail}"
        said = fall_back()
        return TrainingDiverged(f"{what} {where}" + (f" ({said})" if said else "") + "; try a smaller learning rate")

    if resume and not quiet and backend.writer:
        said = nothing_to_train(state, config)
        if said:
            print(said, flush=True)
    K, n_batches = config.batch, plan.n_batches
    last_save = time.monotonic()
    limit_hit = False
    flagged = backend.interruptible or backend.stops_together  # Ctrl-C and SIGTERM: a flag read between updates
    errstate = np.errstate(over="ignore", invalid="ignore", divide="ignore")
    # a bare KeyboardInterrupt (Ctrl-C where nothing is saved inside an epoch, an agreed stop) leaves
    # saying what the run keeps
    with Interrupt(flagged) as stop, (nullcontext() if flagged else sigterm_as_ctrl_c()), errstate, \
            interruption_says(lambda: stopped(False)):
        while state.epoch < config.epochs and not state.done and not limit_hit:
            rng.bit_generator.state = state.rng_state  # the order of this epoch, also after resume
            order = plan.order(rng)
            t_epoch = time.monotonic() - state.epoch_seconds
            bar = progress_bar(total=per_epoch, initial=plan.done(state.batch_in_epoch), unit=plan.unit,
                               desc=f"epoch {state.epoch + 1}/{config.epochs}", disable=quiet or not backend.writer,
                               leave=False)
            try:  # whatever ends the epoch early, its error gets a line of its own, not the bar's
                if hasattr(backend, "run_epoch"):  # the whole epoch at once (hogwild's worker processes)
                    left = None if config.max_updates is None else config.max_updates - state.step
                    order = order if left is None else order[:max(0, left) * K]
                    try:
                        def advance(n: int) -> None:  # the workers have done n examples of the epoch
                            bar.update(n - bar.n)

                        loss, updates = backend.run_epoch(order, state, config, progress=advance)
                    except TrainingDiverged as e:  # said by the backend (hogwild: which worker, about which update)
                        if not hasattr(e, "report"):
                            raise
                        raise diverged(*e.report) from None
                    except UserError as e:  # a worker failed (killed, crashed): say what the run keeps
                        raise UserError(with_kept(str(e))) from None
                    state.step += updates
                    state.loss_sum, state.loss_count = loss * len(order), len(order)
                    bar.update(len(order) - bar.n)
                    limit_hit = config.max_updates is not None and state.step >= config.max_updates
                for j in range(state.batch_in_epoch, 0 if hasattr(backend, "run_epoch") else n_batches):
                    if config.max_updates is not None and state.step >= config.max_updates:
                        limit_hit = True
                        break
                    args, count = plan.batch(order, j)
                    lr = learning_rate(config.lr, config.decay_rate, state.step, config.lr_decay, state.epoch)
                    loss = backend.update(*args, lr)
                    if exploded(loss, V):  # the loss of this update, the one after those counted in state.step
                        raise diverged(f"the training loss became {loss:.4g}", at=f"update {state.step + 1}")
                    state.step += 1
                    state.batch_in_epoch = j + 1
                    state.loss_sum += loss * count
                    state.loss_count += count
                    bar.update(count)
                    if not quiet and (j % 20 == 0 or j == n_batches - 1):
                        bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.3g}", refresh=False)
                    if backend.stops_together and backend.stop_requested(stop.flag):
                        raise KeyboardInterrupt  # on every rank at once: no checkpoint inside the epoch
                    interrupted = stop.flag
                    try:
                        if callback is not None and state.step % callback_every == 0:
                            callback(state.step, model)
                    except KeyboardInterrupt:  # from the callback: as Ctrl-C (output blocks: at the next agreement)
                        if not flagged:
                            raise
                        interrupted = stop.flag = True
                    if backend.interruptible and (interrupted or time.monotonic() - last_save
                                                  > 60 * config.checkpoint_every_minutes):
                        state.epoch_seconds = time.monotonic() - t_epoch
                        checkpoint()
                        last_save = time.monotonic()
                        if interrupted:
                            raise stopped(True)
            finally:
                bar.close()
            if limit_hit and state.batch_in_epoch < n_batches and not hasattr(backend, "run_epoch"):
                state.epoch_seconds = time.monotonic() - t_epoch
                checkpoint()  # max_updates reached inside an epoch: save, no validation of a partial epoch
                break
            # ---- end of epoch: validation, early stopping, checkpoint
            entry = {"epoch": state.epoch + 1, "updates": state.step,
                     "train_ppl": safe_exp(state.loss_sum / max(state.loss_count, 1)),
                     "lr": learning_rate(config.lr, config.decay_rate, state.step, config.lr_decay, state.epoch)}
            if valid is not None:
                entry["valid_ppl"] = backend.perplexity(*valid)
                if not math.isfinite(entry["valid_ppl"]):
                    raise diverged(f"the validation perplexity became {entry['valid_ppl']}")
                if state.best_valid is None or entry["valid_ppl"] < state.best_valid:
                    state.best_valid, state.best_epoch, state.bad_epochs = entry["valid_ppl"], entry["epoch"], 0
                    params = backend.params()
                    best = {k: v.copy() for k, v in params.items()} if params is not None else None
                else:
                    state.bad_epochs += 1
                    state.done = state.bad_epochs >= config.patience
            entry["seconds"] = time.monotonic() - t_epoch
            entry.update(backend.epoch_extra())
            state.history.append(entry)
            history.update(best_valid_ppl=state.best_valid, best_epoch=state.best_epoch)  # so far: read mid-run
            if not quiet and backend.writer:
                v = f"  valid ppl {entry['valid_ppl']:8.2f}" if "valid_ppl" in entry else ""
                on = " (dropout on)" if config.dropout_x or config.dropout_a else ""
                print(f"epoch {entry['epoch']:3d}  train ppl{on} {entry['train_ppl']:8.2f}{v}  "
                      f"lr {entry['lr']:.3g}  {entry['seconds']:.1f} s", flush=True)
            state.epoch, state.batch_in_epoch, state.loss_sum, state.loss_count = state.epoch + 1, 0, 0.0, 0
            state.epoch_seconds, state.rng_state = 0.0, rng.bit_generator.state
            checkpoint()
            last_save = time.monotonic()
            write_history()
            if on_epoch is not None:
                on_epoch(history)
            more = state.epoch < config.epochs and not state.done and not limit_hit
            if more and backend.stops_together and backend.stop_requested(stop.flag, now=True):
                raise KeyboardInterrupt  # Ctrl-C since the last agreement (in validation, say): this epoch is saved
    if best is not None:
        backend.load(best)  # early stopping: keep the best parameters
    history.update(best_valid_ppl=state.best_valid, best_epoch=state.best_epoch, updates=state.step,
                   stopped_early=bool(state.done))
    write_history()
    return history
