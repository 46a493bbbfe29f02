"""The threads of one process as the output-block algorithm's processors (section 3.2 of the paper).

The paper splits the |V| output units among M processors: each computes the scores of its block,
the softmax's normaliser is combined across blocks, each updates its own rows of U, W and b, and
only the gradient of the hidden layer is summed. The processors may be the threads of one process:
numpy releases the interpreter's lock inside BLAS and inside ufuncs on large arrays, so T threads,
each running single-threaded BLAS on its column block, keep T cores busy.

- :func:`threads` is how many threads the fast paths use (:func:`set_threads`; by default the cores
  this process may use, fewer if ``OMP_NUM_THREADS`` or ``OPENBLAS_NUM_THREADS`` says so);
- :func:`run_blocks` runs ``fn(i, reduce)`` on threads i = 0 .. T-1 (0 is the caller) and waits;
  ``reduce(buf, op)`` combines the T threads' arrays ("MAX" or "SUM", in a fixed order, so the same
  thread count gives the same numbers), as MPI's Allreduce does between processes, and
  ``reduce.gather(buf)`` hands every thread all T arrays, as MPI's Allgather does (also in two
  halves, ``reduce.post(buf)`` then ``reduce.wait()``, with work in between);
- :func:`rowwise`: a loop over blocks of rows on the same threads; on it :func:`sum_of_squares`,
  :func:`scale_inplace` and :func:`sgd_inplace`, the clipping and the SGD step of a large parameter;
- :func:`matmul_columns`: a product whose columns are split among the same threads;
- :func:`one_blas_thread`: BLAS on one thread for a whole step whose output layer is split.
"""

from __future__ import annotations

import math
import os
import queue
import threading
from contextlib import contextmanager

import numpy as np

from .blas import set_blas_threads

_SET = {"threads": None}  # set_threads' value (None: the usable cores)
_LOCAL = threading.local()  # .worker: this thread runs one block of run_blocks


