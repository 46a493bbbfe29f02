"""The NPLM with a cheap output layer, trained fast: only the rows a batch uses are read and written.

The class-factored and tree softmaxes and the sampled objectives (:mod:`nplm_edu.models.class_softmax`,
:mod:`~nplm_edu.models.tree_softmax`, :mod:`~nplm_edu.models.sampled_softmax`) read a few hundred rows
of their output weights per batch. The paper's update rule (section 4) would still touch every
entry of every decayed matrix on every update, for the weight decay:

    p <- (1 - lr wd) p - lr g        for C, H and the output weights (never the biases)

which for the (|V|, h) output weights costs more than the whole cheap output layer. So the decay is
kept as one number per matrix instead (Shalev-Shwartz et al. 2007, Bottou 2012): the true matrix is
s * stored; a decay step is s <- (1 - lr wd) s, and a gradient step on a few rows is stored[rows]
<- stored[rows] - lr g / s. For the output weights the layer computes with the stored weights and
the input s a (y = b + (s U) a = b + U (s a)), so it never needs to know. The two scales (of C
and of the output weights) are a state array of the parameters, ``params["lazy_scale"]``, so a
checkpoint saves the stored matrices and their scales as they are and a resumed run continues bit
for bit; :meth:`SparseNPLM.fold` brings the matrices to their true values (s = 1), which every
forward pass (evaluation, the reference gradient) does first. The numbers are those of
:func:`nplm_edu.training.optim.sgd_step` on the reference gradient, up to rounding (in float64,
within 1e-13 of them after six updates of a small network).
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..models.nplm import NPLM, NPLMConfig
from ..models.sparse_output import Blocks, Rows, SparseOutputLayer
from .blas import gemm_update, segment_sum
from .threads import one_blas_thread, threads

FOLD_BELOW = 1e-3  # fold the scale into the matrix before it gets this small
SCALE = "lazy_scale"  # params[SCALE]: the pending decay of C and of the output weights, (2,) float64


class SparseNPLM(NPLM):
    """x = (C(w_{t-1}), ..., C(w_{t-n+1})), a = tanh(d + H x), then any :class:`SparseOutputLayer`;
    :meth:`sgd_update` is the paper's SGD step (used by the trainer), touching only the rows of C and
    of the output weights that the batch uses. No direct connections (the layers read a only)."""

    fused_sgd = True

    def __init__(self, config: NPLMConfig, output: SparseOutputLayer):
        if not isinstance(output, SparseOutputLayer):
            raise UserError("SparseNPLM needs a class-factored, tree or sampled output layer")
        if config.direct:
            raise UserError(f"the {output.name} output layer reads the hidden layer only: use direct=False (as MLP9)")
        super().__init__(config, output)
        self.params[SCALE] = np.ones(2)  # s of C, s of the output weights
        self.kind = "nplm-" + output.name.replace(" ", "-").replace(",", "")

    # ----------------------------------------------------------------- lazy weight decay
    def fold(self, which=(0, 1)) -> None:
        """stored <- s * stored, s <- 1, for the matrices whose decay is pending (``which``: 0 for C,
        1 for the output weights)."""
        s = self.params[SCALE]
        for i in which:
            if s[i] != 1.0:
                for k in (("C",) if i == 0 else self.output.decayed):
                    self.params[k] *= self.params[k].dtype.type(s[i])
                s[i] = 1.0

    def forward(self, contexts, mask_x=None, mask_a=None) -> dict:
        """As the NPLM's, on the true values (the pending decay folded in first)."""
        self.fold()
        return super().forward(contexts, mask_x, mask_a)

    def num_params(self) -> int:
        return int(sum(p.size for k, p in self.params.items() if k not in self.output.state and k != SCALE))

    # ----------------------------------------------------------------- the training step
    def sgd_update(self, contexts, targets, lr: float, weight_decay: float) -> float:
        """One step of the paper's rule on a batch (see the module docstring); returns the batch's
        mean training loss (for a sampled objective, that objective) before the step. On several
        threads BLAS runs on one: the step's products are small (a class's rows, a tree's nodes, a
        sample), and BLAS's own threads, woken for them, would poll for work on the cores."""
        with one_blas_thread(threads() > 1):
            return self._sgd_update(contexts, targets, lr, weight_decay)

    def log_prob(self, contexts, targets) -> np.ndarray:
        """As the NPLM's; on several threads BLAS on one, as in :meth:`sgd_update`."""
        with one_blas_thread(threads() > 1):
            return super().log_prob(contexts, targets)

    def _sgd_update(self, contexts, targets, lr: float, weight_decay: float) -> float:
        contexts, targets = self.check_ids(contexts, targets)
        P, m, K = self.params, self.config.m, len(targets)
        dt = P["C"].dtype.type
        sC, so = (float(s) for s in P[SCALE])  # the pending decay of C and of the output weights
        ids = contexts[:, ::-1]  # (K, n-1) w_{t-1}, ..., w_{t-n+1}
        x = P["C"][ids].reshape(K, -1)  # (K, (n-1)m) stored rows of C
        if sC != 1.0:
            x *= dt(sC)  # the true x
        a = np.tanh(P["d"] + x @ P["H"].T)  # (K, h)
        loss, g_in, grads = self.output_step(P, {"U": a * dt(so) if so != 1.0 else a}, targets)  # y = b + U (s a)
        ga = g_in["U"] * dt(so) if so != 1.0 else g_in["U"]  # (K, h) dL/da = s dL/d(s a)
        go = ga * (1 - a * a)  # (K, h) dL/do
        gx = go @ P["H"]  # (K, (n-1)m) dL/dx, with H before its update
        keep = 1.0 - lr * weight_decay
        P["H"] *= dt(keep)
        P["H"] -= dt(lr) * (go.T @ x)  # (h, (n-1)m)
        P["d"] -= dt(lr) * go.sum(axis=0)
        so_new, sC_new = so * keep, sC * keep
        for name, g in grads.items():  # the layer's gradient of stored U is s times the true one
            coef = lr / (so * so_new) if name in self.output.decayed else lr
            apply(P[name], g, dt(coef))
        words, sums = segment_sum(ids.ravel(), gx.reshape(-1, m))  # repeated words add up
        P["C"][words] -= dt(lr / sC_new) * sums
        P[SCALE][:] = sC_new, so_new
        eager = () if self.output.lazy_decay else (1,)  # a layer whose scores the scale does not pass through
        self.fold([i for i in (0, 1) if P[SCALE][i] < FOLD_BELOW or i in eager])
        return loss

    def output_step(self, P: dict, inputs: dict, targets: np.ndarray):
        """(mean loss, dL/d inputs, dL/d params) of the output layer on a batch: its loss and backward
        (a fast path for one layer overrides this: :class:`~nplm_edu.numerics.adaptive.AdaptiveNPLM`)."""
        loss, cache = self.output.loss(P, inputs, targets)
        g_in, grads = self.output.backward_sparse(P, cache)
        return loss, g_in, grads


def apply(p: np.ndarray, g, coef) -> None:
    """In place: p <- p - coef g for a dense gradient, :class:`Rows` or :class:`Blocks`."""
    if isinstance(g, Rows):
        rows, sums = segment_sum(g.rows, g.values)  # each row once
        sums *= coef
        p[rows] -= sums
    elif isinstance(g, Blocks):
        for lo, hi, A, B in g.blocks:
            if B is None:
                p[lo:hi] -= coef * A.sum(axis=0)
            else:
                gemm_update(p[lo:hi], A, B, alpha=-float(coef), beta=1.0)  # p <- p - coef A^T B, one pass
    else:
        p -= coef * g
