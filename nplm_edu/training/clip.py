"""Gradient-norm clipping, for the recurrent models.

Backpropagation through time multiplies T Jacobians, so now and then one batch's gradient is huge
(the exploding gradients of Bengio, Simard & Frasconi 1994): one step along it throws the parameters far
away. Pascanu et al. (2013) rescale the whole gradient when its norm exceeds a threshold c::

    ||g|| = sqrt(sum over every parameter of the sum of its squared entries)
    g <- g * min(1, c / ||g||)

The direction is kept; only the length is capped. The step is then the paper's rule
(:func:`nplm_edu.training.optim.sgd_step`), with weight decay on the recurrent models' weight
matrices (C, Wx, Wh, U), never on the biases.
"""

from __future__ import annotations

import math

from ..errors import UserError
from ..numerics.threads import scale_inplace, sum_of_squares


def check_clip(max_norm: float) -> float:
    """A clipping threshold: a finite number > 0, else one clear UserError."""
    try:
        c = float(max_norm)
    except (TypeError, ValueError):
        raise UserError(f"clip: the clip norm must be a number > 0, got {max_norm!r}", setting="clip") from None
    if not math.isfinite(c) or c <= 0:
        raise UserError(f"clip: the clip norm must be a finite number > 0, got {max_norm}", setting="clip")
    return c


def grad_norm(grads: dict) -> float:
    """||g||: the Euclidean norm of all the gradients together (each sum of squares in the gradient's
    dtype; a large gradient's on the threads, :func:`~nplm_edu.numerics.threads.sum_of_squares`)."""
    return math.sqrt(sum(sum_of_squares(g) for g in grads.values()))


def clip_grad_norm(grads: dict, max_norm: float) -> float:
    """In place: g <- g min(1, max_norm / ||g||) for every gradient; returns ||g|| before clipping.

    >>> import numpy as np
    >>> g = {"a": np.array([3.0]), "b": np.array([4.0])}
    >>> clip_grad_norm(g, 1.0), g["a"].round(12).tolist(), g["b"].round(12).tolist()
    (5.0, [0.6], [0.8])
    """
    max_norm = check_clip(max_norm)
    norm = grad_norm(grads)
    if norm > max_norm:  # a NaN norm is left alone: the trainer's guard stops the run on the loss
        scale = max_norm / norm
        for g in grads.values():
            scale_inplace(g, scale)  # g <- g scale, in g's dtype
    return norm