def affinity_cores() -> int:
    """The cores this process may run on (a container or taskset may allow fewer than the machine has)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - no sched_getaffinity (macOS, Windows)
        return os.cpu_count() or 1


def usable_cores() -> int:
    """The cores this process may run on, fewer if OMP_NUM_THREADS or OPENBLAS_NUM_THREADS says so."""
    cores = affinity_cores()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        v = os.environ.get(var, "")
        if v.isdigit() and int(v) > 0:
            return min(cores, int(v))
    return cores


def threads() -> int:
    """How many threads the fast paths use now (1 inside a block of :func:`run_blocks`)."""
    if getattr(_LOCAL, "worker", False):
        return 1
    return _SET["threads"] or usable_cores()


def set_threads(T: int | None) -> None:
    """Use T threads from now on (None: the usable cores), for the blocks and for BLAS outside them."""
    if T is not None and T < 1:
        raise ValueError(f"threads must be at least 1, got {T}")
    _SET["threads"] = T
    set_blas_threads(threads())


def threads_per_process(P: int) -> int:
    """The threads each of P processes sharing this machine's usable cores should take (at least 1):
    hogwild's workers and the ranks of one node, so that P processes do not run P times the cores."""
    return max(1, usable_cores() // max(1, P))


def block_range(V: int, M: int, i: int) -> tuple[int, int]:
    """Output units [start, stop) of block i of M (section 3.2): start = i*ceil(|V|/M),
    length min(ceil(|V|/M), |V| - start).

    >>> [block_range(23, 3, i) for i in range(3)]
    [(0, 8), (8, 16), (16, 23)]
    """
    size = math.ceil(V / M)
    start = min(i * size, V)
    return start, start + max(0, min(size, V - start))


# --------------------------------------------------------------------------- a team of T threads
class _Team:
    """T - 1 persistent worker threads plus the caller. They meet at a barrier for each reduction:
    each thread posts a token to every other thread's inbox and takes T - 1 tokens from its own
    (queue.SimpleQueue is implemented in C and waits without the interpreter's lock, several times
    cheaper than threading.Barrier). Tokens are counted, so a thread already at the next barrier
    cannot let a late one through the current barrier early."""

    def __init__(self, T: int):
        self.T = T
        self.inbox = [queue.SimpleQueue() for _ in range(T)]  # barrier tokens for thread i
        self.tasks = [queue.SimpleQueue() for _ in range(T)]  # the function each worker runs next
        self.done = queue.SimpleQueue()  # (i, ok, result or error) of each worker
        self.lock = threading.Lock()
        self.slots: dict = {}  # (call number, shape, dtype) -> (T, ...) array, one row per thread
        for i in range(1, T):
            threading.Thread(target=self._work, args=(i,), name=f"nplm-block-{i}", daemon=True).start()

    def _work(self, i: int) -> None:
        _LOCAL.worker = True
        while True:
            fn = self.tasks[i].get()
            try:
                self.done.put((i, True, fn(i)))
            except BaseException as e:  # noqa: BLE001 -- handed to the caller, which raises it
                self.done.put((i, False, e))

    def _arrive(self, i: int) -> None:
        """The first half of a barrier: thread i tells every other thread it has arrived."""
        for j in range(self.T):
            if j != i:
                self.inbox[j].put(True)

    def _take(self, i: int) -> None:
        """The second half: returns once every other thread has arrived (at this barrier or a later one)."""
        for _ in range(self.T - 1):
            if not self.inbox[i].get():
                raise threading.BrokenBarrierError

    def _wait(self, i: int) -> None:
        """The barrier: returns once every thread has arrived."""
        self._arrive(i)
        self._take(i)

    def _slot(self, i: int, calls: list, buf: np.ndarray) -> np.ndarray:
        """The (T, ...) array of this reduction (the i-th thread's ``calls[i]``-th), filled with buf in row i."""
        key = (calls[i], buf.shape, buf.dtype.str)
        calls[i] += 1
        slot = self.slots.get(key)
        if slot is None:
            with self.lock:
                slot = self.slots.setdefault(key, np.empty((self.T,) + buf.shape, buf.dtype))
        slot[i] = buf
        return slot

    def run(self, fn) -> list:
        calls = [0] * self.T

        def one(i):
            def post(buf):
                slot = self._slot(i, calls, buf)
                self._arrive(i)
                return slot

            def gather(buf):
                slot = post(buf)
                self._take(i)  # every thread's part is in
                return slot

            def reduce(buf, op):
                slot = gather(buf)
                if op == "MAX":
                    np.max(slot, axis=0, out=buf)
                else:  # "SUM", added in the order of the blocks: the same numbers on every thread
                    buf[...] = slot[0]
                    for j in range(1, self.T):
                        buf += slot[j]

            reduce.gather, reduce.post, reduce.wait = gather, post, lambda: self._take(i)
            try:
                return fn(i, reduce)
            except BaseException:
                for j in range(self.T):  # the others leave their reductions instead of waiting forever
                    if j != i:
                        self.inbox[j].put(False)
                raise

        for i in range(1, self.T):
            self.tasks[i].put(one)
        results, error, pending = [None] * self.T, None, self.T - 1
        try:
            results[0] = one(0)
        except BaseException as e:  # noqa: BLE001 -- re-raised below, after the workers stopped
            error = e
        while pending:  # every worker's answer is taken, even after Ctrl-C: none is left for the next call
            try:
                i, ok, r = self.done.get()
            except BaseException as e:  # noqa: BLE001 -- Ctrl-C while waiting: stop the workers, then wait on
                error = e
                for box in self.inbox:
                    box.put(False)  # a worker at a barrier leaves it
                continue
            pending -= 1
            if ok:
                results[i] = r
            elif error is None or isinstance(error, threading.BrokenBarrierError):
                error = r
        if error is not None:
            for box in self.inbox:  # tokens left by the failed step
                while not box.empty():
                    box.get()
            raise error
        return results


_TEAMS: dict[tuple[int, int], _Team] = {}  # (process id, T): a forked child makes its own team


def run_blocks(fn, T: int) -> list:
    """Call ``fn(i, reduce)`` for i = 0 .. T-1, each on its own thread (0 on the caller's), with
    single-threaded BLAS; returns their results in order. ``reduce(buf, op)``, called by every
    thread in the same order, replaces each thread's ``buf`` by the max ("MAX") or the sum ("SUM")
    of all T threads' ``buf``; ``reduce.gather(buf)`` instead returns the (T, ...) array of all
    T threads' ``buf`` in block order (read-only: one exchange where a combination needs more than a
    max or a sum). ``reduce.post(buf)`` and ``reduce.wait()`` are ``gather`` in two halves, with work
    between them: ``post`` hands over ``buf`` and returns the (T, ...) array at once, which holds
    every thread's part after ``wait``; a thread whose partners arrived during that work does not
    sleep. With one block, ``reduce`` does nothing and has no ``gather``."""
    if T == 1 or getattr(_LOCAL, "worker", False):
        return [fn(i, _alone) for i in range(T)]
    key = (os.getpid(), T)
    team = _TEAMS.get(key)
    if team is None:
        team = _TEAMS[key] = _Team(T)
    before = set_blas_threads(1)  # each block's BLAS on its own thread
    _LOCAL.worker = True
    try:
        return team.run(fn)
    finally:
        _LOCAL.worker = False
        set_blas_threads(before)


@contextmanager
def one_blas_thread(active: bool = True):
    """numpy's BLAS on one thread inside the block (nothing changed if not ``active``): for a whole
    step that splits its work among threads. (After a call on several threads, BLAS's own threads
    keep polling for work for a while, on the cores the blocks need.)"""
    if not active:
        yield
        return
    before = set_blas_threads(1)
    try:
        yield
    finally:
        if before is not None:
            set_blas_threads(before)


def _alone(buf, op) -> None:
    """The reduction of one block with itself (nothing to combine); its ``post`` returns the (1, ...)
    array of every block's part, its own, and ``wait`` has no one to wait for."""


_alone.post = lambda buf: buf[None]
_alone.wait = lambda: None


MIN_ROWWISE = 1 << 19  # entries from which a loop over rows is split among threads (2 MB of float32)


def rowwise(fn, K: int, size: int) -> list:
    """Run ``fn(lo, hi)`` over blocks of rows 0..K: on :func:`threads` threads when the array is big
    (numpy releases the GIL inside ufuncs), else in one call; returns the blocks' results in order.
    Each row is computed the same way either way, so results do not depend on the number of threads."""
    T = min(threads(), K)
    if T <= 1 or size < MIN_ROWWISE:
        return [fn(0, K)]
    bounds = [K * i // T for i in range(T + 1)]
    return run_blocks(lambda i, _: fn(bounds[i], bounds[i + 1]), T)


def _pieces(a: np.ndarray, lo: int, hi: int, size: int = 1 << 16):
    """Rows lo..hi of a in pieces of about ``size`` entries (256 KB of float32: they stay in cache)."""
    step = max(1, size // max(1, a.size // max(1, len(a))))
    for r in range(lo, hi, step):
        yield slice(r, min(r + step, hi))


def sum_of_squares(a: np.ndarray) -> float:
    """The sum of a's squared entries: BLAS's dot product on each block of rows, the blocks' sums
    added in their order (the same thread count gives the same number)."""
    a = a.reshape(1) if a.ndim == 0 else a
    return sum(rowwise(lambda lo, hi: float(np.dot(a[lo:hi].ravel(), a[lo:hi].ravel())), len(a), a.size))


def scale_inplace(a: np.ndarray, s) -> None:
    """In place: a <- s a (s in a's dtype), a block of rows on each thread."""
    s = a.dtype.type(s)

    def block(lo, hi):
        a[lo:hi] *= s

    rowwise(block, len(a), a.size)


def sgd_inplace(p: np.ndarray, g: np.ndarray, lr: float, weight_decay: float = 0.0) -> None:
    """In place: p <- p - lr (g + weight_decay p) (without weight decay: p <- p - lr g), the same
    arithmetic as numpy on the whole arrays, in pieces that stay in cache, a block of rows on each thread."""
    def block(lo, hi):
        for r in _pieces(p, lo, hi):
            p[r] -= lr * (g[r] + weight_decay * p[r]) if weight_decay else lr * g[r]

    rowwise(block, len(p), p.size)


def matmul_columns(a: np.ndarray, b: np.ndarray, out: np.ndarray, T: int, then=None) -> np.ndarray:
    """out = a @ b, out's columns split into T blocks (:func:`block_range`), block i computed on
    thread i with single-threaded BLAS: out[:, lo:hi] = a @ b[:, lo:hi]. Each entry is the same dot
    product as in one call, so the result does not depend on T beyond BLAS's own blocking.
    ``then(lo, hi)``, if given, runs on the same thread after its block's product: work on those
    columns alone is split among the threads too, instead of waiting for all of them on one."""
    N = b.shape[1]

    def block(i, _):
        lo, hi = block_range(N, T, i)
        np.matmul(a, b[:, lo:hi], out=out[:, lo:hi])
        if then is not None:
            then(lo, hi)

    run_blocks(block, T)
    return out
