"""One training loop for every way of training the NPLM (section 4 of the paper, and after).

Epochs visit the training examples in the order of one permutation per epoch, drawn from one
``numpy.random.Generator`` seeded with ``TrainConfig.seed``; minibatches of K examples update the
parameters by the rule of :mod:`nplm_edu.training.optim` (the paper's SGD or Adam, with the schedule
lr / (1 + r t) * lr_decay^epoch); after every epoch the validation perplexity decides early stopping
(``patience`` epochs without a better one), and the best parameters are kept.

How one minibatch is computed, and which batches an epoch has, is a *backend*
(:class:`~nplm_edu.training.backends.Backend`: :class:`SerialBackend` by default; a recurrent
model's stream in :mod:`nplm_edu.training.stream`; the output-block and hogwild algorithms of
section 3 in :mod:`nplm_edu.training.parallel`). What a run keeps, saves and falls back on, and what
it says when it stops, is the :class:`~nplm_edu.training.keeper.CheckpointKeeper`'s: checkpoints
after every epoch, every ``checkpoint_every_minutes`` and on Ctrl-C or SIGTERM (where the backend
allows it), bit-exact resume on the same data, and a clear stop keeping the last checkpoint
validated at an epoch's end when the loss becomes NaN, infinite or explodes.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict

import numpy as np

from ..data.corpus import Corpus
from ..errors import UserError
from ..models.input import WithInput
from ..progress import progress_bar
from .backends import Backend, SerialBackend
from .checkpoint import TrainingDiverged, TrainState, data_fingerprints, nothing_to_train
from .config import TrainConfig
from .guards import Interrupt, RunFailed, check_memory, exploded, interruption_says, safe_exp, sigterm_as_ctrl_c
from .keeper import CheckpointKeeper, resume_state
from .optim import learning_rate

__all__ = ["TrainConfig", "TrainingDiverged", "Backend", "SerialBackend", "train"]


def train(model, corpus_or_windows, config: TrainConfig, out_dir=None, resume: bool = False, callback=None,
          callback_every: int = 100, quiet: bool = False, backend: Backend | None = None, on_epoch=None,
          info: dict | None = None) -> dict:
    """Minibatch training with validation after every epoch and early stopping (section 4).

    ``corpus_or_windows``: a Corpus, or ((train_contexts, train_targets), (valid_contexts,
    valid_targets) or None). ``callback(step, model)`` runs every ``callback_every`` updates;
    ``on_epoch(history)`` after every epoch. With ``out_dir``: ``checkpoint.npz`` and ``history.json``.
    ``resume``: continue from ``out_dir/checkpoint.npz`` (one clear error if there is none).
    At the end the model holds the parameters with the best validation perplexity (the last ones
    without validation data). Returns the history dict."""
    backend = backend or SerialBackend(model, config)
    plan, run = backend.batches(corpus_or_windows, config), _Run(model, config, backend, quiet)
    run.start(corpus_or_windows, plan, out_dir, resume, info)
    state, keeper = run.state, run.keeper
    with run.signals() as stop:
        while run.more():
            run.rng.bit_generator.state = state.rng_state  # the order of this epoch, also after resume
            order = plan.limit(plan.order(run.rng), run.updates_left())
            run.t_epoch, run.last_save = time.monotonic() - state.epoch_seconds, time.monotonic()
            run.c_epoch = time.process_time() - state.epoch_cpu_seconds  # this process's CPU, all its threads
            with run.epoch_bar(plan) as bar:  # whatever ends the epoch early, its error gets a line of its own
                for j in range(state.batch_in_epoch, plan.n_batches):
                    if run.limit_hit():
                        break
                    loss, lr = run.update(*plan.batch(order, j))
                    state.batch_in_epoch = j + 1
                    run.show(bar, plan, j, loss, lr)
                    if not backend.saves_inside_epochs and backend.stop_requested(stop.flag):
                        raise keeper.stopped(saved_now=False)  # on every rank at once (output blocks)
                    run.call_back(callback, callback_every, stop)
                    if run.save_due(stop.flag):  # Ctrl-C, or checkpoint_every_minutes since the last save
                        run.save()
                        if stop.flag:
                            raise keeper.stopped(saved_now=True)
            if run.limit_hit() and state.batch_in_epoch < plan.n_batches:
                run.save()  # max_updates reached inside an epoch: save, no validation of a partial epoch
                break
            run.end_epoch(plan.valid)  # validate, keep the best, stop early, save
            if on_epoch is not None:
                on_epoch(run.history)
            if run.more() and not backend.saves_inside_epochs and backend.stop_requested(stop.flag, now=True):
                raise keeper.stopped(saved_now=False)  # Ctrl-C since the last agreement (in validation, say)
    return run.finish()


class _Run:
    """One run of :func:`train`: its state, history and keeper, and the steps of the loop."""

    def __init__(self, model, config: TrainConfig, backend: Backend, quiet: bool):
        self.model, self.config, self.backend, self.quiet = model, config, backend, quiet
        self.rng = np.random.default_rng(config.seed)
        self.best = None

    def start(self, data, plan, out_dir, resume: bool, info) -> None:
        """Everything checked before the first update; the state to start from (fresh or resumed)."""
        model, config, backend = self.model, self.config, self.backend
        if config.frozen_names() and not isinstance(backend, SerialBackend):
            raise UserError("frozen parameters are for serial training only")
        first = min(config.batch, plan.per_epoch)  # the largest batch an update meets, checked before the first
        check_memory(backend.batch_bytes(first), f"one update on a batch of {first:,} examples")  # not once out
        words = data.vocab.words if isinstance(data, Corpus) else None  # a corpus's, not bare windows'
        fingerprints = data_fingerprints(model.V, *plan.fingerprint, words=words)  # (recorded, or by ids alone)
        self.fingerprint = fingerprints[0]
        if resume and out_dir is None:
            raise UserError("resume needs an output folder holding checkpoint.npz")
        out = out_dir if backend.writer else None
        if out is not None:
            CheckpointKeeper.prepare(out, model.params, 2 if config.optimizer == "adam" else 0)
        state = TrainState(rng_state=self.rng.bit_generator.state)
        if resume:
            state, self.best = resume_state(f"{out_dir}/checkpoint.npz", model, config, fingerprints, backend,
                                            plan.n_batches)
            said = nothing_to_train(state, config)
            if said and not self.quiet and backend.writer:
                print(said, flush=True)
        self.state = state
        self.history = {"model": asdict(model.config), "train": asdict(config), **({"parallel": info} if info else {}),
                        "epochs": state.history}
        self.keeper = CheckpointKeeper(out, state, self.history, resumed=resume)

    @contextmanager
    def signals(self):
        """Ctrl-C and SIGTERM as the backend takes them (yields the flag), floating-point warnings off
        (the guards check the loss), and a bare KeyboardInterrupt leaving with what the run keeps."""
        flags = self.backend.flags_signals
        with Interrupt(flags) as stop, (nullcontext() if flags else sigterm_as_ctrl_c()), \
                np.errstate(over="ignore", invalid="ignore", divide="ignore"), \
                interruption_says(lambda: self.keeper.stopped(False)):
            yield stop

    def more(self) -> bool:
        """Epochs left, not stopped early, max_updates not reached."""
        return self.state.epoch < self.config.epochs and not self.state.done and not self.limit_hit()

    def updates_left(self) -> int | None:
        return None if self.config.max_updates is None else self.config.max_updates - self.state.step

    def limit_hit(self) -> bool:
        return self.config.max_updates is not None and self.state.step >= self.config.max_updates

    def lr(self) -> float:
        c, s = self.config, self.state
        return learning_rate(c.lr, c.decay_rate, s.step, c.lr_decay, s.epoch)

    def epoch_bar(self, plan):
        state, config = self.state, self.config
        bar = progress_bar(total=plan.per_epoch, initial=plan.done(state.batch_in_epoch), unit=plan.unit,
                           desc=f"epoch {state.epoch + 1}/{config.epochs}", leave=False,
                           disable=self.quiet or not self.backend.writer)
        self.backend.progress = lambda n: bar.update(n - bar.n)  # examples done inside one update (hogwild)
        return bar

    def update(self, args, count: int) -> tuple[float, float]:
        """One call of the backend's update on a batch, its loss checked and counted: (loss, lr)."""
        state, keeper, lr = self.state, self.keeper, self.lr()
        try:
            loss = self.backend.update(*args, lr)
        except TrainingDiverged as e:  # said by the backend (hogwild: which worker, about which update)
            if e.report is None:
                raise
            raise keeper.diverged(*e.report) from None
        except RunFailed as e:  # a worker failed (killed, crashed): say what the run keeps
            raise UserError(keeper.with_kept(str(e))) from None
        if exploded(loss, self.model.V):  # the loss of this update, the one after those counted in state.step
            raise keeper.diverged(f"the training loss became {loss:.4g}", at=f"update {state.step + 1}")
        state.step += self.backend.updates_in(count)
        state.loss_sum += loss * count
        state.loss_count += count
        return loss, lr

    def show(self, bar, plan, j: int, loss: float, lr: float) -> None:
        """The progress bar at the end of batch j, with the loss and rate now and then."""
        bar.update(plan.done(j + 1) - bar.n)
        if not self.quiet and (j % 20 == 0 or j == plan.n_batches - 1):
            bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.3g}", refresh=False)

    def save_due(self, interrupted: bool) -> bool:
        """A checkpoint inside the epoch now: on Ctrl-C, or checkpoint_every_minutes after the last one
        (for a backend that saves inside epochs)."""
        late = time.monotonic() - self.last_save > 60 * self.config.checkpoint_every_minutes
        return self.backend.saves_inside_epochs and (interrupted or late)

    def call_back(self, callback, every: int, stop) -> None:
        """``callback(step, model)`` every ``every`` updates; a KeyboardInterrupt from it is Ctrl-C."""
        if callback is None or self.state.step % every:
            return
        try:
            callback(self.state.step, self.model)
        except KeyboardInterrupt:  # as Ctrl-C: a checkpoint of this update (output blocks: at the next agreement)
            if not self.backend.flags_signals:
                raise
            stop.flag = True

    def save(self) -> None:
        """A checkpoint of the run as it stands (collective for the output-block backend)."""
        if self.state.batch_in_epoch:  # inside an epoch: the time it has taken so far goes on after resume
            self.state.epoch_seconds = time.monotonic() - self.t_epoch
            self.state.epoch_cpu_seconds = time.process_time() - self.c_epoch
        params = self.backend.params()  # every rank calls it
        self.backend.save_rng(self.state)
        meta = {"kind": self.model.kind, "model": asdict(self.model.config),
                "train": asdict(self.config), "data": self.fingerprint, "state": asdict(self.state)}
        if isinstance(self.model, WithInput):  # an input layer other than C: which, and how to rebuild it
            meta["input"] = {self.model.input.name: self.model.input.describe()}
        self.keeper.save(params, meta, self.best, self.backend.extra_arrays())
        self.last_save = time.monotonic()

    def end_epoch(self, valid) -> None:
        """Validation, early stopping and the best parameters; the history line; the epoch's checkpoint."""
        state, config, backend = self.state, self.config, self.backend
        entry = {"epoch": state.epoch + 1, "updates": state.step,
                 "train_ppl": safe_exp(state.loss_sum / max(state.loss_count, 1)), "lr": self.lr()}
        if valid is not None:
            entry["valid_ppl"] = backend.perplexity(*valid)
            if not math.isfinite(entry["valid_ppl"]):
                raise self.keeper.diverged(f"the validation perplexity became {entry['valid_ppl']}")
            if state.best_valid is None or entry["valid_ppl"] < state.best_valid:
                state.best_valid, state.best_epoch, state.bad_epochs = entry["valid_ppl"], entry["epoch"], 0
                params = backend.params()
                self.best = {k: v.copy() for k, v in params.items()} if params is not None else None
            else:
                state.bad_epochs += 1
                state.done = state.bad_epochs >= config.patience
        entry["seconds"] = time.monotonic() - self.t_epoch
        entry["cpu_seconds"] = time.process_time() - self.c_epoch
        entry.update(backend.epoch_extra())
        state.history.append(entry)
        self.history.update(best_valid_ppl=state.best_valid, best_epoch=state.best_epoch)  # so far: read mid-run
        if not self.quiet and backend.writer:
            v = f"  valid ppl {entry['valid_ppl']:8.2f}" if "valid_ppl" in entry else ""
            on = " (dropout on)" if config.dropout_x or config.dropout_a else ""
            print(f"epoch {entry['epoch']:3d}  train ppl{on} {entry['train_ppl']:8.2f}{v}  "
                  f"lr {entry['lr']:.3g}  {entry['seconds']:.1f} s", flush=True)
        state.epoch, state.batch_in_epoch, state.loss_sum, state.loss_count = state.epoch + 1, 0, 0.0, 0
        state.epoch_seconds, state.epoch_cpu_seconds, state.rng_state = 0.0, 0.0, self.rng.bit_generator.state
        self.save()
        self.keeper.write_history()

    def finish(self) -> dict:
        if self.best is not None:
            self.backend.load(self.best)  # early stopping: keep the best parameters
        state = self.state
        self.history.update(best_valid_ppl=state.best_valid, best_epoch=state.best_epoch, updates=state.step,
                            stopped_early=bool(state.done))
        self.keeper.write_history()
        return self.history
