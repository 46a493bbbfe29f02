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
from .blas import subtract_at
from .head import head_block, nll, softmax_nll, target_scores
from .threads import block_range, one_blas_thread, run_blocks, threads


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
        on them (max and sum combined across the blocks), its share of dL/dA and its rows of dL/dU,
        dL/db (:func:`~nplm_edu.numerics.head.head_block`); the blocks' shares of dL/dA (N, h) are
        summed in their order. Without ``grad``: (yt, max, sum) only."""
        P, N = self.params, A.shape[0]
        if grad:
            gU = self._buffer("gU", P["U"].shape)  # (|V|, width)
            gb = self._buffer("gb", P["b"].shape)  # (|V|,)
            parts = self._buffer("gA_parts", (T,) + A.shape)  # each block's share of dL/dA  (T, N, h)

        def block(i, reduce):
            lo, hi = block_range(self.V, T, i)
            Ui, b = P["U"][lo:hi], P["b"][lo:hi]
            y = self._buffer(f"y{i}", (N, hi - lo))  # (N, B) this block's scores
            np.matmul(A, Ui.T, out=y)  # b added by the head
            if not grad:
                return softmax_nll(y, targets, lo, reduce, False, b)
            # y <- e = exp(y - q), parts[i] <- dL/dy_i U_i, gb[lo:hi] <- dL/db_i
            own, cols, yt, mx, s, scale = head_block(y, targets, lo, reduce, Ui, b, parts[i], gb[lo:hi])
            # dL/dU_i = dL/dy_i^T A = e^T diag(scale) A - onehot^T A / N
            As = np.multiply(A, scale[:, None], out=self._buffer(f"As{i}", A.shape))  # diag(scale) A  (N, h)
            np.matmul(y.T, As, out=gU[lo:hi])  # (B, h)
            subtract_at(gU[lo:hi], cols, A[own] * A.dtype.type(1.0 / N))  # np.subtract.at's numbers, faster
            return own, yt, mx, s

        yt, mx, s = target_scores(run_blocks(block, T), N, A.dtype)
        if not grad:
            return yt, mx, s
        gA = parts[0]
        for j in range(1, T):
            gA += parts[j]
        return float(np.mean(nll(yt, mx, s))), gA, {"U": gU, "b": gb}

    def _log_probs(self, A, targets):
        """log p(w_t) (N,) float64 of the N positions A (N, width) under the full softmax (on several
        threads, the output blocks without their gradients)."""
        P, N = self.params, A.shape[0]
        T = self._blocks(N)
        if T > 1:
            with one_blas_thread():
                yt, mx, s = self._output_blocks(A, targets, T, grad=False)
        else:
            y = np.matmul(A, P["U"].T, out=self._buffer("y", (N, self.V)))
            y += P["b"]
            _, yt, mx, s = softmax_nll(y, targets, grad=False)
        return -nll(yt, mx, s)

    def _blocks(self, N: int) -> int:
        """Threads for the full softmax of N positions (1 below MIN_BLOCK_WORK: meeting costs more)."""
        T = threads()
        return T if T > 1 and N * self.V * self.params["U"].shape[1] >= self.MIN_BLOCK_WORK else 1
