"""The energy-minimization network of section 5 of the paper: the next word gets a feature vector too.

The paper's network reads the n-1 context words and scores every candidate word through its own
output weights U_i. Section 5 proposes instead to feed the candidate's features C(w_t) into the
hidden layer beside the context's, and to read one number, an energy, off the hidden units:

    x = (C(w_t), C(w_{t-1}), ..., C(w_{t-n+1}))                      (n m,)
    E(w_{t-n+1}, ..., w_t) = v . tanh(d + H x) + sum_{i=0}^{n-1} b_{w_{t-i}}
    P(w_t = i | context) = exp(-E(..., i)) / sum_j exp(-E(..., j))

The context words' biases b_{w_{t-1}}, ..., b_{w_{t-n+1}} are the same for every candidate i, so they
cancel in the normalization: only b_i counts (and the context part of the sum gets no gradient).
With H = [H_0 H_1] split into the columns that read C(w_t) and those that read the context,

    o_i = (d + H_1 x_context) + H_0 C(i)     (h,)   the context part once per example, H_0 C(i) once per batch
    E_i = v . tanh(o_i) + b_i

Cost per example. The paper's output layer costs |V| (h + 1) multiply-adds per example, done as one
matrix product for the whole batch. Here every candidate word has its own hidden layer: |V| h
additions, |V| h tanh evaluations and |V| h multiply-adds for v . tanh(o_i) per example, and as
many again backward, elementwise over a (K, |V|, h) array rather than as a matrix product, so it is
several times slower than the paper's network with the same n, m and h (measured in the book). What
it buys is that an output word is described by the same features C as an input word (the paper's
motivation: "the output word's feature vector", useful for new words).

Backward, with p_i = P(w_t = i | context) and L the mean negative log-likelihood over K examples:

    dL/dE_i = (1[i = w_t] - p_i) / K        dL/do_i = dL/dE_i v * (1 - tanh(o_i)^2)
    dL/dv = sum dL/dE_i tanh(o_i),  dL/db_i = sum_k dL/dE_i,  dL/d(H_0 C(i)) = sum_k dL/do_i,
    dL/d(context part) = sum_i dL/do_i, then back through H_1, d and the context's rows of C.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UserError, check_seed
from .lm import LanguageModel
from .nplm import NPLM
from .output import log_softmax


@dataclass
class EnergyConfig:
    """|V| words, order n (n-1 context words), m features per word, h hidden units."""

    V: int
    n: int = 5
    m: int = 30
    h: int = 100
    dtype: str = "float32"
    seed: int = 0

    def validate(self) -> None:
        if self.V < 2 or self.n < 2 or self.m < 1 or self.h < 1:
            raise UserError(f"the energy network needs |V| >= 2, n >= 2, m >= 1, h >= 1; got V={self.V}, "
                            f"n={self.n}, m={self.m}, h={self.h}")
        if self.dtype not in ("float32", "float64"):
            raise UserError(f"dtype must be float32 or float64, got {self.dtype!r}")
        check_seed(self.seed)


class EnergyNPLM(LanguageModel):
    """The energy-minimization network (module docstring). ``params``: C (|V|, m), H (h, n m) whose
    first m columns read C(w_t), d (h,), v (h,), b (|V|,). ``chunk``: examples per (chunk, |V|, h) array.
    The trainer moves it by the one SGD rule (:func:`nplm_edu.training.optim.sgd_step`), weight decay
    on ``decayed``."""

    kind = "energy"
    tied = False
    decayed = ("C", "H", "v")  # weight decay applies to these, never to the biases b, d

    def __init__(self, config: EnergyConfig, chunk: int = 8):
        config.validate()
        self.config, self.order, self.V, self.chunk = config, config.n, config.V, max(1, int(chunk))
        V, n, m, h, dt = config.V, config.n, config.m, config.h, np.dtype(config.dtype)
        rng = np.random.default_rng(config.seed)
        r = 1 / np.sqrt(n * m)
        self.params = {"C": rng.uniform(-0.1, 0.1, size=(V, m)).astype(dt),  # (|V|, m)
                       "H": rng.uniform(-r, r, size=(h, n * m)).astype(dt),  # (h, n m)
                       "d": np.zeros(h, dt),
                       "v": rng.uniform(-1 / np.sqrt(h), 1 / np.sqrt(h), size=h).astype(dt),  # (h,)
                       "b": np.zeros(V, dt)}

    def num_params(self) -> int:
        return int(sum(p.size for p in self.params.values()))

    def batch_bytes(self, K: int) -> int:
        """A lower bound on the memory one update holds beside the parameters: the (chunk, |V|, h)
        hidden units of every candidate word, a chunk of examples at a time."""
        cfg = self.config
        return min(K, self.chunk) * cfg.V * cfg.h * np.dtype(cfg.dtype).itemsize

    check_ids = NPLM.check_ids  # contexts (K, n-1) and targets (K,) of word ids, else one UserError

    # ----------------------------------------------------------------- forward
    def _context_part(self, contexts):
        """ids (K, n-1) in the paper's order, x_context (K, (n-1)m), d + H_1 x_context (K, h), H_0 C (|V|, h)."""
        P, m = self.params, self.config.m
        ids = contexts[:, ::-1]  # w_{t-1}, ..., w_{t-n+1}
        xc = P["C"][ids].reshape(len(contexts), -1)  # (K, (n-1)m)
        oc = P["d"] + xc @ P["H"][:, m:].T  # (K, h) d + H_1 x_context
        ow = P["C"] @ P["H"][:, :m].T  # (|V|, h) H_0 C(i) for every candidate i
        return ids, xc, oc, ow

    def _chunk(self, oc, ow):
        """For a chunk of examples: A = tanh(o_i) (k, |V|, h) and -E_i (k, |V|) (context biases left out)."""
        A = np.tanh(oc[:, None, :] + ow[None, :, :])  # (k, |V|, h)
        return A, -(A @ self.params["v"] + self.params["b"])  # (k, |V|) scores -E

    def log_probs(self, contexts) -> np.ndarray:
        """log P(w_t = i | context) for every i: (K, |V|) float64."""
        contexts, _ = self.check_ids(contexts)
        _, _, oc, ow = self._context_part(contexts)
        out = np.empty((len(contexts), self.V))
        for s in range(0, len(contexts), self.chunk):
            out[s:s + self.chunk] = log_softmax(self._chunk(oc[s:s + self.chunk], ow)[1].astype(np.float64))
        return out

    def probs(self, contexts):
        return np.exp(self.log_probs(contexts))

    def log_prob(self, contexts, targets):
        contexts, targets = self.check_ids(contexts, targets)
        return self.log_probs(contexts)[np.arange(len(targets)), targets]

    def perplexity(self, contexts, targets, batch: int = 256) -> float:
        return super().perplexity(contexts, targets, batch)

    # ----------------------------------------------------------------- backward
    def loss_and_grads(self, contexts, targets, mask_x=None, mask_a=None):
        """Mean negative log-likelihood of a batch and its gradient for C, H, d, v, b (no dropout)."""
        if mask_x is not None or mask_a is not None:
            raise UserError("the energy network is trained without dropout")
        contexts, targets = self.check_ids(contexts, targets)
        P, m, K = self.params, self.config.m, len(targets)
        ids, xc, oc, ow = self._context_part(contexts)
        g = {"v": np.zeros_like(P["v"]), "b": np.zeros_like(P["b"])}
        g_oc = np.empty_like(oc)  # (K, h)
        g_ow = np.zeros_like(ow)  # (|V|, h)
        loss = 0.0
        for s in range(0, K, self.chunk):
            t = targets[s:s + self.chunk]
            rows = np.arange(len(t))
            A, q = self._chunk(oc[s:s + self.chunk], ow)  # (k, |V|, h), (k, |V|)
            q64 = q.astype(np.float64)
            mx = q64.max(axis=1, keepdims=True)
            e = np.exp(q64 - mx)
            z = e.sum(axis=1, keepdims=True)
            loss += float(np.sum(np.log(z[:, 0]) + mx[:, 0] - q64[rows, t]))
            gE = (-e / z).astype(A.dtype)  # (k, |V|) dL/dE = (1[i = w_t] - p_i) / K
            gE[rows, t] += 1
            gE /= K
            g["v"] += np.einsum("ki,kih->h", gE, A)  # dL/dv = sum dL/dE_i tanh(o_i)
            g["b"] += gE.sum(axis=0)  # dL/db_i
            A *= A
            np.subtract(1, A, out=A)  # 1 - tanh(o)^2
            A *= gE[:, :, None]
            A *= P["v"]  # (k, |V|, h) dL/do_i
            g_oc[s:s + self.chunk] = A.sum(axis=1)  # through d + H_1 x_context
            g_ow += A.sum(axis=0)  # through H_0 C(i)
        g["d"] = g_oc.sum(axis=0)
        g["H"] = np.concatenate([g_ow.T @ P["C"], g_oc.T @ xc], axis=1)  # (h, n m) [dL/dH_0, dL/dH_1]
        gC = g_ow @ P["H"][:, :m]  # (|V|, m) every word, as a candidate
        np.add.at(gC, ids.ravel(), (g_oc @ P["H"][:, m:]).reshape(-1, m))  # the context words' rows
        g["C"] = gC
        return loss / K, {k: g[k] for k in P}
