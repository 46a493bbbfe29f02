"""The softmax-NLL head, in place: from the scores y to the mean negative log-likelihood and dL/dy.

Every fast path ends with it (the fused NPLM, the fast recurrent networks, the output-block
trainer). For K examples with scores y (K, |V|) and targets w_t::

    p = softmax(y) = exp(y - max y) / sum exp(y - max y)           (the max first: exp never overflows)
    NLL_t = log sum exp(y_t) - y_{t, w_t} = max + log s - y_{t, w_t}
    dL/dy = (p - onehot(w_t)) / K                                   (L: the mean NLL over the K examples)

:func:`softmax_nll` overwrites y with exp(y - max) and then with dL/dy, so the (K, |V|) scores are
the only array of that size. It also works on a block of the output units, columns lo .. lo+B-1
of y (the rows of U, W and b of those units): ``reduce(buf, op)`` then combines each row's max
("MAX") and sum of exponentials ("SUM") with the other blocks', so every block is normalised by
the same sum over all |V| units, and only the examples whose target lies in the block get the
-1 of the one-hot term. When ``reduce`` has a ``gather`` (the threads of
:mod:`~nplm_edu.numerics.threads`), the blocks exchange their (max, sum) pairs once instead, and
each combines them: S = sum_j s_j exp(q_j - Q) with Q = max_j q_j, the same numbers. The whole
layer is the block lo = 0, B = |V|, with no ``reduce``.

A block makes two passes over its scores, 16 rows at a time so that they stay in cache: the first
adds the block's biases, subtracts each row's maximum over the block's own units and exponentiates
(the rows' maxima over all |V| units are known only after ``reduce``; exp(y - q) exp(q - Q) =
exp(y - Q) rescales each row afterwards), the second scales the rows to dL/dy and adds up its
columns, dL/db of the block.

:func:`head_block`, for the threads, makes only the first pass: while the other blocks' (max, sum)
pairs arrive, the thread already multiplies e = exp(y - q) by the block's output weights, and
dL/dy = diag(f / (S K)) e - onehot(w_t) / K enters every product through that row scale and the
targets' rows, so dL/dy is never written.
"""

from __future__ import annotations

import numpy as np

from .threads import rowwise


def softmax_nll(y: np.ndarray, targets: np.ndarray, lo: int = 0, reduce=None, grad: bool = True,
                b: np.ndarray | None = None, gb: np.ndarray | None = None):
    """The head on the scores y (K, B) of output units lo .. lo+B-1, in place: y <- exp(y - max),
    then, with ``grad``, y <- dL/dy = (p - onehot(w_t)) / K (see the module docstring).

    Returns (own, yt, mx, s): the rows whose target lies in this block, their target scores (y's
    dtype, read before y is overwritten), and each row's max and sum of exp(y - max) over all
    units (the blocks combined by ``reduce``). For the whole layer, :func:`nll` of (yt, mx, s)
    is each example's negative log-likelihood. With ``reduce`` (a block): ``b`` (B,), the block's
    biases, is added to y first, and ``gb`` (B,), if given, receives dL/db = the column sums of dL/dy."""
    K, B = y.shape
    own, cols = _in_block(targets, lo, B)
    if reduce is not None:
        yt = y[own, cols] if b is None else y[own, cols] + b[cols]  # (len(own),) target scores
        mx, s, f = _block_softmax(y, reduce, b)  # y <- exp(y + b - q), q: each row's max over the block
        if grad:
            _block_grad(y, f / s, own, cols, K, gb)  # backward through softmax + mean NLL
        return own, yt, mx, s
    yt = y[own, cols]  # (len(own),) target scores, before y is overwritten
    mx, s = softmax_inplace(y)  # y <- exp(y - max), s = sum over all |V| units
    if grad:
        nll_grad_inplace(y, s, own, cols, K)  # backward through softmax + mean NLL
    return own, yt, mx, s


