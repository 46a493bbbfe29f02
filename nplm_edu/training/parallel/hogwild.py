"""Data-parallel training on shared memory, without locks (section 3.1 of the paper).

P worker processes each run SGD on their own disjoint slice of the training examples and write
their updates straight into one copy of the parameters in shared memory, asynchronously and
without any lock: two workers may
read-modify-write the same number at once, and one of the updates is then lost. The paper found
that this noise did not hurt, whereas the locked version (``locked=True`` here: a
``multiprocessing.Lock`` held while a worker writes its update) spent its time waiting.

Each worker's step is :class:`OutputBlockSGD` with M = 1 (one block: the whole output layer), so
the update is the serial trainer's; only the interleaving differs. Workers are forked (Linux), and
the parameters live in anonymous shared memory (``mmap`` of no file) that the forked workers
inherit: no file in ``/dev/shm``, no resource-tracker process, and the kernel frees the memory when
the last process holding it ends, however the run ends (kill -9 of any process included).
"""

from __future__ import annotations

import math
import mmap
import multiprocessing as mp
import os
import signal
import time
from dataclasses import dataclass
from functools import partial

import numpy as np

from ...errors import UserError
from ...numerics.threads import set_threads, threads_per_process
from ..checkpoint import TrainingDiverged, set_params
from ..guards import RunFailed, exploded, sigterm_as_ctrl_c
from ..optim import learning_rate
from ..backends import Backend
from ..batches import WindowBatches
from .output_block import OutputBlockSGD, epoch_batches


@dataclass
class HogwildResult:
    params: dict  # final parameters {C, H, d, U, W, b} (private copies)
    workers: int
    locked: bool
    examples: int  # training examples seen, all workers together
    updates: int  # parameter updates, all workers together
    seconds: float  # wall-clock time from the first worker's start to the last one's end
    train_nll: float  # mean NLL of the examples, each measured just before its own update

    @property
    def updates_per_s(self) -> float:
        return self.updates / self.seconds


class HogwildDiverged(TrainingDiverged):
    """A worker's training loss became NaN, infinite or exploded (the shared parameters are then ruined)."""

    def __init__(self, loss: float, update: int, worker: int, workers: int):
        self.loss, self.update, self.worker, self.workers = loss, update, worker, workers
        # (what, at, detail) for the trainer's message, which adds the epoch and the checkpoint kept
        self.report = (f"the training loss became {loss:.4g}", f"about update {update}",
                       f" (hogwild worker {worker + 1} of {workers})")
        super().__init__(f"the training loss became {loss:.4g} at about update {update} (hogwild worker {worker + 1} "
                         f"of {workers}); try a smaller learning rate")


class WorkerFailed(RunFailed):
    """A hogwild worker process ended abnormally (killed, or an error inside it)."""


