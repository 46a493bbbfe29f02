"""What stops a training run safely: signals turned into a flag, the test for a diverging loss, and
a check that a batch fits in the memory available before the first update.

Ctrl-C (SIGINT) and SIGTERM (sent by ``timeout`` and batch schedulers) only set a flag; the trainer
checks it between updates, writes a checkpoint of a whole update and stops, so nothing saved is
ever half-updated. A loss that is NaN, infinite, or far above the uniform model's log |V| means the
run is diverging: the trainer stops and keeps the last checkpoint whose parameters were finite. A
batch larger than the memory available is refused before training starts: Linux would otherwise
hand out the memory page by page until its out-of-memory killer ends the process without a word.
"""

from __future__ import annotations

import math
import signal
from contextlib import contextmanager

import numpy as np

from ..errors import UserError


class RunFailed(UserError):
    """A part of the run outside this process failed (a hogwild worker killed or crashed): the
    trainer adds what the run keeps to its one line."""


@contextmanager
def sigterm_as_ctrl_c():
    """Inside, SIGTERM (sent by ``timeout`` and batch schedulers) raises KeyboardInterrupt as Ctrl-C
    does, for code that stops on Ctrl-C rather than checking a flag (outside the main thread, where
    handlers cannot be set, nothing changes)."""
    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:
        yield
        return
    try:
        yield
    finally:  # None: the old handler was set from C, which Python cannot put back; the default is closest
        signal.signal(signal.SIGTERM, signal.SIG_DFL if old is None else old)


@contextmanager
def interruption_says(explain):
    """Inside, a bare KeyboardInterrupt (Ctrl-C, or SIGTERM taken as one) leaves as ``explain()``: the
    same interruption, its message saying what the run keeps."""
    try:
        yield
    except KeyboardInterrupt as exc:
        if exc.args:
            raise
        raise explain() from None


class Interrupt:
    """Turn Ctrl-C and SIGTERM into a flag checked between updates (``enabled=False``: leave them alone)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, enabled: bool = True):
        self.flag, self.enabled, self.old = False, enabled, {}

    def __enter__(self):
        if self.enabled:
            for sig in self.SIGNALS:
                try:
                    self.old[sig] = signal.signal(sig, self._handler)
                except ValueError:  # not in the main thread
                    pass
        return self

    def _handler(self, signum, frame):
        self.flag = True

    def __exit__(self, *exc):
        for sig, old in self.old.items():
            signal.signal(sig, old)


def exploded(loss: float, V: int) -> bool:
    """A training loss that is not finite, or far above the uniform model's log |V|: diverging.

    >>> exploded(float("nan"), 100), exploded(5.0, 100), exploded(1e6, 100)
    (True, False, True)
    """
    return not math.isfinite(loss) or loss > 10 * math.log(V) + 10


def safe_exp(x: float) -> float:
    """exp(x), or inf where math.exp would raise OverflowError (a perplexity of a diverged epoch)."""
    return math.exp(x) if x < 700 else math.inf


def perplexity_of(log_probs) -> float:
    """exp(-mean log P) of natural-log probabilities, inf where that overflows (a diverged network).

    >>> perplexity_of([math.log(0.5), math.log(0.5)]), perplexity_of([-1e5])
    (2.0, inf)
    """
    return float(safe_exp(-float(np.mean(log_probs))))


def available_memory() -> int | None:
    """Bytes a process can still get without swapping (Linux's MemAvailable), None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_memory(need: int, what: str) -> None:
    """UserError, one line, if ``need`` bytes (for ``what``) exceed the memory available now."""
    avail = available_memory()
    if avail is not None and need > avail:
        raise UserError(f"{what} needs at least {need / 2 ** 30:.1f} GiB of memory and {avail / 2 ** 30:.1f} GiB "
                        "are available: try a smaller batch, model or corpus")
