"""nplm_edu.numerics.pipeline: the recurrence on one thread beside the sums of its finished chunks on
the other (the fast networks' backward pass through it is tested equal to one thread in test_threads)."""

import threading

import pytest

from nplm_edu.numerics import pipeline, threads


def test_each_chunk_is_added_after_the_recurrence_finished_it_and_in_order():
    done, log, lock = [], [], threading.Lock()

    def recur(t0, t1):
        with lock:
            done.append((t0, t1))

    def accumulate(c, t0, t1):
        with lock:
            assert (t0, t1) in done  # the recurrence has finished this chunk
            log.append(("acc", c, threading.get_ident()))

    def side(t0, t1):
        with lock:
            assert (t0, t1) in done
            log.append(("side", (t0, t1)))

    chunks = pipeline.time_chunks(11, 3)
    assert chunks == [(8, 11), (5, 8), (2, 5), (0, 2)]
    pipeline.overlapped(recur, accumulate, side, chunks)
    assert done == chunks  # from the last step back
    acc = [e for e in log if e[0] == "acc"]
    assert [e[1] for e in acc] == [0, 1, 2, 3] and len({e[2] for e in acc}) == 1  # in order, on one thread
    assert sorted(e[1] for e in log if e[0] == "side") == sorted(chunks)  # every chunk's once


def test_overlapped_stops_when_the_recurrence_fails():
    """An error in the recurrence reaches the caller; the thread adding up the chunks stops waiting."""
    done = []

    def recur(t0, t1):
        if t0 == 0:
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        pipeline.overlapped(recur, lambda c, t0, t1: done.append(c), lambda t0, t1: None, pipeline.time_chunks(5, 2))
    assert done == [0, 1]  # the chunks finished before the error
    assert threads.run_blocks(lambda i, reduce: i, 2) == [0, 1]  # the team still works