def head_block(y: np.ndarray, targets: np.ndarray, lo: int, reduce, W: np.ndarray, b: np.ndarray,
               gA: np.ndarray, gb: np.ndarray):
    """The head on a block of units lo .. lo+B-1 of one thread of :func:`~nplm_edu.numerics.threads.run_blocks`,
    and its share of the backward pass, with the exchange of the softmax's (max, sum) hidden behind
    a product: y (K, B) holds the block's scores without b; W (B, width) and b (B,) are the block's
    rows of the output weights and biases (read, not changed).

    y <- e = exp(y + b - q) (q each row's max over the block); the rows' (q, s) are handed to the
    other blocks and, while they arrive, gA <- e W; then, with each row's max Q and sum S over all
    |V| units, f = exp(q - Q) and scale = f / (S K), gA <- dL/dy W = diag(scale) e W - onehot(w_t) W / K,
    the block's share of dL/dA, and gb <- dL/db = scale^T e - onehot(w_t) / K. dL/dy itself is
    never formed: the block's weight gradient is e^T diag(scale) A - onehot(w_t)^T A / K (A the
    layer's input). Returns (own, cols, yt, Q, S, scale): the rows whose target lies in the block,
    the targets' columns in it and their scores, and every row's Q, S and scale (K,)."""
    K = y.shape[0]
    own, cols = _in_block(targets, lo, y.shape[1])
    yt = y[own, cols] + b[cols]  # (len(own),) target scores, before y is overwritten
    q, s = block_exp(y, b)
    every = reduce.post(np.stack([q, s]))  # (M, 2, K), every block's (q, s) once all have arrived
    np.matmul(y, W, out=gA)  # e W, while the other blocks' (q, s) arrive
    reduce.wait()
    mx, S, f = combine(every, q)
    scale = ((f / S).astype(np.float64) / K).astype(y.dtype)  # (K,) dL/dy = diag(scale) e - onehot / K
    gA *= scale[:, None]  # backward through y = W A + b: dL/dA = dL/dy W
    gA[own] -= W[cols] * y.dtype.type(1.0 / K)  # one target per row: no row repeats
    np.matmul(scale, y, out=gb)  # the column sums of dL/dy: dL/db
    np.subtract.at(gb, cols, y.dtype.type(1.0 / K))
    return own, cols, yt, mx, S, scale


def _in_block(targets: np.ndarray, lo: int, B: int):
    """(the examples whose target w_t lies in units lo .. lo+B-1, the target's column in the block)."""
    own = np.flatnonzero((targets >= lo) & (targets < lo + B))
    return own, targets[own] - lo


def _block_softmax(y: np.ndarray, reduce, b=None):
    """A block's first pass, in place: y <- exp(y + b - q), q each row's max over the block; then the
    rows' max Q and sum S over all |V| units (``reduce``). Returns (Q, S, f = exp(q - Q)) (K,)."""
    q, s = block_exp(y, b)
    gather = getattr(reduce, "gather", None)
    if gather is None:  # two reductions (MPI's Allreduce): Q, then S
        mx = q.copy()
        reduce(mx, "MAX")  # Q: the max over all |V| units
        f = np.exp(q - mx)  # exp(y - Q) = exp(y - q) f, row by row (0 for an empty block)
        s *= f
        reduce(s, "SUM")  # S: the sum of exp(y - Q) over all |V| units
        return mx, s, f
    return combine(gather(np.stack([q, s])), q)  # one exchange of every block's (q, s) instead


def block_exp(y: np.ndarray, b=None) -> tuple[np.ndarray, np.ndarray]:
    """In place: y <- exp(y + b - q), q each row's max over this block's units; returns (q, s) (K,),
    s each row's sum of exp(y + b - q) (q = -inf, s = 0 for an empty block)."""
    K = y.shape[0]
    q, s = np.full(K, -np.inf, y.dtype), np.zeros(K, y.dtype)
    if y.shape[1]:
        for r in range(0, K, 16):  # 16 rows at a time, in cache for the 4 passes
            yb = y[r:r + 16]  # (rows, B)
            if b is not None:
                yb += b  # y = b + [U W] [a x] of the block
            yb.max(axis=1, out=q[r:r + 16])
            yb -= q[r:r + 16, None]
            np.exp(yb, out=yb)
            yb.sum(axis=1, out=s[r:r + 16])
    return q, s


