"""The SGD rule of :func:`nplm_edu.training.optim.sgd_step` on one parameter, made fast: the in-place
kernels of :mod:`nplm_edu.numerics.threads` (a block of rows on each thread, no temporaries), giving
the plain rule's numbers bit for bit."""

from __future__ import annotations

import numpy as np

from .threads import scale_inplace, sgd_inplace

__all__ = ["sgd_step_inplace"]


def sgd_step_inplace(p: np.ndarray, g: np.ndarray, lr: float, wd: float, rows=None) -> None:
    """In place, p -= lr (g + wd p) (p -= lr g when wd = 0). ``rows``: the rows g holds (None: all of
    them); weight decay still shrinks every row, the step moves only those. g's memory may be overwritten."""
    if rows is None:
        sgd_inplace(p, g, lr, wd)  # p -= lr (g + wd p), or p -= lr g
        return
    if wd:
        scale_inplace(p, 1 - lr * wd)  # p <- (1 - lr wd) p, every row
    g *= p.dtype.type(lr)  # g's memory reused for lr g
    p[rows] -= g
