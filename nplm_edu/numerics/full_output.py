"""The full softmax output layer of any network made fast, the same numbers as
:class:`~nplm_edu.models.output.FullSoftmax` (equal in float64, up to rounding).

The logits of all N positions of a batch are one product into a reused (N, |V|) buffer, and the
softmax and its gradient are computed in place (the softmax-NLL head,
:func:`~nplm_edu.numerics.head.softmax_nll`): no copy of the scores, of p or of dL/dy is made. On
several threads (:mod:`~nplm_edu.numerics.threads`) each computes a block of the output units, their
share of the softmax and their rows of dL/dU and dL/db (the paper's section 3.2 output blocks), and only
dL/dA is summed. Any other output layer is called through its interface.

:class:`FastOutput` is a mixin of a model with ``params`` ("U" (|V|, width), "b"), ``V``, ``output`` and
``config.dtype``: the fast recurrent networks (:mod:`~nplm_edu.numerics.recurrent`) and the fast
Transformer (:mod:`~nplm_edu.numerics.transformer`) use it. The arrays it returns live in buffers
that the next call overwrites: use them before calling again.
"""

from __future__ import annotations

import numpy as np

from ..models.output import FullSoftmax
from .head import nll, softmax_nll
from .threads import block_range, run_blocks, threads


class FastOutput:
    """The fast full-softmax output layer, as a mixin (see the module docstring)."""

    MIN_BLOCK_WORK = 1 << 24  # T B |V| h from which the output layer is split among threads (see FusedNPLM)

    def _buffer(self, name: str, shape: tuple, zero: bool = False) -> np.ndarray:
        bufs = self.__dict__.setdefault("_buf", {})
        b = bufs.get(name)
        if b is None or b.shape != shape:
            b = bufs[name] = np.empty(shape, self.config.dtype)
        if zero:
            b.fill(0)
        return b

    def _output(self, cache, targets):
        """(mean NLL, dL/dA (N, width), grads of U and b) of the output layer on A = cache["inputs"]["U"]
        (N positions): fused for the full softmax."""
        P, inputs = self.params, cache["inputs"]
        if type(self.output) is not FullSoftmax:
            loss, oc = self.output.loss(P, inputs, targets)
            g_in, grads = self.output.backward(P, oc)
            return loss, g_in["U"], grads
        A = inputs["U"]  # (N, width): N positions (T B of a recurrent batch)
        N = A.shape[0]
        T = self._blocks(N)
        if T > 1:
            return self._output_blocks(A, targets, T)
        y = self._buffer("y", (N, self.V))
        np.matmul(A, P["U"].T, out=y)  # the logits of all N positions in one product
        y += P["b"]  # (N, |V|)
        _, yt, mx, s = softmax_nll(y, targets)  # y <- dL/dy = (p - onehot) / N
        loss = float(np.mean(nll(yt, mx, s)))  # mean negative log-likelihood
        gU = np.matmul(y.T, A, out=self._buffer("gU", P["U"].shape))  # (|V|, width)
        gb = np.sum(y, axis=0, out=self._buffer("gb", P["b"].shape))  # (|V|,)
        gA = np.matmul(y, P["U"], out=self._buffer("gA", A.shape))  # (N, width)
        return loss, gA, {"U": gU, "b": gb}

    def _output_blocks(self, A, targets, T: int, grad: bool = True):
        """:meth:`_output` on T threads: thread i computes the scores of its block of units, the head
        on them (max and sum combined across the blocks) and its rows of dL/dU, dL/db; the blocks'
        shares of dL/dA (N, h) are summed in their order. Without ``grad``: (yt, max, sum) only."""
        P, N = self.params, A.shape[0]
        if grad:
            gU = self._buffer("gU", P["U"].shape)  # (|V|, width)
            gb = self._buffer("gb", P["b"].shape)  # (|V|,)
            parts = self._buffer("gA_parts", (T,) + A.shape)  # each block's share of dL/dA  (T, N, h)

        def block(i, reduce):
            lo, hi = block_range(self.V, T, i)
            y = self._buffer(f"y{i}", (N, hi - lo))  # (N, B) this block's scores
            np.matmul(A, P["U"][lo:hi].T, out=y)  # b added by the head
            # y <- dL/dy of the block, gb[lo:hi] <- its column sums
            own, yt, mx, s = softmax_nll(y, targets, lo, reduce, grad, P["b"][lo:hi], gb[lo:hi] if grad else None)
            if grad:
                np.matmul(y.T, A, out=gU[lo:hi])  # (B, h)
                np.matmul(y, P["U"][lo:hi], out=parts[i])  # (N, h)
            return own, yt, mx, s

        yt = np.empty(N, A.dtype)
        for own, yt_i, mx, s in run_blocks(block, T):
            yt[own] = yt_i  # each target's score, from the block that holds it
        if not grad:
            return yt, mx, s
        gA = parts[0]
        for j in range(1, T):
            gA += parts[j]
        return float(np.mean(nll(yt, mx, s))), gA, {"U": gU, "b": gb}

    def _blocks(self, N: int) -> int:
        """Threads for the full softmax of N positions (1 below MIN_BLOCK_WORK: meeting costs more)."""
        T = threads()
        return T if T > 1 and N * self.V * self.params["U"].shape[1] >= self.MIN_BLOCK_WORK else 1
