"""Recurrent language models (Elman 1990; Mikolov et al. 2010): a state h(i) that reads every
earlier word, and the Elman network, written to be read.

The paper's section 5 proposes recurrent networks to use more than n-1 words of context. Mikolov's
recurrent language model (Mikolov et al. 2010), an Elman network (Elman 1990), keeps one hidden
state and updates it word by word::

    h(i) = phi(e(w_i) + W h(i-1))

and predicts w_{i+1} from h(i) with the same output layer as the NPLM (:mod:`nplm_edu.models.output`,
``y = b + U h``). Here, as in the NPLM, a word first becomes its row of a look-up table C (m
features), and the recurrent layer maps it to the h units: e(w_t) = Wx C(w_t) + d. With m = h and
Wx = I this is the equation above exactly; a separate m lets the table be smaller, and dropout can
act between the two (below). Rows are streams, so for a batch of B streams (rows are the paper's
column vectors transposed)::

    x_t = C(w_t)                                         # (B, m)    the look-up table, as in the NPLM
    h_t = tanh(x_t @ Wx.T + h_{t-1} @ Wh.T + d)          # (B, h)    the seed's W is Wh here
    y_t = b + h_t @ U.T                                  # (B, |V|)  the output layer
    P(w_{t+1} = i | w_1 .. w_t) = softmax(y_t)_i

A batch is B streams of T words (X (B, T) inputs, Y (B, T) the next words). The loss is the mean
negative log-likelihood over its B T tokens. Training uses truncated backpropagation through time:
the state h_0 a batch starts from is the last state of the previous batch (carried over), but the
gradient stops there (it is a constant), so one batch costs T steps forward and T steps back.
``resets`` (B, T) zeroes the state before chosen steps (at a paragraph mark, say): h_{t-1} := 0.

Initialisation (from ``config.seed``, in this order): C ~ U(-0.1, 0.1) as the NPLM's; Wx ~
U(-1/sqrt(m), 1/sqrt(m)); Wh ~ U(-1/sqrt(h), 1/sqrt(h)) (spectral radius about 0.58, so the state
neither explodes nor dies at the start); d = 0; the output layer's U ~ U(-1/sqrt(h), 1/sqrt(h)),
b = 0. Regularisation, chosen by the trainer: weight decay on C, Wx, Wh, U (never the biases d, b),
and inverted dropout (Zaremba et al. 2014) on the non-recurrent connections only: ``mask_x`` on x_t
(between the look-up table and the recurrent layer) and ``mask_a`` on h_t where it enters the output
layer, never on h_{t-1} -> h_t. Gradient-norm clipping is the trainer's
(:mod:`nplm_edu.training.clip`).

This is the reference implementation: one loop over time each way, plain numpy. The fast path
(:mod:`nplm_edu.numerics.recurrent`) computes the same numbers (equal to this one in float64, up to rounding).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UserError, a_model
from .nplm import check_common
from .output import FullSoftmax, OutputLayer

CELLS = ("rnn", "lstm")  # the cells of the experiments
ALL_CELLS = CELLS + ("gru",)  # every cell a RecurrentConfig may name


@dataclass
class RecurrentConfig:
    """Shape of a recurrent language model: |V| words, m features per word (the look-up table C),
    h hidden units, the cell ("rnn": Elman 1990; "lstm": Hochreiter & Schmidhuber 1997; "gru": Cho et al. 2014)."""

    V: int
    cell: str = "lstm"
    m: int = 256
    h: int = 256
    dtype: str = "float32"
    seed: int = 0

    def validate(self) -> None:
        check_common(self)
        if self.cell not in ALL_CELLS:
            raise UserError(f"cell must be one of {', '.join(ALL_CELLS)}, got {self.cell!r}")
        for name in ("m", "h"):
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be at least 1, got {getattr(self, name)}", setting=name)


def check_batch(X, Y=None, V: int | None = None):
    """X (B, T) and Y (B, T) as integer id arrays, else one clear UserError (T < 1, B < 1, bad ids)."""
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        shape = "x".join(map(str, X.shape))
        raise UserError(f"a batch needs B >= 1 streams of T >= 1 words (an array (B, T)), got shape {shape}")
    if Y is not None:
        Y = np.asarray(Y)
        if Y.shape != X.shape:
            raise UserError(f"targets must have the inputs' shape {X.shape}, got {Y.shape}")
    for name, ids in (("inputs", X), ("targets", Y)):
        if ids is None:
            continue
        if ids.dtype.kind not in "iu":
            raise UserError(f"{name} must be integer word ids, got dtype {ids.dtype}")
        if V is not None and (ids.min() < 0 or ids.max() >= V):
            raise UserError(f"{name} hold word ids outside 0..{V - 1} (min {ids.min()}, max {ids.max()})")
    return X, Y


class RecurrentLM:
    """What the Elman network and the LSTM share: parameters, state, loss and gradients, scoring a stream.

    A subclass sets ``kind``, ``G`` (rows of Wx per hidden unit: 1 for the Elman cell, 4 for the
    LSTM's gates), ``n_state`` (arrays in the state) and implements :meth:`forward` and
    :meth:`backward`. ``sparse_grads``: a network that says True has ``loss_and_sparse_grads``, which
    returns dL/dC as the batch's rows only (the trainer then steps only those rows)."""

    kind = "recurrent"
    sparse_grads = False
    G = 1
    n_state = 1

    def __init__(self, config: RecurrentConfig, output: OutputLayer | None = None):
        config.validate()
        if config.cell != self.kind:
            raise UserError(f"{a_model(self.kind)} model cannot have cell={config.cell!r}")
        self.config, self.V = config, config.V
        V, m, h, dt = config.V, config.m, config.h, np.dtype(config.dtype)
        rng = np.random.default_rng(config.seed)
        G = self.G * h
        self.params: dict[str, np.ndarray] = {
            "C": rng.uniform(-0.1, 0.1, size=(V, m)).astype(dt),  # (|V|, m) the look-up table
            "Wx": rng.uniform(-1 / np.sqrt(m), 1 / np.sqrt(m), size=(G, m)).astype(dt),  # (G h, m)
            "Wh": rng.uniform(-1 / np.sqrt(h), 1 / np.sqrt(h), size=(G, h)).astype(dt),  # (G h, h)
            "d": self.initial_bias(dt),  # (G h,)
        }
        self.output = output or FullSoftmax(V, {"U": h})
        self.params.update(self.output.init_params(rng, dt))
        self.tied = False
        # weight decay applies to these (C, Wx, Wh, U with the full softmax), never to the biases d, b
        self.decayed = ("C", "Wx", "Wh") + tuple(self.output.decayed)

    def initial_bias(self, dt) -> np.ndarray:
        return np.zeros(self.G * self.config.h, dt)

    # ----------------------------------------------------------------- helpers
    def num_params(self) -> int:
        return int(sum(p.size for p in self.params.values()))

    def initial_state(self, B: int) -> tuple:
        """The state at the start of a stream: zeros, (B, h) per state array."""
        dt = np.dtype(self.config.dtype)
        return tuple(np.zeros((B, self.config.h), dt) for _ in range(self.n_state))

    def _start(self, X, state):
        B = X.shape[0]
        if state is None:
            return self.initial_state(B)
        if len(state) != self.n_state or any(s.shape != (B, self.config.h) for s in state):
            raise UserError(f"the carried state must be {self.n_state} array(s) of shape ({B}, {self.config.h})")
        return state

    def _read(self, X, state, resets):
        """What every forward checks first: the batch X (B, T), the state it starts from and the resets
        as booleans (or None)."""
        X, _ = check_batch(X, None, self.V)
        return X, self._start(X, state), None if resets is None else np.asarray(resets, bool)

    # ----------------------------------------------------------------- the subclass's part
    def forward(self, X, state=None, mask_x=None, mask_a=None, resets=None) -> dict:
        """Everything up to the output layer's inputs {"U": h_t for all t} (T B, h), time-major."""
        raise NotImplementedError

    def backward(self, cache: dict, ga: np.ndarray) -> dict:
        """From dL/dh_t (T, B, h) (what the output layer sends back) to the gradients of C, Wx, Wh, d."""
        raise NotImplementedError

    # ----------------------------------------------------------------- loss and gradients
    def loss_and_grads(self, X, Y, state=None, mask_x=None, mask_a=None, resets=None):
        """Mean NLL of a batch (B, T), its gradient for every parameter, and the state after it.

        Returns (loss, grads, state_T): grads keyed like ``params``; ``state_T`` is what the next
        batch starts from (truncated BPTT: no gradient flows into ``state``). Masks are time-major:
        ``mask_x`` (T, B, m), ``mask_a`` (T, B, h); ``resets`` (B, T) booleans."""
        X, Y = check_batch(X, Y, self.V)
        P = self.params
        cache = self.forward(X, state, mask_x, mask_a, resets)
        targets = Y.T.reshape(-1)  # (T B,) time-major, like the output layer's inputs
        loss, out_cache = self.output.loss(P, cache["inputs"], targets)
        g_in, grads = self.output.backward(P, out_cache)
        T, B = X.shape[1], X.shape[0]
        ga = g_in["U"].reshape(T, B, self.config.h)  # dL/dh_t from the output layer  (T, B, h)
        if mask_a is not None:
            ga = ga * mask_a  # backward through dropout on h_t
        grads.update(self.backward(cache, ga))
        return loss, {k: grads[k] for k in P}, cache["state"]

    # ----------------------------------------------------------------- scoring a stream
    def chunk_log_prob(self, X, Y, state, resets=None):
        """log P(Y | everything read so far) for a batch (B, T): ((B, T) float64, the state after it)."""
        cache = self.forward(X, state, resets=resets)
        lp = self.output.log_prob(self.params, cache["inputs"], Y.T.reshape(-1))  # (T B,)
        return lp.reshape(X.shape[1], X.shape[0]).T, cache["state"]

    def log_prob_stream(self, inputs, targets, resets=None, chunk: int = 256, state=None) -> np.ndarray:
        """log P(targets[t] | inputs[0..t]) for one stream read in order, the state carried through
        all of it (starting from zeros, or ``state``): (N,) float64. ``resets`` (N,): zero the state
        before reading inputs[t]."""
        inputs, targets = check_batch(np.asarray(inputs)[None], np.asarray(targets)[None], self.V)
        N = inputs.shape[1]
        out = np.empty(N)
        state = self._start(inputs, state)
        r = None if resets is None else np.asarray(resets, bool)[None]
        for i in range(0, N, chunk):
            lp, state = self.chunk_log_prob(inputs[:, i:i + chunk], targets[:, i:i + chunk], state,
                                            None if r is None else r[:, i:i + chunk])
            out[i:i + chunk] = lp[0]
        return out

    def perplexity(self, inputs, targets, resets=None) -> float:
        """exp(-mean log P) over every target of one stream, the state carried through it."""
        return float(np.exp(-np.mean(self.log_prob_stream(inputs, targets, resets))))


def _keep(resets, t):
    """(B, 1) factor: 0 where the state is reset before step t, else 1 (None: no resets)."""
    return None if resets is None else (~resets[:, t])[:, None]


class ElmanRNN(RecurrentLM):
    """Mikolov's recurrent language model: h_t = tanh(Wx C(w_t) + Wh h_{t-1} + d) (Mikolov et al. 2010),
    y_t = b + U h_t, softmax (see the module docstring)."""

    kind = "rnn"

    def forward(self, X, state=None, mask_x=None, mask_a=None, resets=None) -> dict:
        X, (h0,), resets = self._read(X, state, resets)
        P, (B, T), h = self.params, X.shape, self.config.h
        x = P["C"][X.T]  # (T, B, m) x_t = C(w_t)
        if mask_x is not None:
            x = x * mask_x  # dropout between the look-up table and the recurrent layer
        hs = np.empty((T + 1, B, h), h0.dtype)  # hs[t + 1] = h_t; hs[0] = the carried state
        hs[0] = h0
        prev = np.empty((T, B, h), h0.dtype)  # h_{t-1} as step t reads it (after a reset)
        for t in range(T):
            keep = _keep(resets, t)
            prev[t] = hs[t] if keep is None else hs[t] * keep  # a reset: h_{t-1} := 0
            hs[t + 1] = np.tanh(x[t] @ P["Wx"].T + prev[t] @ P["Wh"].T + P["d"])  # h_t = phi(e(w_t) + W h_{t-1})
        a = hs[1:] if mask_a is None else hs[1:] * mask_a  # dropout between h_t and the output layer
        return {"X": X, "x": x, "hs": hs, "prev": prev, "resets": resets, "mask_x": mask_x,
                "inputs": {"U": a.reshape(T * B, h)}, "state": (hs[T].copy(),)}

    def backward(self, cache, ga):
        P, hs, x, prev = self.params, cache["hs"], cache["x"], cache["prev"]
        T, B, h = ga.shape
        grads = {k: np.zeros_like(P[k]) for k in ("Wx", "Wh", "d")}
        gx = np.empty_like(x)  # (T, B, m)
        gh_next = np.zeros((B, h), ga.dtype)  # dL/dh_t through step t+1 (none after the last step)
        for t in reversed(range(T)):
            gh = ga[t] + gh_next  # dL/dh_t: from the output at t and from step t+1   (B, h)
            # backward through h_t = tanh(pre_t): dL/dpre_t = (1 - h_t^2) dL/dh_t
            gpre = gh * (1 - hs[t + 1] ** 2)  # (B, h)
            # backward through pre_t = x_t Wx^T + h_{t-1} Wh^T + d
            grads["d"] += gpre.sum(axis=0)
            grads["Wx"] += gpre.T @ x[t]  # (h, m)
            grads["Wh"] += gpre.T @ prev[t]  # (h, h)
            gx[t] = gpre @ P["Wx"]  # (B, m)
            gh_next = gpre @ P["Wh"]  # dL/dh_{t-1}  (B, h)
            keep = _keep(cache["resets"], t)
            if keep is not None:
                gh_next = gh_next * keep  # backward through a reset: h_{t-1} did not reach step t
        # truncated BPTT: dL/dh_0 (gh_next now) would go into the previous batch; it is dropped
        return {**grads, "C": embedding_grad(P["C"], cache["X"], gx, cache["mask_x"])}


def embedding_grad(C, X, gx, mask_x=None) -> np.ndarray:
    """Backward through dropout on x and the look-up x_t = C(w_t): each step's dL/dx_t added to
    its word's row of C (repeated words add up). gx (T, B, m), X (B, T)."""
    if mask_x is not None:
        gx = gx * mask_x  # backward through dropout on x
    gC = np.zeros_like(C)  # (|V|, m)
    np.add.at(gC, X.T.ravel(), gx.reshape(-1, C.shape[1]))
    return gC
