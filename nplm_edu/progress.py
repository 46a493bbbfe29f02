"""The package's progress bars: tqdm (a widget in notebooks, a line in a terminal) without its
monitor thread.

tqdm starts a monitor thread with its first bar, even a disabled one, and keeps it while any bar
is open. A thread is harmless until the process forks: the child gets only the forking thread,
and a lock the monitor held stays locked in it forever. Hogwild forks its workers while the
epoch's bar is open, and a validation pass before it has made bars of its own; so every bar of
the package comes from :func:`progress_bar`, whose bars never start that thread (the monitor
only shortens the display interval of a stalled bar).
"""

from __future__ import annotations

import functools


@functools.cache
def _no_monitor(base: type) -> type:
    return type("ProgressBar", (base,), {"monitor_interval": 0})


def progress_bar(iterable=None, **kwargs):
    """``tqdm.auto.tqdm(iterable, **kwargs)`` without the monitor thread (see the module's docstring)."""
    from tqdm import auto

    return _no_monitor(auto.tqdm)(iterable, **kwargs)
