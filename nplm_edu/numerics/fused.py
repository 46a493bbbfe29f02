"""The NPLM's forward and backward passes made fast: the same arithmetic as the reference
(:mod:`nplm_edu.models.nplm`, the same numbers in float64), arranged for speed.

What changes against the reference (the output layer is ~99% of the work at |V| = 17,907):

- U and W live side by side in one array ``[U W]`` (|V|, h + (n-1)m); ``params["U"]`` and
  ``params["W"]`` are views of it, so ``y = b + [U W] [a x]`` is ONE matrix product, and so are the
  gradients of ``[a x]`` and of ``[U W]`` (``z = [a x]`` is built once, in a reused buffer).
- The softmax and its gradient are computed in place in one preallocated (K, |V|) buffer, in blocks
  of 16 rows that stay in cache, on as many threads as BLAS uses (the softmax-NLL head,
  :func:`nplm_edu.numerics.head.softmax_nll`).
- :meth:`FusedNPLM.sgd_update` updates the parameters as the gradients are found, as the paper's
  algorithm does (section 3.2): one BLAS call does [U W] <- (1 - lr wd) [U W] - lr dL/dy^T [a x]
  without storing the (|V|, h + (n-1)m) gradient; only the rows of C of the words in the batch get
  a gradient step (weight decay still shrinks all of C).
- On T threads (:mod:`nplm_edu.numerics.threads`) the update and the probabilities are the paper's
  output-block algorithm with threads for processors: thread i computes the scores of its block of
  output units, their softmax (the row maxima and sums combined across the blocks), its share of
  dL/d[a x] and the update of its rows of [U W] and b; the shares of dL/d[a x] are then summed.

:func:`features`, the head (:mod:`nplm_edu.numerics.head`) and :func:`features_backward` are
the pieces; :class:`FusedNPLM` joins them for one process, and the output-block trainer
(:mod:`nplm_edu.training.parallel.output_block`) joins them with MPI collectives in between.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..models.nplm import NPLM, NPLMConfig
from ..models.output import FullSoftmax, log_softmax
from .blas import gemm_update, segment_sum
from .head import head_block, nll, softmax_nll, target_scores
from .threads import block_range, one_blas_thread, run_blocks, threads


# --------------------------------------------------------------------------- the pieces
def features(P: dict, contexts: np.ndarray, z: np.ndarray, h: int, mask_x=None, mask_a=None):
    """Fill z = [a x] (K, h + (n-1)m) in place; returns (ids (K, n-1), tanh'(o) (K, h)).

    x = (C(w_{t-1}), ..., C(w_{t-n+1})), o = d + H x, a = tanh(o), with dropout masks if given."""
    K = contexts.shape[0]
    ids = contexts[:, ::-1]  # (K, n-1) paper's order: w_{t-1}, w_{t-2}, ..., w_{t-n+1}
    x = z[:, h:]  # (K, (n-1)m)
    x[:] = P["C"][ids].reshape(K, x.shape[1])  # x = (C(w_{t-1}), ..., C(w_{t-n+1}))
    if mask_x is not None:
        x *= mask_x  # dropout on x
    a = z[:, :h]  # (K, h)
    np.matmul(x, P["H"].T, out=a)  # o = H x
    a += P["d"]  # o = d + H x
    np.tanh(a, out=a)  # a = tanh(o)
    dtanh = 1 - a * a  # (K, h) tanh'(o), before a is dropped
    if mask_a is not None:
        a *= mask_a  # dropout on a
    return ids, dtanh


def features_backward(P: dict, gz: np.ndarray, dtanh: np.ndarray, h: int, mask_x=None, mask_a=None):
    """From dL/d[a x] (K, h + (n-1)m) back to the features, in place: returns (dL/do (K, h),
    dL/dx (K, (n-1)m), a view of gz)."""
    ga = gz[:, :h]  # dL/da  (K, h)
    if mask_a is not None:
        ga *= mask_a  # backward through dropout on a
    go = ga * dtanh  # backward through a = tanh(o): dL/do = (1 - a^2) dL/da   (K, h)
    gx = gz[:, h:]  # dL/dx through the direct connections  (K, (n-1)m)
    gx += go @ P["H"]  # backward through o = d + H x: dL/dx += dL/do H
    if mask_x is not None:
        gx *= mask_x  # backward through dropout on x
    return go, gx


# --------------------------------------------------------------------------- the network
class FusedNPLM(NPLM):
    """The NPLM with the full softmax, fused for speed: same parameters, same initial values and the
    same numbers (up to rounding) as :class:`~nplm_edu.models.nplm.NPLM`.

    ``params`` entries may be modified in place or replaced by new arrays (the next call re-fuses
    U and W; the dict then holds views again)."""

    fused_sgd = True  # sgd_update: the paper's step without storing the gradient

    # K |V| (h + (n-1)m) (or K |V| h) from which the output layer is split among threads: below it
    # (about a millisecond of products) meeting at the barriers costs more than the second core saves
    MIN_BLOCK_WORK = 1 << 24

    def __init__(self, config: NPLMConfig, output=None):
        if output is not None and type(output) is not FullSoftmax:
            raise UserError("the fused network has the full softmax only; use NPLM for other output layers")
        super().__init__(config)
        h = config.h
        if config.direct:
            P = self.params
            self._UW = np.concatenate([P["U"], P["W"]], axis=1)  # (|V|, h + (n-1)m): [U W] in one array
            P["U"], P["W"] = self._UW[:, :h], self._UW[:, h:]
        self._buf: dict[str, np.ndarray] = {}

    def _output_weights(self) -> np.ndarray:
        """[U W] (|V|, h + (n-1)m) as one array; re-fused if someone replaced params["U"/"W"]."""
        P, h = self.params, self.config.h
        if not self.config.direct:
            return P["U"]
        if P["U"].base is not self._UW or P["W"].base is not self._UW:
            self._UW = np.concatenate([P["U"], P["W"]], axis=1).astype(self.config.dtype)
            P["U"], P["W"] = self._UW[:, :h], self._UW[:, h:]
        return self._UW

    def _buffer(self, name: str, shape: tuple) -> np.ndarray:
        """A preallocated work array, reused while the batch size stays the same."""
        b = self._buf.get(name)
        if b is None or b.shape != shape:
            b = self._buf[name] = np.empty(shape, self.config.dtype)
        return b

    # ----------------------------------------------------------------- forward / backward
    def _forward(self, contexts: np.ndarray, mask_x=None, mask_a=None) -> dict:
        """z = [a x] and the logits y (in a reusable buffer). Caches what backward needs."""
        P, cfg = self.params, self.config
        K, h = contexts.shape[0], cfg.h
        UW = self._output_weights()
        D = UW.shape[1]  # h + (n-1)m with direct connections, h without
        z = self._buffer("z", (K, h + (cfg.n - 1) * cfg.m))  # [a x]  (K, h + (n-1)m)
        ids, dtanh = features(P, contexts, z, h, mask_x, mask_a)
        y = self._buffer("y", (K, cfg.V))  # (K, |V|)
        np.matmul(z[:, :D], UW.T, out=y)  # y = U a + W x  (one product with [U W])
        y += P["b"]  # y = b + W x + U a
        return {"ids": ids, "z": z, "dtanh": dtanh, "y": y, "UW": UW, "mask_x": mask_x, "mask_a": mask_a}

    def _backward(self, cache: dict, targets: np.ndarray):
        """Softmax + mean NLL, then its gradient back to the features.

        Returns (loss, dL/dy (K, |V|) in the y buffer, dL/d[a x] (K, h + (n-1)m), dL/do (K, h), dL/dx)."""
        y, z, UW = cache["y"], cache["z"], cache["UW"]
        K, h = y.shape[0], self.config.h
        _, yt, mx, s = softmax_nll(y, targets)  # y <- dL/dy: backward through softmax + mean NLL
        loss = float(np.mean(nll(yt, mx, s)))  # mean negative log-likelihood
        gy = y
        # backward through y = [U W] [a x] + b: dL/d[a x] = dL/dy [U W]
        # (computed transposed, [U W]^T dL/dy^T: OpenBLAS splits that shape well across threads)
        gzT = self._buffer("gzT", (z.shape[1], K))  # (h + (n-1)m, K)
        D = UW.shape[1]
        np.matmul(UW.T, gy.T, out=gzT[:D])
        if D < z.shape[1]:  # no direct connections: y does not depend on x directly
            gzT[D:] = 0
        gz = gzT.T  # (K, h + (n-1)m)
        go, gx = features_backward(self.params, gz, cache["dtanh"], h, cache["mask_x"], cache["mask_a"])
        return loss, gy, gz, go, gx

    def loss_and_grads(self, contexts, targets, mask_x=None, mask_a=None):
        """As :meth:`~nplm_edu.models.nplm.NPLM.loss_and_grads` (the gradient arrays may be reused by the next call)."""
        contexts, targets = self.check_ids(contexts, targets)
        cfg, P = self.config, self.params
        cache = self._forward(contexts, mask_x, mask_a)
        loss, gy, gz, go, gx = self._backward(cache, targets)
        z, h, D = cache["z"], cfg.h, cache["UW"].shape[1]
        g = {}
        gUW = gy.T @ z[:, :D]  # dL/d[U W] = dL/dy^T [a x]   (|V|, h + (n-1)m)
        g["U"] = gUW[:, :h]
        if cfg.direct:
            g["W"] = gUW[:, h:]
        g["b"] = gy.sum(axis=0)  # dL/db  (|V|,)
        g["H"] = go.T @ z[:, h:]  # dL/dH = dL/do^T x   (h, (n-1)m)
        g["d"] = go.sum(axis=0)  # dL/dd   (h,)
        # backward through the look-up: each slot's gradient added to its word's row of C
        words, sums = segment_sum(cache["ids"].ravel(), gx.reshape(-1, cfg.m))
        gC = np.zeros_like(P["C"])
        gC[words] = sums  # (|V|, m), rows of words absent from the batch stay 0
        g["C"] = gC
        if self.tied:
            g["C"] += g.pop("U")
        return loss, {k: g[k] for k in P if k in g}

    def sgd_update(self, contexts, targets, lr: float, weight_decay: float) -> float:
        """One step of the paper's rule on a batch, updating the parameters as the gradients are found:
        p <- p - lr (g + weight_decay p) for C, H, U, W and p <- p - lr g for b, d (section 4; equal up
        to rounding to :func:`nplm_edu.training.optim.sgd_step` on :meth:`loss_and_grads`).
        Returns the batch's mean NLL (before the step)."""
        if self.tied:
            raise UserError("the fused SGD update does not support tied embeddings: use loss_and_grads")
        contexts, targets = self.check_ids(contexts, targets)
        P = self.params
        keep = 1.0 - lr * weight_decay  # weight decay: p <- (1 - lr wd) p - lr g
        T = self._blocks(len(targets))
        if T > 1:
            with one_blas_thread():  # the threads are the blocks'
                return self._sgd_update_blocks(contexts, targets, lr, keep, T)
        cache = self._forward(contexts)
        loss, gy, gz, go, gx = self._backward(cache, targets)
        z, UW = cache["z"], cache["UW"]
        gb = gy.sum(axis=0)  # (|V|,)
        # [U W] <- keep [U W] - lr gy^T [a x]   (one fused GEMM when BLAS is reachable)
        gemm_update(UW, gy, z[:, :UW.shape[1]], alpha=-lr, beta=keep)
        P["b"] -= lr * gb
        self._update_features(cache["ids"], z, go, gx, lr, keep)
        return loss

    def _update_features(self, ids, z, go, gx, lr: float, keep: float) -> None:
        """The SGD step of H, d and the rows of C, from dL/do (K, h) and dL/dx (K, (n-1)m)."""
        P, h = self.params, self.config.h
        gH = go.T @ z[:, h:]  # (h, (n-1)m)
        P["H"] *= keep
        P["H"] -= lr * gH
        P["d"] -= lr * go.sum(axis=0)
        words, sums = segment_sum(ids.ravel(), gx.reshape(-1, self.config.m))
        C = P["C"]
        if keep != 1.0:
            C *= keep  # weight decay on the whole table
        C[words] -= lr * sums  # only the rows of the words in the batch get a gradient step

    # ----------------------------------------------------------------- on T threads
    def _blocks(self, K: int) -> int:
        """How many blocks of output units (threads) the update and the probabilities use: 1 for a
        small step (K |V| D below MIN_BLOCK_WORK), where meeting at the barriers costs more than it saves."""
        T = threads()
        return T if T > 1 and K * self.config.V * self.params["U"].shape[1] >= self.MIN_BLOCK_WORK else 1

    def _scores_blocks(self, contexts, targets, T: int):
        """z = [a x], then on T threads the output-block algorithm's forward (section 3.2): thread i
        computes y_i = b_i + [U W]_i [a x] of its units and the head on them (max and sum over all
        |V| combined across the blocks). Returns (the target scores (K,), row max (K,), row sum of
        exp(y - max) (K,))."""
        P, cfg = self.params, self.config
        K, h = len(targets), cfg.h
        UW = self._output_weights()
        z = self._buffer("z", (K, h + (cfg.n - 1) * cfg.m))  # [a x]  (K, h + (n-1)m)
        features(P, contexts, z, h)
        zD = z[:, :UW.shape[1]]

        def block(i, reduce):
            lo, hi = block_range(cfg.V, T, i)
            y = self._buffer(f"y{i}", (K, hi - lo))  # this block's scores  (K, B)
            np.matmul(zD, UW[lo:hi].T, out=y)  # y_i = [U W]_i [a x], b_i added by the head
            return softmax_nll(y, targets, lo, reduce, False, P["b"][lo:hi])

        return target_scores(run_blocks(block, T), K, z.dtype)

    def _sgd_update_blocks(self, contexts, targets, lr: float, keep: float, T: int) -> float:
        """:meth:`sgd_update` on T threads, the output-block algorithm (section 3.2): thread i computes
        the scores of its block of units, the head and its share of dL/d[a x] on them
        (:func:`~nplm_edu.numerics.head.head_block`: the rows' (max, sum) exchanged with the other
        blocks while it computes a product), hands that share to the others and, while theirs
        arrive, updates its own rows of [U W] and b. Only dL/d[a x] is summed across the blocks (in
        their order); the hidden layer's step is shared among the threads too (:meth:`_features_block`)."""
        P, cfg, K = self.params, self.config, len(targets)
        UW = self._output_weights()
        D = UW.shape[1]
        width = cfg.h + (cfg.n - 1) * cfg.m
        z = self._buffer("z", (K, width))  # [a x]  (K, h + (n-1)m)
        ids, dtanh = features(P, contexts, z, cfg.h)
        zD = z[:, :D]
        parts = self._buffer("gz_parts", (T, K, width))  # each block's share of dL/d[a x]
        H0 = self._buffer("H0", P["H"].shape)
        H0[...] = P["H"]  # H before the step, read by every thread while each updates its rows

        def block(i, reduce):
            lo, hi = block_range(cfg.V, T, i)
            UWi, b, gz = UW[lo:hi], P["b"][lo:hi], parts[i]  # gz: this block's share of dL/d[a x]  (K, width)
            y = self._buffer(f"y{i}", (K, hi - lo))  # (K, B)
            np.matmul(zD, UWi.T, out=y)  # y_i = [U W]_i [a x], b_i added by the head
            gb = self._buffer(f"gb{i}", (hi - lo,))  # dL/db_i  (B,)
            # y <- e = exp(y - q); gz <- dL/dy_i [U W]_i: backward through y_i = [U W]_i [a x] + b_i
            own, cols, yt, mx, S, scale = head_block(y, targets, lo, reduce, UWi, b, gz[:, :D], gb)
            gz[:, D:] = 0  # without direct connections y does not depend on x directly
            if keep != 1.0:  # (before the others, past the next barrier, update rows of C)
                P["C"][lo:hi] *= keep  # weight decay on the table, the same rows as the block's units
            shares = reduce.post(gz)  # (T, K, width) every block's share, once all have arrived
            # [U W]_i <- keep [U W]_i - lr dL/dy_i^T [a x]
            #   with dL/dy_i^T [a x] = e^T diag(scale) [a x] - onehot^T [a x] / K
            zs = np.multiply(zD, scale[:, None], out=self._buffer(f"zs{i}", zD.shape))  # diag(scale) [a x]
            gemm_update(UWi, y, zs, alpha=-lr, beta=keep)
            np.add.at(UWi, cols, zD[own] * zD.dtype.type(lr / K))
            b -= lr * gb
            reduce.wait()
            np.copyto(gz, shares[0])
            for j in range(1, T):
                gz += shares[j]  # dL/d[a x]: the blocks' shares summed in their order, on every thread
            self._features_block(i, T, gz, z, ids, dtanh, H0, lr, keep)
            return own, yt, mx, S

        yt, mx, S = target_scores(run_blocks(block, T), K, z.dtype)
        return float(np.mean(nll(yt, mx, S)))  # mean negative log-likelihood (before the step)

    def _features_block(self, i, T, gz, z, ids, dtanh, H0, lr, keep) -> None:
        """Thread i's share of :meth:`_update_features`, from dL/d[a x] (``gz``, the same on every
        thread): dL/dx of the whole batch (every thread computes it, from ``H0``, a copy of H made
        before the step, so no thread waits for the others to have read H), the SGD step of its
        rows of H and d, and of the rows of C of the words w with w mod T = i (ids run from the most
        frequent word down, so blocks of ids would leave most of the batch's words to thread 0).
        The threads write disjoint rows, so no update is added twice; the same numbers as one thread."""
        P, h, m = self.params, self.config.h, self.config.m
        go = gz[:, :h] * dtanh  # backward through a = tanh(o): dL/do  (K, h)
        gx = gz[:, h:]  # dL/dx through the direct connections  (K, (n-1)m)
        gx += go @ H0  # backward through o = d + H x: dL/dx += dL/do H
        h0, h1 = block_range(h, T, i)
        gH = go[:, h0:h1].T @ z[:, h:]  # dL/dH of this thread's rows  (h1 - h0, (n-1)m)
        P["H"][h0:h1] *= keep
        P["H"][h0:h1] -= lr * gH
        P["d"][h0:h1] -= lr * go[:, h0:h1].sum(axis=0)
        flat = ids.ravel()  # (K (n-1),) the word of each slot of x
        mine = flat % T == i  # the slots whose word is this thread's
        words, sums = segment_sum(flat[mine], gx.reshape(-1, m)[mine])
        P["C"][words] -= lr * sums  # only the rows of the words in the batch get a gradient step

    # ----------------------------------------------------------------- probabilities
    def log_probs(self, contexts):
        contexts, _ = self.check_ids(contexts)
        return log_softmax(self._forward(contexts)["y"].astype(np.float64))  # (K, |V|)

    def log_prob(self, contexts, targets):
        """log P(w_t | context) of each target (K,), without building a float64 (K, |V|) array."""
        contexts, targets = self.check_ids(contexts, targets)
        T = self._blocks(len(targets))
        if T > 1:
            with one_blas_thread():  # the threads are the blocks'
                yt, mx, s = self._scores_blocks(contexts, targets, T)
        else:
            _, yt, mx, s = softmax_nll(self._forward(contexts)["y"], targets, grad=False)
        return -nll(yt, mx, s)  # (K,)

