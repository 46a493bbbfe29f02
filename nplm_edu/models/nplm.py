"""The neural probabilistic language model of Bengio et al. (2003), section 2, written to be read.

Forward pass for a minibatch of K contexts (the paper's names and equations, section 2; rows are
examples, so the paper's ``H x`` is ``x @ H.T`` here):

    x = (C(w_{t-1}), C(w_{t-2}), ..., C(w_{t-n+1}))   # (K, (n-1)m)  shared look-up table C
    o = d + H x                                          # (K, h)
    a = tanh(o)                                          # (K, h)
    y = b + W x + U a                                    # (K, |V|)     W only with direct connections
    p = softmax(y)                                       # (K, |V|)

The last line is the output layer (:mod:`nplm_edu.models.output`): the paper's full softmax by
default, or any other layer with the same interface (section 5's cheaper output layers). The
backward pass mirrors the forward pass in reverse; chapter 5 derives every line. Two options used
after 2003 reuse the same two functions: inverted dropout masks on x and a (Srivastava et al. 2014),
and tied embeddings (U = C, as in Mnih & Hinton's log-bilinear model 2007, measured by Press & Wolf
2017 and Inan et al. 2017: needs h = m and no direct connections).

This is the reference implementation: plain numpy, one array per parameter. Training uses the
fused version in :mod:`nplm_edu.numerics.fused` ([U W] in one array, the softmax in place, the
update without storing the gradient of [U W]), which computes the same numbers as this one.

Initialisation (all from ``config.seed``, in this order): C ~ U(-0.1, 0.1); H ~ U(-1/sqrt(fan_in),
1/sqrt(fan_in)) with fan_in = (n-1)m; the output layer's weights likewise (U: fan_in h, W: (n-1)m);
b = d = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UserError, check_field_types, check_seed
from .lm import LanguageModel
from .output import FullSoftmax, OutputLayer

PARAM_NAMES = ("C", "H", "d", "U", "W", "b")  # the paper's theta = (b, d, W, U, H, C)
DTYPES = ("float32", "float64")  # the floating-point types a model computes in


def check_dtype(dtype: str) -> None:
    """One of ``DTYPES``, else one clear UserError."""
    if dtype not in DTYPES:
        raise UserError(f"dtype must be {' or '.join(DTYPES)}, got {dtype!r}", setting="dtype")


def check_common(config) -> None:
    """What every model's shape checks first: each field of its declared type (a checkpoint written now
    must read back: 1e4 is no count of updates), |V| >= 2, the dtype and the seed."""
    check_field_types(config)
    if config.V < 2:
        raise UserError(f"vocabulary size must be at least 2, got {config.V}", setting="V")
    check_dtype(config.dtype)
    check_seed(config.seed)


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
        check_common(self)
        if self.n < 2:
            raise UserError(f"n must be at least 2 (one context word), got {self.n}", setting="n")
        if self.m <= 0:
            raise UserError(f"m (features per word) must be positive, got {self.m}", setting="m")
        if self.h < 0:
            raise UserError(f"h (hidden units) must be >= 0, got {self.h}", setting="h")
        if self.h == 0 and not self.direct:
            raise UserError("h 0 needs direct connections (without them the model ignores the context)", setting="h")


class NPLM(LanguageModel):
    """y = b + W x + U tanh(d + H x), P(w_t = i | context) = softmax(y)_i (equation 1).

    ``params`` holds C, H, d and the output layer's parameters (U, W, b for the full softmax),
    keyed by the paper's names. ``output``: another output layer with the same interface."""

    kind = "nplm"

    def __init__(self, config: NPLMConfig, output: OutputLayer | None = None):
        config.validate()
        self.config = config
        self.order, self.V = config.n, config.V
        V, n, m, h, dt = config.V, config.n, config.m, config.h, np.dtype(config.dtype)
        nm1 = (n - 1) * m  # length of x
        rng = np.random.default_rng(config.seed)
        C = rng.uniform(-0.1, 0.1, size=(V, m)).astype(dt)  # (|V|, m)
        r = 1 / np.sqrt(nm1)
        H = rng.uniform(-r, r, size=(h, nm1)).astype(dt)  # (h, (n-1)m)
        self.output = output or FullSoftmax(V, {"U": h, "W": nm1} if config.direct else {"U": h})
        self.params: dict[str, np.ndarray] = {"C": C, "H": H, "d": np.zeros(h, dt)}
        self.params.update(self.output.init_params(rng, dt))
        self.tied = False
        # weight decay applies to these (C, H, U, W with the full softmax), never to the biases b, d
        self.decayed = ("C", "H") + tuple(self.output.decayed)

    # ----------------------------------------------------------------- helpers
    def num_params(self) -> int:
        """Free parameters: |V|(1 + (n-1)m + h) + h(1 + (n-1)m) + |V|m with direct connections (section 2)."""
        return int(sum(p.size for name, p in self.params.items() if not (self.tied and name == "U")))

    def batch_bytes(self, K: int, outputs: int | None = None) -> int:
        """A lower bound on the memory one update on K examples holds beside the parameters: the
        scores y (K, outputs) (default: all |V| of the full softmax, none counted for another output
        layer), and [a x] (K, h + (n-1)m) with its gradient and tanh'."""
        cfg = self.config
        if outputs is None:
            outputs = cfg.V if isinstance(self.output, FullSoftmax) else 0
        return K * (outputs + 3 * (cfg.h + (cfg.n - 1) * cfg.m)) * np.dtype(cfg.dtype).itemsize

    def tie(self) -> None:
        """Make U the same array as C: y = b + C a, the output vector of word i is its feature vector
        (Mnih & Hinton 2007; Press & Wolf 2017; the paper's section 5 discusses giving the output
        word features too)."""
        cfg = self.config
        if cfg.direct or cfg.h != cfg.m:
            raise UserError(f"tied embeddings need h = m and no direct connections, got h={cfg.h}, m={cfg.m}, "
                            f"direct={cfg.direct}")
        self.params["U"] = self.params["C"]
        self.tied = True

    def check_ids(self, contexts, targets=None):
        """Contexts (K, n-1) and targets (K,) as integer arrays of word ids in 0..|V|-1, else a UserError."""
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
    def forward(self, contexts: np.ndarray, mask_x=None, mask_a=None) -> dict:
        """Everything up to the output layer's inputs; caches what :meth:`loss_and_grads` needs.
        ``mask_x``, ``mask_a``: inverted-dropout masks (0 or 1/(1-p)) on x and a, None for none."""
        P, K = self.params, len(contexts)
        ids = contexts[:, ::-1]  # (K, n-1) the paper's order: w_{t-1}, w_{t-2}, ..., w_{t-n+1}
        x = P["C"][ids].reshape(K, -1)  # (K, (n-1)m) x = (C(w_{t-1}), ..., C(w_{t-n+1}))
        if mask_x is not None:
            x = x * mask_x  # dropout on x
        o = P["d"] + x @ P["H"].T  # (K, h) o = d + H x
        a = np.tanh(o)  # (K, h)
        a_out = a * mask_a if mask_a is not None else a  # dropout on a
        inputs = {"U": a_out, "W": x} if self.config.direct else {"U": a_out}  # y = b + U a + W x
        return {"ids": ids, "x": x, "a": a, "inputs": inputs, "mask_x": mask_x, "mask_a": mask_a}

    def loss_and_grads(self, contexts: np.ndarray, targets: np.ndarray, mask_x=None, mask_a=None):
        """Mean negative log-likelihood of a batch and its gradient for every parameter.

        Returns (loss, grads): grads keyed and shaped like ``params`` (gradient of the mean NLL, no
        weight decay; with tied embeddings "C" holds dL/dC + dL/dU and there is no "U")."""
        contexts, targets = self.check_ids(contexts, targets)
        P = self.params
        cache = self.forward(contexts, mask_x, mask_a)
        loss, out_cache = self.output.loss(P, cache["inputs"], targets)
        g_in, grads = self.output.backward(P, out_cache)
        # backward through dropout on a: dL/da = dL/da~ mask_a
        ga = g_in["U"] * mask_a if mask_a is not None else g_in["U"]  # (K, h)
        # backward through a = tanh(o): dL/do = (1 - a^2) dL/da
        go = ga * (1 - cache["a"] ** 2)  # (K, h)
        # backward through o = d + H x
        grads["d"] = go.sum(axis=0)  # (h,)
        grads["H"] = go.T @ cache["x"]  # (h, (n-1)m)
        gx = go @ P["H"]  # (K, (n-1)m) dL/dx through the hidden layer ...
        if "W" in g_in:
            gx = gx + g_in["W"]  # ... plus through the direct connections
        if mask_x is not None:
            gx = gx * mask_x  # backward through dropout on x
        # backward through the look-up: each slot's gradient added to its word's row of C
        gC = np.zeros_like(P["C"])  # (|V|, m)
        np.add.at(gC, cache["ids"].ravel(), gx.reshape(-1, self.config.m))
        grads["C"] = gC
        if self.tied:
            grads["C"] += grads.pop("U")  # one array: its gradient is the sum of both uses
        return loss, {k: grads[k] for k in P if k in grads}

    # ----------------------------------------------------------------- probabilities
    def log_probs(self, contexts: np.ndarray) -> np.ndarray:
        """log P(w_t = i | context) for every i: (K, |V|) float64."""
        contexts, _ = self.check_ids(contexts)
        return self.output.log_probs(self.params, self.forward(contexts)["inputs"])

    def probs(self, contexts: np.ndarray) -> np.ndarray:
        """P(w_t = i | context): (K, |V|) float64 rows summing to 1."""
        return np.exp(self.log_probs(contexts))

    def log_prob(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """log P(w_t | context) of each target: (K,) float64."""
        contexts, targets = self.check_ids(contexts, targets)
        return self.output.log_prob(self.params, self.forward(contexts)["inputs"], targets)

    def perplexity(self, contexts, targets, batch: int = 1024) -> float:
        """exp(-mean log P) in batches of 1024 windows (a (1024, |V|) float32 array is 73 MB on Brown)."""
        return super().perplexity(contexts, targets, batch)
