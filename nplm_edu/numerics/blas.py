"""Fast kernels: BLAS ``gemm`` with accumulation, BLAS's thread count, segment sums.

The tools the fused network (:mod:`nplm_edu.numerics.fused`) and the output-block trainer share:

- :func:`gemm_update`: C <- beta C + alpha A^T B in one BLAS call (numpy's own OpenBLAS through
  ctypes; a pure-numpy fallback gives the same numbers), so the update of the (|V|, h + (n-1)m)
  matrix [U W] reads and writes it once and its gradient is never stored;
- :func:`set_blas_threads`: how many threads numpy's OpenBLAS uses (the blocks of
  :mod:`nplm_edu.numerics.threads` each run it on one);
- :func:`segment_sum`: the gradient of the look-up table C, adding repeated words exactly at the
  speed of one sort (``np.add.at`` is the readable, slow equivalent); :func:`segments` is its sort,
  for callers that add up blocks of columns separately (on several threads);
- :func:`subtract_at`: ``np.subtract.at`` on rows, the same numbers, one subtraction per repeat.
"""

from __future__ import annotations

import os

import numpy as np


def segments(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runs of equal ids (N,) (at least one): (unique ids (U,), the order that sorts the ids
    (stable), where each run starts in that order (U,)). The sums of rows (N, m) that share an id are
    then ``np.add.reduceat(rows[order], starts, axis=0)`` (:func:`segment_sum`)."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    return sorted_ids[starts], order, starts


def segment_sum(ids: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum the rows (N, m) that share an id: returns (unique ids (U,), sums (U, m)).

    Sort the ids, find where each run of equal ids starts, and add each run with
    ``np.add.reduceat``: repeated words all count, at the speed of one sort."""
    if len(ids) == 0:
        return ids[:0], rows[:0]
    words, order, starts = segments(ids)
    return words, np.add.reduceat(rows[order], starts, axis=0)


def subtract_at(out: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> None:
    """In place: out[idx[j]] -= rows[j] for j = 0 .. N-1 in order, the numbers of
    ``np.subtract.at(out, idx, rows)`` (rows (N, m), out (K, m)). ``ufunc.at`` takes one row at a
    time (5 ms for a thousand rows of 512); here round k subtracts the k-th occurrence of every
    index at once (no index twice in a round: plain fancy indexing), one round per repeat of the
    most frequent index.

    >>> out = np.zeros((3, 1)); subtract_at(out, np.array([2, 0, 2]), np.array([[1.0], [2.0], [4.0]]))
    >>> out.ravel().tolist()
    [-2.0, 0.0, -5.0]
    """
    if len(idx) == 0:
        return
    _, order, starts = segments(idx)
    run = np.zeros(len(idx), np.intp)
    run[starts[1:]] = np.diff(starts)
    k = np.empty(len(idx), np.intp)
    k[order] = np.arange(len(idx)) - np.cumsum(run)  # j's occurrence number among the rows of idx[j]
    by_k = np.argsort(k, kind="stable")
    bounds = np.searchsorted(k[by_k], np.arange(k.max() + 2))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        j = by_k[lo:hi]  # the k-th occurrence of every index that has one, in order
        out[idx[j]] -= rows[j]


# --------------------------------------------------------------------------- fused GEMM update
def _openblas_libraries():
    """(path, ctypes library) of each OpenBLAS shipped inside numpy's wheel (numpy.libs), in name order."""
    import ctypes
    import glob

    libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libdir, "*openblas*"))):
        try:
            yield path, ctypes.CDLL(path)
        except OSError:
            continue


def _find_gemm():
    """numpy's own BLAS (OpenBLAS in the PyPI wheels) through ctypes, for C <- beta C + alpha A^T B.

    numpy's ``matmul`` cannot accumulate into its output; BLAS ``gemm`` can, which lets the update
    of [U W] read and write that (|V|, h + (n-1)m) array once instead of three times. Returns
    {dtype: function} or {} when the library is not found (then numpy is used: same result)."""
    import ctypes

    for path, lib in _openblas_libraries():
        found = {}
        for prefix, suffix, intt in (("scipy_cblas_", "64_", ctypes.c_int64), ("scipy_cblas_", "", ctypes.c_int),
                                     ("cblas_", "", ctypes.c_int64 if "64" in os.path.basename(path) else ctypes.c_int)):
            for dt, letter, ft in ((np.float32, "s", ctypes.c_float), (np.float64, "d", ctypes.c_double)):
                f = getattr(lib, f"{prefix}{letter}gemm{suffix}", None)
                if f is None:
                    continue
                f.restype = None
                f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, intt, intt, intt, ft, ctypes.c_void_p,
                              intt, ctypes.c_void_p, intt, ft, ctypes.c_void_p, intt]
                found[np.dtype(dt)] = f
            if found:
                return found
    return {}