def _die_with_parent(parent: int) -> None:
    """Linux: this process gets SIGTERM when its parent dies, so no orphan keeps running on the
    shared parameters (whose memory the kernel frees with the last of them)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: nothing to do
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _worker(trainer: OutputBlockSGD, rate, contexts, targets, idx, w: int, P: int, t0: int, errors, stop,
            parent: int, done) -> None:
    """SGD over this worker's slice, writing into the shared parameters (in trainer.state) and its
    examples so far into ``done[w]`` (for the parent's progress bar); ``rate(t)``: the learning rate of update t. A diverging loss sets the
    shared ``stop`` flag, which ends every worker at its next update. Ctrl-C is left to the parent
    (one message, not one traceback per worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's SIGTERM-as-Ctrl-C is its own; this one ends here
    _die_with_parent(parent)
    set_threads(threads_per_process(P))  # P workers share the cores: not P times their threads
    try:
        total = 0.0
        for j, batch in enumerate(epoch_batches(idx, trainer.K)):
            if stop.value:  # another worker saw the loss diverge: the shared parameters are ruined
                break
            t = t0 + j * P + w  # about the global number of updates so far (for lr_t)
            loss = trainer.step(contexts[batch], targets[batch], rate(t))
            if exploded(loss, trainer.V):  # non-finite, or far above the uniform model's: diverging
                stop.value = 1
                errors.put(("diverged", (t + 1, w, loss)))  # counted from 1, as the serial trainer's line
                return
            total += loss * len(batch)
            done[w] += len(batch)
        errors.put(("ok", total))  # this worker's summed training NLL
    except BaseException as exc:  # noqa: BLE001 -- report to the parent, which raises
        errors.put(("error", f"worker {w}: {type(exc).__name__}: {exc}"))
        raise


def _wait(procs, stop, done, progress=None) -> None:
    """Wait for the workers, calling ``progress(examples done by all)`` as they go (every 50 ms
    and at the end); as soon as one ends abnormally (killed, crashed), stop the others at once
    instead of letting them finish their slices."""
    while True:  # each exitcode read once a round: a worker may end between two reads
        codes = [p.exitcode for p in procs]
        if all(c is not None for c in codes) or any(c not in (None, 0) for c in codes):
            break
        procs[codes.index(None)].join(timeout=0.05)
        if progress is not None:
            progress(sum(done))
    if any(p.exitcode not in (None, 0) for p in procs):
        stop.value = 1
        _end(procs)
    elif progress is not None:
        progress(sum(done))


def _end(procs) -> None:
    """Terminate the workers still running and reap them all (those not started yet are skipped)."""
    procs = [p for p in procs if p.pid is not None]
    for p in procs:
        if p.exitcode is None:
            p.terminate()
    for p in procs:
        p.join(timeout=5)
        if p.exitcode is None:
            p.kill()
            p.join()


def _summed_loss(procs, reports) -> float:
    """The workers' summed training NLL from their reports; WorkerFailed if one ended abnormally,
    HogwildDiverged (the earliest) if one's loss diverged."""
    workers = len(procs)
    failed = [msg for kind, msg in reports if kind == "error"]
    if failed or any(p.exitcode != 0 for p in procs):
        w, code = next(((i, p.exitcode) for i, p in enumerate(procs) if p.exitcode != 0), (None, None))
        how = (failed[0] if failed else f"worker {w + 1} of {workers} ended with "
               + (f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"))
        raise WorkerFailed(f"a hogwild worker failed: {how}; the other workers were stopped")
    diverged = sorted(v for kind, v in reports if kind == "diverged")
    if diverged:
        update, w, loss = diverged[0]  # the earliest diverging loss
        raise HogwildDiverged(loss, update, w, workers)
    return sum(v for _, v in reports)


def train_hogwild(params: dict, contexts: np.ndarray, targets: np.ndarray, *, workers: int = 2,
                  examples: int | None = None, batch_size: int = 1, lr: float = 1e-3, r: float = 1e-8,
                  lr_decay: float = 1.0, epoch: int = 0, weight_decay: float = 0.0, locked: bool = False,
                  seed: int = 0, order=None, t0: int = 0, trainer_out: list | None = None,
                  progress=None) -> HogwildResult:
    """Train on ``examples`` windows drawn without replacement (seeded order), split into
    ``workers`` disjoint slices, one process each, sharing the parameters (section 3.1).

    ``order``: the example indices to visit (default: a permutation drawn from ``seed``); ``t0``:
    updates done before; update t has the rate lr_t = lr / (1 + r t) * lr_decay^epoch
    (:func:`~nplm_edu.training.optim.learning_rate`). ``params`` is not modified; the result holds the trained parameters. If ``trainer_out`` is a
    list, an M = 1 :class:`OutputBlockSGD` holding the final parameters is appended (for
    evaluation with ``.perplexity``). A worker whose loss diverges (NaN, infinite or exploded) stops every worker
    and :class:`HogwildDiverged` (a ``train.TrainingDiverged``) is raised. ``progress``: called with
    the examples done so far by all workers, while they run."""
    N = len(targets)
    examples = N if examples is None else min(int(examples), N)
    if order is None:
        order = np.random.default_rng(seed).permutation(N)[:examples]
    examples = len(order)
    slices = np.array_split(order, workers)  # disjoint slices of the data, one per worker
    ctx = mp.get_context("fork")
    trainer = OutputBlockSGD(params, lr=lr, r=r, weight_decay=weight_decay, batch_size=batch_size)
    rate = partial(learning_rate, lr, r, lr_decay=lr_decay, epoch=epoch)  # t -> lr_t
    trainer.lock = ctx.Lock() if locked else None
    private = dict(trainer.state)
    try:
        for name, arr in private.items():  # every parameter into memory the forked workers share
            shared = np.ndarray(arr.shape, arr.dtype, buffer=mmap.mmap(-1, max(arr.nbytes, 1)))  # anonymous, shared
            shared[...] = arr
            trainer.state[name] = shared
        errors = ctx.SimpleQueue()
        stop = ctx.RawValue("i", 0)  # set by a worker whose loss diverged; read without a lock
        done = ctx.RawArray("q", workers)  # examples each worker has trained on; each writes its own
        procs = [ctx.Process(target=_worker, args=(trainer, rate, contexts, targets, s, w, workers, t0, errors, stop,
                                                   os.getpid(), done), daemon=True)
                 for w, s in enumerate(slices)]
        t0 = time.perf_counter()
        with sigterm_as_ctrl_c():  # from before the first fork: no moment where SIGTERM ends the run silently
            try:
                for p in procs:
                    p.start()
                _wait(procs, stop, done, progress)
            except BaseException:  # Ctrl-C, SIGTERM, an error of our own: no worker outlives the call
                stop.value = 1
                _end(procs)
                raise
        seconds = time.perf_counter() - t0
        train_nll = _summed_loss(procs, [errors.get() for _ in range(len(procs)) if not errors.empty()]) / examples
        for name in trainer.state:  # private copies: the shared memory goes with the last reference to it
            private[name] = np.array(trainer.state[name])
    finally:
        trainer.state.update(private)
    trainer.lock = None
    if trainer_out is not None:
        trainer_out.append(trainer)
    updates = sum(math.ceil(len(s) / batch_size) for s in slices)
    return HogwildResult(trainer.gather(), workers, locked, examples, updates, seconds, train_nll)


class HogwildEpochs(WindowBatches):
    """The serial trainer's epoch as one batch: the P workers train on all of its examples at once."""

    def __init__(self, data, n: int, config):
        super().__init__(data, n, config)
        self.n_batches = 1

    def limit(self, order, updates_left):  # max_updates: the examples of that many updates
        return order if updates_left is None else order[:max(0, updates_left) * self.K]

    def done(self, batches: int) -> int:
        return self.per_epoch if batches else 0

    def batch(self, order, j: int):
        return (order,), len(order)


class HogwildBackend(Backend):
    """Hogwild as a backend of :func:`nplm_edu.training.trainer.train`: each epoch's examples (the
    serial trainer's order) are split over P forked workers sharing the parameters, in one call of
    :meth:`update`. Updates are asynchronous, so runs are not bit-reproducible; checkpoints are
    written after every epoch only, and Ctrl-C or SIGTERM stop the workers at once."""

    saves_inside_epochs = False
    flags_signals = False

    def __init__(self, model, config, windows, workers: int = 2, locked: bool = False):
        if config.optimizer != "sgd" or config.dropout_x or config.dropout_a or config.tie:
            raise UserError("hogwild trains with the paper's SGD only (no Adam, dropout or tied U)")
        if workers < 1:
            raise UserError(f"workers must be at least 1, got {workers}")
        super().__init__(model)
        self.config, self.windows, self.workers, self.locked = config, windows, workers, locked
        self._extra, self.step, self.epoch, self.updates = {}, 0, 0, 0  # updates and epochs done so far

    def batches(self, data, config):
        return HogwildEpochs(data, self.model.order, config)

    def update(self, order, lr: float) -> float:
        """Train on the epoch's ``order`` with P workers; returns the mean training NLL. Each worker's
        update t has the schedule's rate lr_t (``lr``, the rate of the epoch's first update, is not used)."""
        c = self.config
        res = train_hogwild(self.model.params, *self.windows, workers=self.workers, batch_size=c.batch, lr=c.lr,
                            r=c.decay_rate, lr_decay=c.lr_decay, epoch=self.epoch, weight_decay=c.weight_decay,
                            locked=self.locked, order=order, t0=self.step, progress=self.progress)
        set_params(self.model, res.params)
        self._extra = {"updates_per_s": res.updates_per_s}
        self.updates = res.updates
        self.step, self.epoch = self.step + res.updates, self.epoch + 1
        return res.train_nll

    def updates_in(self, count: int) -> int:
        return self.updates

    def load_extra(self, arrays: dict, state) -> None:
        self.step, self.epoch = state.step, state.epoch

    def epoch_extra(self) -> dict:
        return self._extra

    def batch_bytes(self, K: int) -> int:
        """Every worker's update at once: P processes on this machine."""
        return self.workers * super().batch_bytes(K)
