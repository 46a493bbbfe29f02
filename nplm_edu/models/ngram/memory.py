"""Keeping freed memory in the process while the n-gram tables are built.

Counting n-grams of a large corpus makes and drops many temporary arrays of hundreds of MB. The C
library's allocator (glibc's ``malloc``) serves every block above 32 MB with a fresh ``mmap`` and
gives it back to the operating system when numpy frees it, so each new temporary is faulted in
page by page, and zeroed, again. On a virtual machine this can cost
about a nanosecond per byte, as much as the counting itself at 100 million tokens. Inside
:func:`retained_memory` the allocator serves large blocks from its heap instead and keeps what is
freed there, so a temporary of one order reuses the pages of the order before; on leaving, the
unused pages go back to the system (``malloc_trim``) and blocks above 32 MB come from ``mmap`` again.
Elsewhere than glibc (macOS, musl) this is a no-op.
"""

from __future__ import annotations

import ctypes
import threading
from contextlib import contextmanager

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4  # mallopt parameters (glibc's malloc.h)
# Any mallopt call ends glibc's adjusting of its thresholds to the blocks a program frees, so on
# leaving they are set where that adjusting takes a numpy program: blocks up to 32 MB (the most it
# allows) from the heap, a free top of heap kept up to twice that, and mmap for larger ones.
AFTER = {M_MMAP_THRESHOLD: 32 * 2 ** 20, M_TRIM_THRESHOLD: 64 * 2 ** 20, M_MMAP_MAX: 65536}
_lock = threading.Lock()
_depth = 0


def _glibc():
    """The C library when it is glibc (it has ``mallopt`` and ``malloc_trim``), else None."""
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


LIBC = _glibc()


@contextmanager
def retained_memory():
    """While inside, freed memory stays in the process for the next allocation (re-entrant)."""
    global _depth
    if LIBC is None:
        yield
        return
    with _lock:
        if _depth == 0:
            LIBC.mallopt(M_MMAP_MAX, 0)  # large blocks from the heap, not from mmap ...
            LIBC.mallopt(M_TRIM_THRESHOLD, 2 ** 31 - 1)  # ... and a freed top of heap kept
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for param, value in AFTER.items():
                    LIBC.mallopt(param, value)
                LIBC.malloc_trim(0)  # free pages back to the system