_GEMM = _find_gemm()


def _gemm_blas(Cm, A, B, alpha, beta) -> bool:
    f = _GEMM.get(Cm.dtype)
    if f is None or not Cm.flags.c_contiguous or A.dtype != Cm.dtype or B.dtype != Cm.dtype:
        return False
    if A.strides[1] != A.itemsize or B.strides[1] != B.itemsize:
        return False
    M, N = Cm.shape  # C (M, N) <- beta C + alpha A^T B, A (K, M), B (K, N), all row-major
    K = A.shape[0]
    lda, ldb = A.strides[0] // A.itemsize, B.strides[0] // B.itemsize
    # CblasRowMajor = 101, CblasTrans = 112, CblasNoTrans = 111
    f(101, 112, 111, M, N, K, alpha, A.ctypes.data, max(lda, 1), B.ctypes.data, max(ldb, 1),
      beta, Cm.ctypes.data, max(N, 1))
    return True


def gemm_update(Cm: np.ndarray, A: np.ndarray, B: np.ndarray, alpha: float, beta: float) -> None:
    """In place: Cm <- beta Cm + alpha A^T B   (Cm (M, N), A (K, M), B (K, N))."""
    if Cm.size == 0:
        return
    if not _gemm_blas(Cm, A, B, alpha, beta):
        G = A.T @ B  # (M, N) the gradient, stored once
        if beta != 1.0:
            Cm *= beta
        G *= alpha
        Cm += G


def _self_test() -> None:
    """Disable the BLAS path if it disagrees with numpy on a small case (wrong ABI, etc.)."""
    rng = np.random.default_rng(0)
    for dt in list(_GEMM):
        Cm = rng.standard_normal((7, 5)).astype(dt)
        A = rng.standard_normal((3, 9)).astype(dt)[:, :7]  # strided rows, like the real call
        B = rng.standard_normal((3, 6)).astype(dt)[:, :5]
        want = 0.5 * Cm - 2.0 * (A.T @ B)
        try:
            ok = _gemm_blas(Cm, A, B, -2.0, 0.5) and np.allclose(Cm, want, rtol=1e-4, atol=1e-4)
        except Exception:  # pragma: no cover - exotic BLAS builds
            ok = False
        if not ok:
            del _GEMM[dt]


_self_test()


# --------------------------------------------------------------------------- BLAS's threads
def _openblas_function(names: tuple, argtypes: list):
    """The first of ``names`` found in numpy's OpenBLAS, as a ctypes function returning int (or None)."""
    import ctypes

    for _, lib in _openblas_libraries():
        for name in names:
            f = getattr(lib, name, None)
            if f is not None:
                f.restype, f.argtypes = ctypes.c_int, argtypes
                return f
    return None


def _blas_thread_functions():
    import ctypes

    get = _openblas_function(("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                              "openblas_get_num_threads"), [])
    put = _openblas_function(("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
                              "openblas_set_num_threads"), [ctypes.c_int])
    return (get, put) if get is not None and put is not None else (None, None)


_GET_THREADS, _SET_THREADS = _blas_thread_functions()


def set_blas_threads(n: int) -> int | None:
    """Make numpy's OpenBLAS use n threads (as ``threadpoolctl`` does, through its
    ``openblas_set_num_threads``); returns the count before (None, and nothing changes, when the
    library is not found)."""
    if _SET_THREADS is None:
        return None
    before = int(_GET_THREADS())
    if n is not None and n != before:
        _SET_THREADS(int(n))
    return before


def blas_info() -> dict:
    """The BLAS numpy uses and its thread count now: {"name": ..., "threads": int or None}."""
    name = "unknown"
    try:
        deps = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        name = f"{deps.get('name', '?')} {deps.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 -- older numpy: no dict mode
        pass
    threads = int(_GET_THREADS()) if _GET_THREADS is not None else None
    return {"name": name, "threads": threads}
