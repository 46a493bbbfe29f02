"""The neural probabilistic language model of Bengio et al. (2003), section 2, in numpy.

Forward pass for a minibatch of K contexts (the paper's names and equations, section 2):

    x = (C(w_{t-1}), C(w_{t-2}), ..., C(w_{t-n+1}))   # (K, (n-1)m)  shared look-up table C
    o = d + H x                                          # (K, h)
    a = tanh(o)                                          # (K, h)
    y = b + W x + U a                                    # (K, |V|)     W only with direct connections
    p = softmax(y)                                       # (K, |V|)     max subtracted first

The backward pass is derived by hand and mirrors the forward pass in reverse (chapter 5 derives
every line). Speed (the output layer is ~99% of the work at |V| = 17,907):

- With direct connections U and W live side by side in one array ``[U W]`` (|V|, h + (n-1)m), and
  ``params["U"]``, ``params["W"]`` are views of it, so ``y = [a x] @ [U W]^T + b`` is ONE matrix
  product, and so are the gradients of ``[a x]`` and of ``[U W]`` (``z = [a x]`` is built once).
- The softmax and its gradient are computed in place in one preallocated (K, |V|) buffer, in row
  blocks on as many threads as BLAS uses (numpy releases the GIL inside ufuncs).
- The gradient of C is a segment sum over the sorted word ids (``np.add.reduceat``), which adds
  up repeated words exactly, without ``np.add.at``'s slowness.
- :meth:`NPLM.sgd_update` updates the parameters directly, as the paper's algorithm does (section
  3.2): the (|V|, h + (n-1)m) gradient of [U W] is never stored; one BLAS ``gemm`` call (numpy's
  own OpenBLAS, reached through ctypes, with a pure-numpy fallback giving the same numbers) does
  [U W] <- (1 - lr wd) [U W] - lr dL/dy^T [a x]; only the rows of C of the words in the batch
  receive a gradient step (weight decay still shrinks all of C).

``params`` entries may be modified in place or replaced by new arrays (the next call re-fuses
U and W; the dict then holds views again).

Initialisation (all from ``config.seed``): C ~ U(-0.1, 0.1); H, U, W ~ U(-1/sqrt(fan_in), +..)
with fan_in = (n-1)m for H and W and h for U; b = d = 0.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import numpy as np

from nplm_edu.errors import UserError, check_seed
from nplm_edu.lm import LanguageModel

PARAM_NAMES = ("C", "H", "d", "U", "W", "b")  # the paper's theta = (b, d, W, U, H, C)
DECAYED = ("C", "H", "U", "W")  # weight decay applies to these, never to the biases b, d


@dataclass
class NPLMConfig:
    """Shape of the model (section 2): vocabulary size |V|, order n (n-1 context words),
    m features per word, h hidden units (0: no hidden layer), direct connections W x."""

    V: int
    n: int = 5
    m: int = 30
    h: int = 50
    direct: bool = True
    dtype: str = "float32"
    seed: int = 0

    def validate(self) -> None:
        if self.V < 2:
            raise UserError(f"vocabulary size must be at least 2, got {self.V}")
        if self.n < 2:
            raise UserError(f"n must be at least 2 (one context word), got {self.n}")
        if self.m <= 0:
            raise UserError(f"m (features per word) must be positive, got {self.m}")
        if self.h < 0:
            raise UserError(f"h (hidden units) must be >= 0, got {self.h}")
        if self.h == 0 and not self.direct:
            raise UserError("h = 0 needs direct connections (otherwise the model ignores the context)")
        if self.dtype not in ("float32", "float64"):
            raise UserError(f"dtype must be float32 or float64, got {self.dtype!r}")
        check_seed(self.seed)


def segment_sum(ids: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum the rows (N, m) that share an id: returns (unique ids (U,), sums (U, m)).

    Sort the ids, find where each run of equal ids starts, and add each run with
    ``np.add.reduceat``: repeated words all count, at the speed of one sort."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    starts = np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
    return sorted_ids[starts], np.add.reduceat(rows[order], starts, axis=0)


# --------------------------------------------------------------------------- fused GEMM update
def _find_gemm():
    """numpy's own BLAS (OpenBLAS in the PyPI wheels) through ctypes, for C <- beta C + alpha A^T B.

    numpy's ``matmul`` cannot accumulate into its output; BLAS ``gemm`` can, which lets the update
    of [U W] read and write that (|V|, h + (n-1)m) array once instead of three times. Returns
    {dtype: function} or {} when the library is not found (then numpy is used: same result)."""
    import ctypes
    import glob

    libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libdir, "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
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


# --------------------------------------------------------------------------- row-parallel loops
_POOL = {}


def _threads() -> int:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        v = os.environ.get(var, "")
        if v.isdigit() and int(v) > 0:
            return int(v)
    return os.cpu_count() or 1


def rowwise(fn, K: int, size: int) -> None:
    """Run ``fn(lo, hi)`` over blocks of rows 0..K: on as many threads as BLAS uses when the array is
    big (numpy releases the GIL inside ufuncs), else in one call. Each row is computed the same
    way either way, so results do not depend on the number of threads."""
    T = min(_threads(), K)
    if T <= 1 or size < (1 << 19):
        fn(0, K)
        return
    pool = _POOL.get(T)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        pool = _POOL[T] = ThreadPoolExecutor(T, thread_name_prefix="nplm-rows")
    bounds = [K * i // T for i in range(T + 1)]
    for f in [pool.submit(fn, bounds[i], bounds[i + 1]) for i in range(T)]:
        f.result()


class NPLM(LanguageModel):
    """y = b + W x + U tanh(d + H x), P(w_t = i | context) = softmax(y)_i (equation 1)."""

    def __init__(self, config: NPLMConfig):
        config.validate()
        self.config = config
        self.order, self.V = config.n, config.V
        V, n, m, h, dt = config.V, config.n, config.m, config.h, np.dtype(config.dtype)
        nm1 = (n - 1) * m  # length of x
        rng = np.random.default_rng(config.seed)

        def uniform(shape, r):
            return rng.uniform(-r, r, size=shape).astype(dt)

        C = uniform((V, m), 0.1)
        H = uniform((h, nm1), 1 / np.sqrt(nm1))
        U = uniform((V, h), 1 / np.sqrt(h)) if h else np.zeros((V, 0), dt)
        self.params: dict[str, np.ndarray] = {"C": C, "H": H, "d": np.zeros(h, dt)}
        if config.direct:
            W = uniform((V, nm1), 1 / np.sqrt(nm1))
            self._UW = np.concatenate([U, W], axis=1)  # (|V|, h + (n-1)m): [U W] in one array
            self.params["U"], self.params["W"] = self._UW[:, :h], self._UW[:, h:]
        else:
            self._UW = U
            self.params["U"] = U
        self.params["b"] = np.zeros(V, dt)
        self._buf: dict[str, np.ndarray] = {}

    # ----------------------------------------------------------------- helpers
    def num_params(self) -> int:
        """Free parameters: |V|(1 + nm + h) + h(1 + (n-1)m) with direct connections (section 2)."""
        return int(sum(p.size for p in self.params.values()))

    def _output_weights(self) -> np.ndarray:
        """[U W] (|V|, h + (n-1)m) as one array; re-fused if someone replaced params["U"/"W"]."""
        P = self.params
        if not self.config.direct:
            return P["U"]
        if P["U"].base is not self._UW or P["W"].base is not self._UW:
            U, W = P["U"], P["W"]
            self._UW = np.concatenate([U, W], axis=1).astype(self.config.dtype)
            P["U"], P["W"] = self._UW[:, :self.config.h], self._UW[:, self.config.h:]
        return self._UW

    def _buffer(self, name: str, shape: tuple) -> np.ndarray:
        """A preallocated work array, reused while the batch size stays the same."""
        b = self._buf.get(name)
        if b is None or b.shape != shape:
            b = self._buf[name] = np.empty(shape, self.config.dtype)
        return b

    def _check(self, contexts, targets=None):
        contexts = np.asarray(contexts)
        if contexts.ndim != 2 or contexts.shape[1] != self.order - 1:
            raise UserError(f"contexts must have shape (K, {self.order - 1}), got {contexts.shape}")
        if targets is not None:
            targets = np.asarray(targets)
            if targets.shape != (contexts.shape[0],):
                raise UserError(f"targets must have shape ({contexts.shape[0]},), got {targets.shape}")
        for name, ids in (("contexts", contexts), ("targets", targets)):
            if ids is None or ids.size == 0:
                continue
            if ids.dtype.kind not in "iu":
                raise UserError(f"{name} must be integer word ids, got dtype {ids.dtype}")
            lo, hi = ids.min(), ids.max()  # a negative id would silently wrap to the last rows of C
            if lo < 0 or hi >= self.V:
                raise UserError(f"{name} hold word ids outside 0..{self.V - 1} (min {lo}, max {hi})")
        return contexts, targets

    # ----------------------------------------------------------------- forward
    def _forward(self, contexts: np.ndarray) -> dict:
        """x, a, z = [a x] and the logits y (in a reusable buffer). Caches what backward needs."""
        P, cfg = self.params, self.config
        K, h = contexts.shape[0], cfg.h
        nm1 = (cfg.n - 1) * cfg.m
        UW = self._output_weights()
        D = UW.shape[1]  # h + (n-1)m with direct connections, h without
        ids = contexts[:, ::-1]  # (K, n-1) paper's order: w_{t-1}, w_{t-2}, ..., w_{t-n+1}
        z = self._buffer("z", (K, h + nm1))  # [a x]: (K, h + (n-1)m)
        x = z[:, h:]  # (K, (n-1)m)
        x[:] = P["C"][ids].reshape(K, nm1)  # x = (C(w_{t-1}), ..., C(w_{t-n+1}))
        a = z[:, :h]  # (K, h)
        np.matmul(x, P["H"].T, out=a)  # o = H x   (K, h)
        a += P["d"]  # o = d + H x
        np.tanh(a, out=a)  # a = tanh(o)
        y = self._buffer("y", (K, cfg.V))  # (K, |V|)
        np.matmul(z[:, :D], UW.T, out=y)  # y = U a + W x  (one product with [U W])
        y += P["b"]  # y = b + W x + U a
        return {"ids": ids, "z": z, "x": x, "a": a, "y": y, "UW": UW}

    def _log_softmax_rows(self, y: np.ndarray):
        """In place: y <- exp(y - max y) row by row; returns (log sum exp(y) (K,), sum exp(y - max) (K,))."""
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
        s = s.astype(np.float64)
        return mx.astype(np.float64) + np.log(s), s

    def log_probs(self, contexts: np.ndarray) -> np.ndarray:
        """log P(w_t = i | context) for every i: (K, |V|)."""
        contexts, _ = self._check(contexts)
        y = self._forward(contexts)["y"].astype(np.float64)  # (K, |V|)
        mx = y.max(axis=1, keepdims=True)
        y -= mx
        return y - np.log(np.exp(y).sum(axis=1, keepdims=True))

    def probs(self, contexts: np.ndarray) -> np.ndarray:
        """P(w_t = i | context): (K, |V|) float64 rows summing to 1."""
        return np.exp(self.log_probs(contexts))

    def log_prob(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """log P(w_t | context) of each target (K,), without building a float64 (K, |V|) array."""
        contexts, targets = self._check(contexts, targets)
        y = self._forward(contexts)["y"]  # (K, |V|)
        yt = y[np.arange(len(targets)), targets].astype(np.float64)  # (K,) target logits
        lse, _ = self._log_softmax_rows(y)
        return yt - lse

    # ----------------------------------------------------------------- backward
    def _backward(self, cache: dict, targets: np.ndarray):
        """Softmax + cross-entropy, then gradients of the MEAN NLL back to x.

        Returns (loss, gy (K, |V|) in the y buffer, gz = dL/d[a x] (K, h + (n-1)m), go (K, h))."""
        y, z, a, UW = cache["y"], cache["z"], cache["a"], cache["UW"]
        K, h = y.shape[0], self.config.h
        rows = np.arange(K)
        yt = y[rows, targets].astype(np.float64)  # (K,) target logits, before y is overwritten
        lse, s = self._log_softmax_rows(y)  # y <- exp(y - max)
        loss = float(np.mean(lse - yt))  # mean negative log-likelihood
        # backward through softmax + NLL: dL/dy = (p - onehot(w_t)) / K
        scale = (1.0 / (s * K)).astype(y.dtype)[:, None]  # (K, 1)

        def block(lo, hi):
            y[lo:hi] *= scale[lo:hi]  # p / K, in place  (K, |V|)

        rowwise(block, K, y.size)
        y[rows, targets] -= y.dtype.type(1.0 / K)
        gy = y
        # backward through y = [U W] [a x] + b: dL/d[a x] = dL/dy [U W]
        # (computed transposed, [U W]^T dL/dy^T: OpenBLAS splits that shape well across threads;
        #  dL/dy @ [U W] ran 3-10x slower whenever other processes shared the cores)
        gzT = self._buffer("gzT", (z.shape[1], K))  # (h + (n-1)m, K)
        D = UW.shape[1]
        np.matmul(UW.T, gy.T, out=gzT[:D])
        if D < z.shape[1]:  # no direct connections: y does not depend on x directly
            gzT[D:] = 0
        gz = gzT.T  # (K, h + (n-1)m)
        # backward through a = tanh(o): dL/do = (1 - a^2) dL/da
        go = gz[:, :h] * (1 - a * a)  # (K, h)
        # backward through o = d + H x: dL/dx += dL/do H
        gz[:, h:] += go @ self.params["H"]  # (K, (n-1)m)
        return loss, gy, gz, go

    def loss_and_grads(self, contexts: np.ndarray, targets: np.ndarray):
        """Mean negative log-likelihood of a batch and its gradient for every parameter.

        Returns (loss, grads) with grads keyed and shaped exactly like ``params``
        (gradient of the mean NLL, no weight decay)."""
        contexts, targets = self._check(contexts, targets)
        cfg, P = self.config, self.params
        cache = self._forward(contexts)
        loss, gy, gz, go = self._backward(cache, targets)
        z, x, h = cache["z"], cache["x"], cfg.h
        D = cache["UW"].shape[1]
        g = {}
        gUW = gy.T @ z[:, :D]  # dL/d[U W] = dL/dy^T [a x]   (|V|, h + (n-1)m)
        g["U"] = gUW[:, :h]
        if cfg.direct:
            g["W"] = gUW[:, h:]
        g["b"] = gy.sum(axis=0)  # dL/db  (|V|,)
        g["H"] = go.T @ x  # dL/dH = dL/do^T x   (h, (n-1)m)
        g["d"] = go.sum(axis=0)  # dL/dd   (h,)
        # backward through the look-up x = (C(w_{t-1}), ...): add each slot's gradient to its word's row
        words, sums = segment_sum(cache["ids"].ravel(), gz[:, h:].reshape(-1, cfg.m))
        gC = np.zeros_like(P["C"])
        gC[words] = sums  # (|V|, m), rows of words absent from the batch stay 0
        g["C"] = gC
        return loss, {k: g[k] for k in P}

    # ----------------------------------------------------------------- update
    def sgd_update(self, contexts: np.ndarray, targets: np.ndarray, lr: float, weight_decay: float) -> float:
        """One SGD step on a batch, updating the parameters as the gradients are found.

        Same rule as :func:`nplm_edu.train.sgd_step` on :meth:`loss_and_grads` (equal up to
        rounding): p <- p - lr (g + weight_decay p) for C, H, U, W and p <- p - lr g for b, d.
        The gradient of [U W] is never stored: one BLAS call computes
        [U W] <- (1 - lr wd) [U W] - lr dL/dy^T [a x]. Returns the batch's mean NLL (before the step)."""
        contexts, targets = self._check(contexts, targets)
        cfg, P = self.config, self.params
        cache = self._forward(contexts)
        loss, gy, gz, go = self._backward(cache, targets)
        z, x, h, UW = cache["z"], cache["x"], cfg.h, cache["UW"]
        D = UW.shape[1]
        keep = 1.0 - lr * weight_decay  # weight decay: p <- (1 - lr wd) p - lr g
        gb = gy.sum(axis=0)  # (|V|,)
        # [U W] <- keep [U W] - lr gy^T [a x]   (one fused GEMM when BLAS is reachable)
        gemm_update(UW, gy, z[:, :D], alpha=-lr, beta=keep)
        P["b"] -= lr * gb
        gH = go.T @ x  # (h, (n-1)m)
        P["H"] *= keep
        P["H"] -= lr * gH
        P["d"] -= lr * go.sum(axis=0)
        words, sums = segment_sum(cache["ids"].ravel(), gz[:, h:].reshape(-1, cfg.m))
        C = P["C"]
        if weight_decay:
            C *= keep  # weight decay on the whole table
        C[words] -= lr * sums  # only the rows of the words in the batch get a gradient step
        return loss

    def perplexity(self, contexts, targets, batch: int = 1024) -> float:
        """exp(-mean log P) in batches of 1024 windows (a (1024, |V|) float32 buffer is 73 MB on Brown)."""
        return super().perplexity(contexts, targets, batch)

    def config_dict(self) -> dict:
        return asdict(self.config)
