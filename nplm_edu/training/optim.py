"""How the parameters move: the paper's SGD rule, Adam, the learning-rate schedule, dropout masks.

The paper's rule (section 4), with g the gradient of the MEAN negative log-likelihood over a
minibatch of K examples (K = 1 is the paper's pure stochastic gradient; ascent on the
log-likelihood is descent on the NLL)::

    p <- p - lr_t (g + weight_decay p)     for p in C, H, U, W   (all of C is decayed)
    p <- p - lr_t g                        for the biases b, d   (never decayed)

Which parameters are decayed is the model's to say (``model.decayed``: its weight matrices and
those of its output layer, e.g. C, Wx, Wh, U for a recurrent network, U and U_class for the
class-factored softmax), so every trainer and every fast path decays the same arrays.

The schedule, one formula for every trainer (t = updates done before this one, e = epochs done)::

    lr_t = lr / (1 + decay_rate t) * lr_decay^e

The paper's is ``decay_rate`` = r > 0, ``lr_decay`` = 1; a per-epoch decay (used beyond the paper)
is ``decay_rate`` = 0, ``lr_decay`` < 1.

Adam (Kingma & Ba 2015, Algorithm 1) with weight decay decoupled from the gradient as in AdamW
(Loshchilov & Hutter 2019), on the decayed parameters only (C, H, U, W; never b, d)::

    m <- beta1 m + (1 - beta1) g        v <- beta2 v + (1 - beta2) g^2          t <- t + 1
    p <- p - lr wd p                     (C, H, U, W)
    p <- p - lr_t m / (sqrt(v) + eps sqrt(1 - beta2^t)),   lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t)

(Algorithm 1's m_hat / (sqrt(v_hat) + eps) with the bias corrections folded into the step, as
section 2 of Kingma & Ba suggests.) Inverted dropout (Srivastava et al. 2014) keeps a unit with
probability 1 - p and scales it by 1 / (1 - p), so evaluation uses the plain forward pass.
"""

from __future__ import annotations

import math

import numpy as np

from ..numerics.sgd import sgd_step_inplace


def learning_rate(lr: float, decay_rate: float, step: int, lr_decay: float = 1.0, epoch: int = 0) -> float:
    """lr_t = lr / (1 + decay_rate t) * lr_decay^epoch, t = updates done before this one (section 4).

    >>> learning_rate(1.0, 1e-4, 10_000)
    0.5
    >>> learning_rate(1.0, 0.0, 123, lr_decay=0.5, epoch=2)
    0.25
    """
    return lr / (1.0 + decay_rate * step) * lr_decay ** epoch


def sgd_step(params: dict, grads: dict, lr: float, weight_decay: float, decayed: tuple, rows=None,
             *, fast: bool = False) -> None:
    """In place, the paper's rule: p -= lr (g + weight_decay p) for the ``decayed`` names
    (``model.decayed``: C, H, U, W for the NPLM), p -= lr g for the others (the biases b, d).

    ``rows`` (name -> unique row ids): that name's gradient holds only those rows (the look-up
    table C of a batch's words); weight decay still shrinks every row, the step moves only those.
    ``fast``: the same numbers from :func:`nplm_edu.numerics.sgd.sgd_step_inplace` (a
    block of rows on each thread, no temporaries; ``grads`` may be overwritten), as the trainers run it.
    :meth:`nplm_edu.numerics.fused.FusedNPLM.sgd_update` applies the rule without storing the gradients."""
    rows = rows or {}
    for name, g in grads.items():
        p = params[name]
        wd = weight_decay if name in decayed else 0.0  # the biases are never decayed
        if fast:
            sgd_step_inplace(p, g, lr, wd, rows.get(name))
        elif name in rows:  # g: only the rows rows[name] of the gradient
            p *= 1 - lr * wd  # weight decay: every row
            p[rows[name]] -= lr * g  # the step: those rows (unique ids, one subtraction each)
        elif wd:
            p -= lr * (g + wd * p)
        else:
            p -= lr * g


def dropout_mask(rng: np.random.Generator, shape: tuple, p: float, dtype) -> np.ndarray | None:
    """Inverted dropout: 0 with probability p, else 1 / (1 - p) (so E[mask] = 1); None when p = 0."""
    if p == 0:
        return None
    return (rng.random(shape, dtype=np.float32) >= p).astype(dtype) * np.asarray(1 / (1 - p), dtype)


class Adam:
    """Adam with decoupled weight decay (see the module docstring); moments ``m``, ``v`` per parameter.

    ``decayed``: the parameters under weight decay (``model.decayed``). The first step moves every
    parameter by about lr against the sign of its gradient:

    >>> p = {"b": np.array([1.0])}
    >>> Adam(p, decayed=()).step(p, {"b": np.array([0.5])}, lr=0.1)
    >>> round(float(p["b"][0]), 6)
    0.9
    """

    def __init__(self, params: dict, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, *, decayed: tuple):
        self.beta1, self.beta2, self.eps, self.weight_decay = beta1, beta2, eps, weight_decay
        self.decayed = tuple(decayed)
        self.t = 0
        self.m = {k: np.zeros_like(p) for k, p in params.items()}
        self.v = {k: np.zeros_like(p) for k, p in params.items()}
        self._tmp = {k: np.empty_like(p) for k, p in params.items()}

    def step(self, params: dict, grads: dict, lr: float) -> None:
        """One update of every parameter in place (grads may be overwritten)."""
        self.t += 1
        b1, b2, t = self.beta1, self.beta2, self.t
        c2 = math.sqrt(1 - b2 ** t)
        lr_t = lr * c2 / (1 - b1 ** t)  # bias corrections folded into the step
        for k, g in grads.items():
            p, m, v, tmp = params[k], self.m[k], self.v[k], self._tmp[k]
            m *= b1
            np.multiply(g, 1 - b1, out=tmp)
            m += tmp  # m = beta1 m + (1 - beta1) g
            v *= b2
            np.multiply(g, g, out=tmp)
            tmp *= 1 - b2
            v += tmp  # v = beta2 v + (1 - beta2) g^2
            if k in self.decayed and self.weight_decay:
                p *= 1 - lr * self.weight_decay  # decoupled weight decay, never on b, d
            np.sqrt(v, out=tmp)
            tmp += self.eps * c2
            np.divide(m, tmp, out=tmp)
            tmp *= lr_t
            p -= tmp  # p -= lr_t m / (sqrt(v) + eps sqrt(1 - beta2^t))

    def arrays(self) -> dict:
        """The moments, for a checkpoint."""
        return {**{f"adam_m/{k}": v for k, v in self.m.items()}, **{f"adam_v/{k}": v for k, v in self.v.items()}}

    def load(self, arrays: dict, t: int) -> None:
        for k in self.m:
            self.m[k][...] = arrays[f"adam_m/{k}"]
            self.v[k][...] = arrays[f"adam_v/{k}"]
        self.t = t
