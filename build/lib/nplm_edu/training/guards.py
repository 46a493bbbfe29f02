"""What stops a training run safely: signals turned into a flag, and the test for a diverging loss.

Ctrl-C (SIGINT) and SIGTERM (sent by ``timeout`` and batch schedulers) only set a flag; the trainer
checks it between updates, writes a checkpoint of a whole update and stops, so nothing saved is
ever half-updated. A loss that is NaN, infinite, or far above the uniform model's log |V| means the
run is diverging: the trainer stops and keeps the last checkpoint whose parameters were finite.
"""

from __future__ import annotations

import math
import signal


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
