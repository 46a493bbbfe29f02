"""The adaptive softmax's training step made fast, the same numbers as
:class:`~nplm_edu.models.adaptive_softmax.AdaptiveSoftmax` (equal in float64, up to rounding).

The layer is three softmaxes: the head over c_1 + n units for all K examples, and tail i over its
words for the k_i examples whose target lies in it. Each is the full softmax's head on a block of
units (:func:`~nplm_edu.numerics.head.head_block`, the function the fused NPLM's step calls): one
exp per score, dL/dy never written, the weight gradient e^T diag(scale) A - onehot^T A / K. On T
threads (:mod:`~nplm_edu.numerics.threads`) each softmax is split into T column blocks, as the
paper's output blocks (section 3.2): thread j computes block j of the head, the (max, sum) pairs
exchanged once, and only dL/da is summed across the blocks. The tails, each read by a few examples,
are too small to split (the threads would spend their time meeting): each is computed whole on one
thread, the costliest first to the thread with the least work (:func:`owners`). The tails'
projections q_i = Proj_i a and their backward are small and run on the caller's thread.

A tail's head_block normalizes by its k_i rows; the batch's mean NLL divides by K, so its
gradients are rescaled by k_i / K.
"""

from __future__ import annotations

import numpy as np

from ..models.adaptive_softmax import AdaptiveSoftmax
from .full_output import FastOutput
from .head import head_block, nll, target_scores
from .sparse import SparseNPLM
from .threads import _alone, block_range, run_blocks, threads


def softmax_block(A, W, b, targets, lo: int, reduce, y, gA, gW, gb, K: int):
    """Block lo .. lo+B-1 of a softmax over the rows of W (B = len(y[0])) on the k rows of A (k, w):
    y <- exp of the block's scores; gA (k, w) <- the block's share of dL/dA; gW (B, w), gb (B,) <- the
    block's rows of dL/dW, dL/db, for the mean NLL over K examples (k of them here). Returns
    (own, yt, max, sum) of :func:`~nplm_edu.numerics.head.head_block`."""
    k, B = y.shape
    Wi, bi = W[lo:lo + B], b[lo:lo + B]
    np.matmul(A, Wi.T, out=y)  # (k, B) the block's scores without b
    own, cols, yt, mx, S, scale = head_block(y, targets, lo, reduce, Wi, bi, gA, gb)
    if k != K:  # head_block's mean is over the k rows: rescale to the batch's K
        r = A.dtype.type(k / K)
        gA *= r
        gb *= r
        scale = scale * r
    # backward through y = W A + b: dL/dW = e^T diag(scale) A - onehot^T A / K
    np.matmul(y.T, A * scale[:, None], out=gW)  # (B, w)
    np.subtract.at(gW, cols, A[own] * A.dtype.type(1.0 / K))
    return own, yt, mx, S


def owners(costs: list, T: int) -> list[int]:
    """The thread of each tail: the costliest first, each to the thread with the least work so far
    (the head's blocks are equal on every thread). Each tail is computed whole, the same way on any thread.

    >>> owners([5, 20, 8], 2)
    [1, 0, 1]
    """
    load, out = [0] * T, [0] * len(costs)
    for g in sorted(range(len(costs)), key=lambda g: -costs[g]):
        out[g] = min(range(T), key=lambda j: load[j])
        load[out[g]] += costs[g]
    return out


class AdaptiveNPLM(FastOutput, SparseNPLM):
    """:class:`~nplm_edu.numerics.sparse.SparseNPLM` whose adaptive softmax is computed by
    :func:`softmax_block` on the threads (see the module docstring); any other layer as before."""

    def output_step(self, P, inputs, targets):
        if not isinstance(self.output, AdaptiveSoftmax):
            return super().output_step(P, inputs, targets)
        layer, a = self.output, self.output.input(inputs)
        K, dt = len(targets), a.dtype
        T = self._blocks(K)
        groups = [(a, P["U_head"], P["b_head"], layer.head_index(targets), None)]  # (A, W, b, targets, rows)
        cluster = layer.cluster[targets]
        for i in range(1, layer.n + 1):
            sel = np.flatnonzero(cluster == i)  # the examples whose target is in tail i
            if len(sel):
                q = a[sel] @ P[f"Proj_{i}"].T  # (k_i, d_i) q_i = Proj_i a
                groups.append((q, P[f"U_{i}"], P[f"b_{i}"], layer.rank[targets[sel]] - layer.bounds[i], (i, sel)))
        names = layer.decayed + ("b_head",) + tuple(f"b_{i}" for i in range(1, layer.n + 1))
        grads = {k: self._buffer("g" + k, P[k].shape) for k in names}  # each written whole below
        owner = owners([len(A) * len(W) for A, W, *_ in groups[1:]], T)  # the thread of each tail
        parts = [self._buffer(f"parts{g}", (T if g == 0 else 1,) + A.shape) for g, (A, *_) in enumerate(groups)]

        def block(j, reduce):
            out = {}
            for g, (A, W, b, tg, tail) in enumerate(groups):
                if tail is None:  # the head: block j of T
                    (lo, hi), red, part = block_range(len(W), T, j), reduce, parts[0][j]
                elif owner[g - 1] == j:  # a whole tail, on one thread
                    lo, hi, red, part = 0, len(W), _alone, parts[g][0]
                else:
                    continue
                y = self._buffer(f"y{g}.{j}", (len(A), hi - lo))  # (k, B) this block's scores
                name = "U_head" if tail is None else f"U_{tail[0]}"
                gb = grads["b" + name[1:]]
                out[g] = softmax_block(A, W, b, tg, lo, red, y, part, grads[name][lo:hi], gb[lo:hi], K)
            return out

        results = run_blocks(block, T)
        ga = self._sum(parts[0])  # (K, h) dL/da through the head
        loss = float(nll(*target_scores([r[0] for r in results], K, dt)).sum())
        for g, (A, W, b, tg, tail) in enumerate(groups[1:], 1):
            loss += float(nll(*results[owner[g - 1]][g][1:]).sum())
            # backward through q_i = a @ Proj_i.T
            (i, sel), gq = tail, parts[g][0]  # (k_i, d_i) dL/dq_i
            np.matmul(gq.T, a[sel], out=grads[f"Proj_{i}"])  # (d_i, h)
            ga[sel] += gq @ P[f"Proj_{i}"]  # (k_i, h)
        for i in set(range(1, layer.n + 1)) - {t[0] for *_, t in groups[1:]}:
            for k in ("Proj", "U", "b"):
                grads[f"{k}_{i}"].fill(0)  # a tail no target reached: zero
        return loss / K, {"U": ga}, grads

    @staticmethod
    def _sum(parts: np.ndarray) -> np.ndarray:
        """The blocks' shares (T, ...) added in block order, into parts[0]."""
        for j in range(1, len(parts)):
            parts[0] += parts[j]
        return parts[0]

    def _blocks(self, K: int) -> int:
        """Threads for the softmaxes of K examples (1 below MIN_BLOCK_WORK: meeting costs more)."""
        T, P = threads(), self.params
        return T if T > 1 and K * P["U_head"].size >= self.MIN_BLOCK_WORK else 1
