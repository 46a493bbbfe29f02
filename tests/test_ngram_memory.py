"""Tests of nplm_edu.models.ngram.memory: inside retained_memory, large arrays come from the heap
and stay there when freed; outside, blocks above 32 MB come from mmap and go back at once."""

import ctypes

import numpy as np
import pytest

from nplm_edu.models.ngram import memory
from nplm_edu.models.ngram.memory import retained_memory


class MallInfo2(ctypes.Structure):  # glibc's struct mallinfo2 (malloc.h), all size_t
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]


def mmapped_bytes() -> int:
    """Bytes the allocator holds in blocks of their own from mmap (mallinfo2's hblkhd)."""
    memory.LIBC.mallinfo2.restype = MallInfo2
    return memory.LIBC.mallinfo2().hblkhd


needs_glibc = pytest.mark.skipif(memory.LIBC is None or not hasattr(memory.LIBC, "mallinfo2"),
                                 reason="glibc's allocator only")
MB64 = 2 ** 23  # float64 entries in 64 MB: above glibc's largest mmap threshold (32 MB)


@needs_glibc
def test_large_arrays_come_from_the_heap_inside_and_from_mmap_outside():
    before = mmapped_bytes()
    a = np.ones(MB64)
    assert mmapped_bytes() - before >= 8 * MB64  # glibc's default: a block of its own
    del a
    with retained_memory():
        before = mmapped_bytes()
        b = np.ones(MB64)
        assert mmapped_bytes() - before < 8 * MB64  # from the heap
        address = b.ctypes.data
        del b
        c = np.ones(MB64)  # the freed block is reused, not given back and faulted in again
        assert c.ctypes.data == address
        del c
    before = mmapped_bytes()
    d = np.ones(MB64)
    assert mmapped_bytes() - before >= 8 * MB64  # mmap again on leaving
    del d


@needs_glibc
def test_nested_contexts_restore_only_at_the_outermost():
    with retained_memory():
        with retained_memory():
            pass
        before = mmapped_bytes()
        a = np.ones(MB64)
        assert mmapped_bytes() - before < 8 * MB64  # still inside the outer one
        del a
    assert memory._depth == 0


def test_an_error_inside_still_restores():
    with pytest.raises(ValueError):
        with retained_memory():
            raise ValueError("boom")
    assert memory._depth == 0
