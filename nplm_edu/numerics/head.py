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
-1 of the one-hot term. The whole layer is the block lo = 0, B = |V|, with no ``reduce``.
"""

from __future__ import annotations

import numpy as np

from .threads import rowwise


def softmax_nll(y: np.ndarray, targets: np.ndarray, lo: int = 0, reduce=None, grad: bool = True):
    """The head on the scores y (K, B) of output units lo .. lo+B-1, in place: y <- exp(y - max),
    then, with ``grad``, y <- dL/dy = (p - onehot(w_t)) / K (see the module docstring).

    Returns (own, yt, mx, s): the rows whose target lies in this block, their target scores (y's
    dtype, read before y is overwritten), and each row's max and sum of exp(y - max) over all
    units (the blocks combined by ``reduce``). For the whole layer, :func:`nll` of (yt, mx, s)
    is each example's negative log-likelihood."""
    K, B = y.shape
    own = np.flatnonzero((targets >= lo) & (targets < lo + B))  # examples whose w_t is in this block
    cols = targets[own] - lo
    yt = y[own, cols]  # (len(own),) target scores, before y is overwritten
    mx, s = softmax_inplace(y, reduce)  # y <- exp(y - max), s = sum over all |V| units
    if grad:
        nll_grad_inplace(y, s, own, cols, K)  # backward through softmax + mean NLL
    return own, yt, mx, s


def nll(yt: np.ndarray, mx: np.ndarray, s: np.ndarray) -> np.ndarray:
    """-log p(w_t) = max + log s - y_{w_t} of each example (K,) float64 (the whole layer)."""
    return mx.astype(np.float64) + np.log(s.astype(np.float64)) - yt.astype(np.float64)


def softmax_inplace(y: np.ndarray, reduce=None) -> tuple[np.ndarray, np.ndarray]:
    """In place: y <- exp(y - max y) row by row; returns (row max, row sum of exp(y - max)) in y's dtype.

    ``reduce(buf, op)``, for a block of the columns: combines the row maxima ("MAX") and the sums
    ("SUM") with the other blocks, so every block is normalised alike."""
    K = y.shape[0]
    mx, s = np.empty(K, y.dtype), np.empty(K, y.dtype)
    if reduce is None:
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
    if y.shape[1]:
        y.max(axis=1, out=mx)
    else:
        mx.fill(-np.inf)  # an empty block contributes nothing
    reduce(mx, "MAX")  # the max over all |V| units
    for r in range(0, K, 16):  # 16 rows at a time, in cache for the 3 passes
        yb = y[r:r + 16]  # (rows, B)
        yb -= mx[r:r + 16, None]
        np.exp(yb, out=yb)
        yb.sum(axis=1, out=s[r:r + 16])
    reduce(s, "SUM")  # the sum over all |V| units
    return mx, s


def nll_grad_inplace(e: np.ndarray, s: np.ndarray, rows: np.ndarray, cols: np.ndarray, K: int) -> None:
    """In place: e = exp(y - max) <- dL/dy = (p - onehot(w_t)) / K, the gradient of the mean NLL,
    with p = e / s; the targets are at (rows, cols) (for a block of units: only those it holds)."""
    scale = (1.0 / (s.astype(np.float64) * K)).astype(e.dtype)[:, None]  # (K, 1)

    def block(lo, hi):
        e[lo:hi] *= scale[lo:hi]  # p / K, in place  (K, |V|)

    rowwise(block, e.shape[0], e.size)
    e[rows, cols] -= e.dtype.type(1.0 / K)
