"""Two threads on the backward pass of a recurrent network: the recurrence on one, the products on the other.

Through time, dL/dz_t (every gate's pre-activation) is a recurrence: step t needs step t + 1, so it runs
from the last step to the first, a small product per step. The weights' gradients are sums over the
steps (dL/dWx = sum_t dL/dz_t^T x_t, and so on) and dL/dx_t is one product per step: neither waits for
the whole recurrence, only for the steps it reads. :func:`overlapped` runs the recurrence over all B
streams on thread 0, in chunks of steps from the last, and thread 1 adds each finished chunk's share
to the sums in chunk order, while the chunks' independent products are taken by whichever thread is
free (thread 0 once its recurrence is done). Splitting the B streams between the threads instead
halves each step's product, whose cost is mostly reading the recurrent weights: they are read twice.

The recurrence is the one-thread loop, step for step (the same numbers); the sums are added chunk by
chunk (the same numbers up to rounding, the same on every run); the independent products are the same
call on the same rows, whichever thread makes them.
"""

from __future__ import annotations

import itertools
import queue

import numpy as np

from .blas import gemm_update
from .threads import run_blocks


def time_chunks(T: int, size: int) -> list[tuple[int, int]]:
    """Steps [t0, t1) of each chunk, from the last step back: the order in which the recurrence finishes them.

    >>> time_chunks(7, 3)
    [(4, 7), (1, 4), (0, 1)]
    """
    return [(max(0, t1 - size), t1) for t1 in range(T, 0, -size)]


def overlapped(recur, accumulate, side, chunks: list) -> None:
    """On two threads (:func:`~nplm_edu.numerics.threads.run_blocks`): ``recur(t0, t1)`` for every chunk
    in order on thread 0; ``accumulate(c, t0, t1)`` for every chunk c in order on thread 1, each once
    ``recur`` has finished it; ``side(t0, t1)`` once for every chunk, on either thread, after ``recur``
    finished it (thread 1 takes one after each ``accumulate``, thread 0 the rest after its recurrence)."""
    ready, claim, n = queue.SimpleQueue(), itertools.count(), len(chunks)

    def sides():  # the unclaimed chunks' side products, all finished by the recurrence
        while (k := next(claim)) < n:
            side(*chunks[k])

    def block(i, _):
        if i == 0:
            try:
                for c, (t0, t1) in enumerate(chunks):
                    recur(t0, t1)
                    ready.put(c)
            except BaseException:
                ready.put(None)  # thread 1 stops waiting; run_blocks raises this error
                raise
            sides()
            return
        for c, (t0, t1) in enumerate(chunks):
            if ready.get() is None:
                return
            accumulate(c, t0, t1)
            k = next(claim)  # at most one per finished chunk: chunk k <= c is finished
            if k < n:
                side(*chunks[k])
        sides()

    run_blocks(block, 2)


def overlapped_backward(model, cache, ga, g: dict, gx) -> None:
    """The backward pass of a fast recurrent network (:mod:`~nplm_edu.numerics.recurrent`) on two
    threads with :func:`overlapped`: the recurrence over all B streams, in chunks of
    ``model.PIPE_STEPS`` steps from the last, beside the sums of each finished chunk's share into
    dL/dWx, dL/dWh, dL/dd (``g``: their buffers); the chunks' rows of dL/dx go into ``gx`` (T B, m)."""
    gz, per_step, per_row = model._backrecur_parts(cache, ga)  # dL/dz_t  (T, B, G h), the loop's arrays
    (T, B), resets, Wx = ga.shape[:2], cache["resets"], model.params["Wx"]
    gz2, x2 = gz.reshape(T * B, -1), cache["x"].reshape(T * B, -1)
    gd = model._buffer("gd_chunk", g["d"].shape)

    def recur(t0, t1):  # steps t1 - 1 down to t0, every stream (per_row: the carried dL/dh, dL/ds)
        model._backrecur_streams(None if resets is None else resets[:, t0:t1],
                                 **{k: a[t0:t1 + len(a) - T] for k, a in per_step.items()}, **per_row)

    def accumulate(c, t0, t1):
        r = slice(t0 * B, t1 * B)  # the chunk's positions (rows, t-major)
        _add_product(g["Wx"], gz2[r], x2[r], c == 0)  # dL/dWx += dL/dz^T x
        for o, k, a in model._Wh_inputs(cache):
            _add_product(g["Wh"][o], gz2[r, k], a[r], c == 0)  # dL/dWh += dL/dz^T h_{t-1}
        np.sum(gz2[r], axis=0, out=gd if c else g["d"])
        if c:
            g["d"] += gd

    def side(t0, t1):
        np.matmul(gz2[t0 * B:t1 * B], Wx, out=gx[t0 * B:t1 * B])  # the chunk's rows of dL/dx = dL/dz Wx

    overlapped(recur, accumulate, side, time_chunks(T, model.PIPE_STEPS))


def _add_product(out, a, b, first: bool) -> None:
    """out <- a^T b (``first``), else out <- out + a^T b in one BLAS call (:func:`~nplm_edu.numerics.blas.gemm_update`)."""
    if first:
        np.matmul(a.T, b, out=out)
    else:
        gemm_update(out, a, b, 1.0, 1.0)