def combine(every: np.ndarray, q: np.ndarray):
    """From every block's row maxima q_j and sums s_j (M, 2, K), in block order: (Q, S, f) (K,) with
    Q = max_j q_j, S = sum_j s_j exp(q_j - Q) (the sum of exp(y - Q) over all |V| units) and
    f = exp(q - Q) for this block's own q."""
    mx = every[:, 0].max(axis=0)  # Q: the max over all |V| units
    f = np.exp(every[:, 0] - mx)  # (M, K) exp(q_j - Q)
    S = every[0, 1] * f[0]
    for j in range(1, len(every)):
        S += every[j, 1] * f[j]  # S: the blocks' sums rescaled to Q, added in their order
    return mx, S, np.exp(q - mx)


def _block_grad(e: np.ndarray, scale: np.ndarray, rows, cols, K: int, gb=None) -> None:
    """A block's second pass, in place: e = exp(y - q) <- dL/dy = (e f / S - onehot(w_t)) / K, with
    scale = f / S (K,); ``gb`` <- its column sums (dL/db of the block)."""
    scale = (scale.astype(np.float64) / K).astype(e.dtype)[:, None]  # (K, 1)
    if gb is not None:
        gb.fill(0)
    for r in range(0, e.shape[0], 16):  # 16 rows at a time, in cache for both passes
        eb = e[r:r + 16]
        eb *= scale[r:r + 16]  # p / K
        if gb is not None:
            gb += eb.sum(axis=0)
    one = e.dtype.type(1.0 / K)
    e[rows, cols] -= one  # - onehot(w_t) / K, for the targets in this block
    if gb is not None:
        np.subtract.at(gb, cols, one)


def nll(yt: np.ndarray, mx: np.ndarray, s: np.ndarray) -> np.ndarray:
    """-log p(w_t) = max + log s - y_{w_t} of each example (K,) float64 (the whole layer)."""
    return mx.astype(np.float64) + np.log(s.astype(np.float64)) - yt.astype(np.float64)


def softmax_inplace(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """In place: y <- exp(y - max y) row by row; returns (row max, row sum of exp(y - max)) in y's dtype."""
    K = y.shape[0]
    mx, s = np.empty(K, y.dtype), np.empty(K, y.dtype)

    def block(lo, hi):
        for r in range(lo, hi, 16):  # 16 rows (1.1 MB on Brown) stay in cache for the 4 passes
            r2 = min(r + 16, hi)
            yb = y[r:r2]  # (rows, |V|)
            m = yb.max(axis=1, keepdims=True)
            yb -= m  # subtract the max before exponentiating (section 2)
            np.exp(yb, out=yb)  # unnormalised probabilities in [0, 1]
            s[r:r2] = yb.sum(axis=1)  # pairwise summation: accurate in float32 too
            mx[r:r2] = m[:, 0]

    rowwise(block, K, y.size)
    return mx, s


def nll_grad_inplace(e: np.ndarray, s: np.ndarray, rows: np.ndarray, cols: np.ndarray, K: int) -> None:
    """In place: e = exp(y - max) <- dL/dy = (p - onehot(w_t)) / K, the gradient of the mean NLL,
    with p = e / s; the targets are at (rows, cols) (for a block of units: only those it holds)."""
    scale = (1.0 / (s.astype(np.float64) * K)).astype(e.dtype)[:, None]  # (K, 1)

    def block(lo, hi):
        e[lo:hi] *= scale[lo:hi]  # p / K, in place  (K, |V|)

    rowwise(block, e.shape[0], e.size)
    e[rows, cols] -= e.dtype.type(1.0 / K)


def target_scores(results: list, K: int, dtype):
    """(yt (K,), row max, row sum) from the blocks' (own rows, their target scores, max, sum): each
    target's score comes from the block that holds it; max and sum are the same in every block."""
    yt = np.empty(K, dtype)
    for own, yt_i, mx, s in results:
        yt[own] = yt_i
    return yt, mx, s
