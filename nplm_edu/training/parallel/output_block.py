"""Parameter-parallel training with output blocks over MPI (section 3.2 of the paper).

CPU i of M owns a contiguous block of output units, start = i*ceil(|V|/M), length
min(ceil(|V|/M), |V| - start): its rows of U, W and b. Every CPU keeps a full copy of C, H, d and
computes x and a = tanh(d + H x) itself (replicated). For a minibatch of K examples (K = 1 is the
paper's per-example loop)::

    forward   x, a                                     replicated
              y_j = b_j + U_j a (+ W_j x) for j in block  (K, B)
              q = max_j y_j           -> Allreduce(MAX)  -> Q       (K,)
              e_j = exp(y_j - Q), s = sum_j e_j -> Allreduce(SUM) -> S   (K,)
              p_j = e_j / S
    backward  dL/dy_j = (p_j - 1[j = w_t]) / K       own block (gradient of the MEAN NLL)
              [dL/da, dL/dx] partial = dL/dy [U_j W_j]   -> Allreduce(SUM), one message
              dL/d[U W]_j, dL/db_j                     own block only
              dL/do = (1 - a^2) dL/da, dL/dx += dL/do H, dL/dH, dL/dd, dL/dC   replicated
    update    p <- p - lr_t (g + wd p) for C, H, U, W; p <- p - lr_t g for b, d; lr_t = lr0 / (1 + r t)

Three Allreduce calls per update, of K, K and K (h + (n-1)m + 1) numbers. The last one also
carries y_{w_t} - Q from the CPU that owns w_t, so every CPU (rank 0 included) learns
log P(w_t | context) = y_{w_t} - Q - log S without a separate message (the paper sends p_{w_t} to
CPU 0). The update equals the serial trainer's (``NPLM.loss_and_grads`` + ``optim.sgd_step``) up to
rounding: only the order of some sums differs.

The arithmetic is the fused network's (:mod:`nplm_edu.numerics.fused`: :func:`~nplm_edu.numerics.fused.features`,
the softmax-NLL head :func:`~nplm_edu.numerics.head.softmax_nll` on this rank's block of units with the
collectives as its ``reduce``, :func:`~nplm_edu.numerics.fused.features_backward`);
only the Allreduce calls between the pieces are this module's.
All collectives are mpi4py *buffer* calls (``Allreduce`` in place on preallocated numpy arrays).
With ``comm=None`` (M = 1) nothing is imported from MPI and the code runs serially.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager

import numpy as np

from ...errors import UserError
from ...numerics.blas import gemm_update, segment_sum
from ...numerics.fused import features, features_backward
from ...numerics.head import softmax_nll
from ...numerics.threads import block_range, set_threads, threads_per_process
from ...progress import progress_bar
from ..checkpoint import set_params
from ..optim import learning_rate
from ..backends import Backend


class OutputBlockSGD:
    """SGD on the NPLM with the output layer split over the ranks of ``comm`` (section 3.2).

    ``params`` is the full model ({C, H, d, U, W (if direct), b}, e.g. ``NPLM(config).params``),
    identical on every rank (same seed). Each rank copies what it needs: C, H, d whole, and its
    rows of [U W] (one array, so the block's output is one matrix product) and b.
    ``gather()`` reassembles the full parameters on rank 0.

    ``t`` counts updates; ``lr`` and ``r`` are the rate of :func:`train_steps`, lr_t = lr / (1 + r t)
    (:func:`~nplm_edu.training.optim.learning_rate`; the trainer gives each step its own). ``timers`` holds seconds spent in
    Allreduce calls ("comm"), in this rank's output block's arithmetic ("block": y, softmax, the
    block's gradients and update) and in the whole of :meth:`step` ("total"), measured in the loop.
    ``lock``: optional lock held while the parameters are written (hogwild's locked variant).
    """

    def __init__(self, params: dict, *, lr: float = 1e-3, r: float = 1e-8, weight_decay: float = 0.0,
                 batch_size: int = 1, comm=None, lock=None):
        self.comm, self.lock = comm, lock
        self.rank, self.size = (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())
        if comm is not None:
            from mpi4py import MPI  # lazily: serial runs never touch MPI
            self._MPI = MPI
        self.lr0, self.r, self.wd, self.K = lr, r, weight_decay, int(batch_size)
        C, H = params["C"], params["H"]
        self.V, self.m = C.shape
        self.h, self.nm = H.shape  # h, (n-1)m
        self.n = self.nm // self.m + 1
        self.direct = "W" in params
        self.dtype = C.dtype
        self.start, self.stop = block_range(self.V, self.size, self.rank)
        blk = slice(self.start, self.stop)
        self.D = self.h + self.nm if self.direct else self.h  # width of [U W]
        UW = np.concatenate([params["U"][blk], params["W"][blk]], axis=1) if self.direct else params["U"][blk]
        # the state this rank trains: replicated C, H, d; its block of [U W] and b
        self.state = {"C": np.array(C), "H": np.array(H), "d": np.array(params["d"]),
                      "UW": np.ascontiguousarray(UW, dtype=self.dtype).copy(),
                      "b": np.array(params["b"][blk])}
        self.t = 0
        self.timers = {"comm": 0.0, "block": 0.0, "total": 0.0}  # seconds, measured in step
        self._alloc(self.K)

    # ----------------------------------------------------------------- buffers and MPI
    def _alloc(self, K: int) -> None:
        """Preallocate every array the step writes (K rows; smaller batches use the first rows)."""
        B, dt = self.stop - self.start, self.dtype
        self.Kbuf = K
        self.z = np.empty((K, self.h + self.nm), dt)  # [a x]            (K, h + (n-1)m)
        self.y = np.empty((K, B), dt)  # logits, then p, then dL/dy      (K, B)
        self.Q = np.empty(K, dt)  # row maxima                           (K,)
        self.S = np.empty(K, dt)  # sums of exponentials                 (K,)
        self.g = np.empty((K, self.h + self.nm + 1), dt)  # [dL/da dL/dx | y_wt - Q]  (K, h + (n-1)m + 1)
        self.yt = np.empty(K, dt)  # y_wt - Q alone (evaluation)           (K,)
        self._flag = np.zeros(1)  # one rank's yes/no, for any_rank        (1,)

    def _allreduce(self, buf: np.ndarray, op: str) -> None:
        """In-place Allreduce of a contiguous numpy array; its time goes to timers["comm"]."""
        if self.comm is None:
            return
        t0 = time.perf_counter()
        self.comm.Allreduce(self._MPI.IN_PLACE, buf, op=getattr(self._MPI, op))
        self.timers["comm"] += time.perf_counter() - t0

    # ----------------------------------------------------------------- forward
    def _forward(self, contexts: np.ndarray, targets: np.ndarray, grad: bool = True):
        """Replicated x, a; this block's dL/dy_j (without ``grad``: exp(y_j - Q)); y_{w_t} - Q if this
        rank owns w_t. Returns the cache."""
        k, h = len(targets), self.h
        P = self.state
        z, y, g = self.z[:k], self.y[:k], self.g[:k]
        ids, dtanh = features(P, contexts, z, h)  # x, a = tanh(d + H x), replicated on every rank
        tb, comm0 = time.perf_counter(), self.timers["comm"]
        np.matmul(z[:, :self.D], P["UW"].T, out=y)  # y_j = U_j a + W_j x  (k, B)
        y += P["b"]  # + b_j
        # the softmax-NLL head on this block: e_j = exp(y_j - Q), S = sum over all |V| units, then
        # dL/dy_j = (e_j / S - 1[j = w_t]) / k; own: the examples whose w_t is in this block
        own, yt, Q, S = softmax_nll(y, targets, self.start, self._reduce, grad)
        # the block's scores and its share of the head (max, exp, sum over its B units, gradient),
        # less the softmax's two Allreduce calls, which "comm" counts
        self.timers["block"] += time.perf_counter() - tb - (self.timers["comm"] - comm0)
        g[:, -1] = 0
        g[own, -1] = yt - Q[own]  # y_{w_t} - Q, summed over ranks with the backward message
        return ids, z, y, S, g, dtanh

    def _reduce(self, buf: np.ndarray, op: str) -> None:
        """The softmax's reduction over the blocks (timed as "comm", and not as the block's own work)."""
        self._allreduce(buf, op)

    # ----------------------------------------------------------------- one update
    def step(self, contexts: np.ndarray, targets: np.ndarray, lr: float) -> float:
        """One SGD update on a minibatch (any K = len(targets)) with learning rate ``lr``. Returns its
        mean NLL (before the update), known on every rank."""
        t0 = time.perf_counter()
        k, h, nm = len(targets), self.h, self.nm
        if k > self.Kbuf:
            self._alloc(k)
        P = self.state
        ids, z, gy, S, g, dtanh = self._forward(contexts, targets)  # gy = dL/dy of this block
        tb = time.perf_counter()
        # backward through y = [U W] [a x] + b: this block's share of dL/d[a x]
        np.matmul(gy, P["UW"], out=g[:, :self.D])  # (k, h + (n-1)m) partial sums
        if not self.direct:
            g[:, h:h + nm] = 0
        gb = gy.sum(axis=0)  # dL/db_j  (B,)
        self.timers["block"] += time.perf_counter() - tb
        self._allreduce(g, "SUM")  # one message: dL/da, dL/dx (direct part), y_{w_t} - Q
        loss = float(np.mean(np.log(S.astype(np.float64)) - g[:, -1]))  # -log p(w_t), mean over k
        go, gx = features_backward(P, g[:, :h + nm], dtanh, h)  # replicated: dL/do, dL/dx
        gH = go.T @ z[:, h:]  # (h, (n-1)m)
        gd = go.sum(axis=0)  # (h,)
        words, gCw = segment_sum(ids.ravel(), gx.reshape(-1, self.m))  # backward through the look-up
        # update: p <- p - lr (g + wd p) for C, H, U, W; p <- p - lr g for b, d
        keep = 1.0 - lr * self.wd
        with self.lock if self.lock is not None else _nolock():
            tb = time.perf_counter()
            # [U W]_j <- keep [U W]_j - lr dL/dy^T [a x]: one fused GEMM, the gradient never stored
            gemm_update(P["UW"], gy, z[:, :self.D], alpha=-lr, beta=keep)
            P["b"] -= lr * gb
            self.timers["block"] += time.perf_counter() - tb
            P["H"] *= keep
            P["H"] -= lr * gH
            P["d"] -= lr * gd
            if self.wd:
                P["C"] *= keep  # weight decay on the whole table (replicated)
            P["C"][words] -= lr * gCw  # only the context words' rows get a gradient step
        self.t += 1
        self.timers["total"] += time.perf_counter() - t0
        return loss

    # ----------------------------------------------------------------- evaluation and results
    def total_nll(self, contexts: np.ndarray, targets: np.ndarray, batch: int = 1024) -> float:
        """Sum of -log P(w_t | context) over all windows, computed in parallel (forward only,
        ``batch`` windows per round of collectives)."""
        if self.Kbuf < batch:
            self._alloc(batch)
        total = 0.0
        for i in range(0, len(targets), batch):
            c, w = np.asarray(contexts[i:i + batch]), np.asarray(targets[i:i + batch])
            _, _, _, S, g, _ = self._forward(c, w, grad=False)
            yt = self.yt[:len(w)]
            yt[:] = g[:, -1]
            self._allreduce(yt, "SUM")  # y_{w_t} - Q from the rank that owns w_t
            total += float(np.sum(np.log(S.astype(np.float64)) - yt))
        return total

    def perplexity(self, contexts: np.ndarray, targets: np.ndarray) -> float:
        """exp of the mean negative log-likelihood (every rank gets the same number)."""
        return float(np.exp(self.total_nll(contexts, targets) / len(targets)))

    def gather(self, root: int = 0) -> dict | None:
        """The full parameters {C, H, d, U, W, b} on ``root`` (blocks of [U W] and b gathered with
        Gatherv); None on the other ranks."""
        P = self.state
        V, D = self.V, self.D
        if self.comm is None:
            UW, b = P["UW"].copy(), P["b"].copy()
        else:
            sizes = [block_range(V, self.size, i) for i in range(self.size)]
            counts = np.array([stop - start for start, stop in sizes])
            displs = np.array([start for start, _ in sizes])
            is_root = self.rank == root
            UW = np.empty((V, D), self.dtype) if is_root else None
            b = np.empty(V, self.dtype) if is_root else None
            self.comm.Gatherv(P["UW"], [UW, (counts * D, displs * D)] if is_root else None, root=root)
            self.comm.Gatherv(P["b"], [b, (counts, displs)] if is_root else None, root=root)
            if not is_root:
                return None
        out = {"C": P["C"].copy(), "H": P["H"].copy(), "d": P["d"].copy(), "U": UW[:, :self.h].copy()}
        if self.direct:
            out["W"] = UW[:, self.h:].copy()
        out["b"] = b
        return out

    def replicas_agree(self) -> bool:
        """True if C, H, d are bitwise identical on every rank (the replicated updates never drift)."""
        if self.comm is None:
            return True
        ok = True
        for name in ("C", "H", "d"):
            ref = self.state[name].copy()
            self.comm.Bcast(ref, root=0)
            ok &= bool(np.array_equal(ref, self.state[name]))
        return bool(self.comm.allreduce(ok, op=self._MPI.LAND))

    def any_rank(self, flag: bool) -> bool:
        """Whether ``flag`` is true on any rank: collective, one Allreduce of one number (preallocated)."""
        self._flag[0] = float(flag)
        self._allreduce(self._flag, "MAX")
        return bool(self._flag[0])

    def split_times(self) -> dict:
        """Seconds in Allreduce ("comm") and the rest of step ("compute"), and the comm share."""
        total, comm, block = self.timers["total"], self.timers["comm"], self.timers["block"]
        return {"total": total, "comm": comm, "compute": total - comm, "block": block,
                "replicated": total - comm - block, "comm_share": comm / total if total else 0.0}


@contextmanager
def _nolock():
    yield


def epoch_batches(order: np.ndarray, K: int):
    """Consecutive minibatches of K example indices (the last one may be shorter)."""
    for i in range(0, len(order), K):
        yield order[i:i + K]


def train_steps(trainer: OutputBlockSGD, contexts: np.ndarray, targets: np.ndarray, order: np.ndarray,
                progress: bool = False) -> float:
    """One pass over ``order`` (example indices) in minibatches of trainer.K; mean training NLL."""
    total, count = 0.0, 0
    batches = epoch_batches(order, trainer.K)
    if progress and trainer.rank == 0:
        batches = progress_bar(batches, total=math.ceil(len(order) / trainer.K), desc="updates", leave=False)
    for idx in batches:
        loss = trainer.step(contexts[idx], targets[idx], learning_rate(trainer.lr0, trainer.r, trainer.t))
        total += loss * len(idx)
        count += len(idx)
    return total / max(count, 1)


class OutputBlockBackend(Backend):
    """The output-block algorithm as a backend of :func:`nplm_edu.training.trainer.train`: every rank
    runs the same loop (same order, same learning rates); rank 0 writes the history and checkpoints.

    Checkpoints are written at the end of every epoch only, so there are no timed checkpoints; Ctrl-C
    or SIGTERM on any rank stops every rank after the same update (:meth:`stop_requested` agrees on
    it every ``STOP_CHECK_EVERY`` updates), keeping the last epoch's checkpoint, from which resume
    continues."""

    saves_inside_epochs = False  # Ctrl-C or SIGTERM on any rank: every rank stops after the same update
    STOP_CHECK_EVERY = 16  # updates between two agreements on that (one Allreduce of one number)

    def __init__(self, model, config, comm=None):
        if config.optimizer != "sgd" or config.dropout_x or config.dropout_a or config.tie:
            raise UserError("output-block training is the paper's SGD only (no Adam, dropout or tied U)")
        super().__init__(model)
        self.config, self.comm = config, comm
        if comm is not None:  # the ranks of one node share its cores
            set_threads(config.threads or threads_per_process(node_ranks(comm)))
        self._build(model.params)
        self.writer = self.sgd.rank == 0
        self._calls = 0

    def _build(self, params: dict) -> None:
        c = self.config
        self.sgd = OutputBlockSGD(params, weight_decay=c.weight_decay, batch_size=c.batch, comm=self.comm)
        self._timers = dict(self.sgd.timers)

    def update(self, contexts, targets, lr: float) -> float:
        return self.sgd.step(contexts, targets, lr=lr)

    def batch_bytes(self, K: int) -> int:
        """This rank's share (the lower bound a rank on its own machine needs): the model's, with the
        scores of its block of words only."""
        return self.model.batch_bytes(K, outputs=self.sgd.stop - self.sgd.start)

    def stop_requested(self, flag: bool, now: bool = False) -> bool:
        """Whether any rank has been asked to stop (its ``flag``), agreed every STOP_CHECK_EVERY calls
        and whenever ``now`` (the end of an epoch): collective, every rank calls it at the same points
        (after every update, at every epoch's end) and gets the same answer there."""
        self._calls += 1
        if self._calls % self.STOP_CHECK_EVERY and not now:
            return False
        return self.sgd.any_rank(flag)

    def perplexity(self, contexts, targets) -> float:
        return self.sgd.perplexity(contexts, targets)

    def params(self) -> dict | None:
        """The full parameters on rank 0 (None elsewhere); collective: every rank calls it."""
        return self.sgd.gather()

    def load(self, params: dict) -> None:
        set_params(self.model, params)
        self._build(self.model.params)

    def epoch_extra(self) -> dict:
        """Seconds in Allreduce and in the rest of the updates since the last call (per epoch)."""
        now = dict(self.sgd.timers)
        spent = {k: now[k] - self._timers.get(k, 0.0) for k in now}
        self._timers = now
        return {"comm_seconds": spent["comm"], "compute_seconds": spent["total"] - spent["comm"]}


def node_ranks(comm) -> int:
    """How many ranks of ``comm`` run on this node (they share its cores)."""
    from mpi4py import MPI

    return comm.Split_type(MPI.COMM_TYPE_SHARED).Get_size()
