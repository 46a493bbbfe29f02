"""LightRNN's two-component word table (Li, Qin, Yang and Liu 2016), written to be read.

The |V| words are placed in a table of R = ceil(sqrt |V|) rows and C_t = ceil(|V| / R) columns
(each slot holds at most one word; ``slot[w] = R_w C_t + C_w``). A word is then two small indices,
its row R_w and its column C_w, and every vector of the network is shared along a row or a column:

* input (:class:`LightInput`): x(w) = (X^r(R_w), X^c(C_w)), a row vector and a column vector of
  m/2 features each: 2 sqrt|V| vectors instead of the |V| rows of C (LightRNN feeds the two vectors
  to its recurrent network as two successive steps; here they are set side by side, so that any
  network reads a word as one vector);
* output (:class:`LightOutput`): the next word's row first, then its column given the row::

    y^r = b^r + a @ Y^r.T                        (K, R)     a score per row
    P_r(i | a) = softmax(y^r)_i                             over the rows that hold a word
    g = tanh(a @ A.T + E(R_w))                   (K, h)     the state after reading the row
    y^c = b^c + g @ Y^c.T                        (K, C_t)   a score per column
    P_c(j | a, R_w) = softmax(y^c)_j                        over the occupied slots of row R_w
    log P(w | a) = log P_r(R_w | a) + log P_c(C_w | a, R_w)

In LightRNN the column is predicted by the recurrent state after it has read the row's input
vector, h^r_t = f(W x^r_t + U h_{t-1} + b); here that one step is part of the output layer (A plays
U, the row's vector E(R_w) plays W x^r + b), so the layer sits on any network's hidden layer a,
the NPLM's as well as a recurrent one's. Both factors are normalized over occupied places, so the
|V| probabilities sum to 1. A step costs R + C_t ~ 2 sqrt|V| scores instead of |V|.

The table itself is learned between epochs (:mod:`nplm_edu.models.lightrnn_table`): the words are
reassigned to the slots that lower the training loss. It is stored with the weights as the
parameter ``slot`` (|V|,) (integers kept in the model's float type; no gradient, no update), so a
checkpoint keeps the table its weights were trained with. Backward (mean NLL L over K examples)::

    dL/dy^r = (P_r - 1[R_w]) / K,     dL/dY^r = dL/dy^r.T a,   dL/da  = dL/dy^r Y^r
    dL/dy^c = (P_c - 1[C_w]) / K,     dL/dY^c = dL/dy^c.T g,   dL/dg  = dL/dy^c Y^c
    dL/dpre = dL/dg (1 - g^2),        dL/dA = dL/dpre.T a,     dL/dE(R_w) += dL/dpre,  dL/da += dL/dpre A
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .input import InputLayer
from .output import log_softmax
from .sparse_output import SparseOutputLayer, check_sizes, check_targets


def table_shape(V: int) -> tuple[int, int]:
    """(R, C_t): R = ceil(sqrt |V|) rows, C_t = ceil(|V| / R) columns, R C_t >= |V| slots."""
    R = int(np.ceil(np.sqrt(V)))
    return R, -(-V // R)


def rows_cols(P: dict, C_t: int) -> tuple[np.ndarray, np.ndarray]:
    """The row R_w and column C_w of every word (|V|,) each, from the table ``P["slot"]``."""
    slot = P["slot"].astype(np.int64)  # (|V|,)
    return slot // C_t, slot % C_t


class LightOutput(SparseOutputLayer):
    """LightRNN's output layer over |V| words and h hidden units (see the module docstring).

    Parameters: ``Y_r`` (R, h), ``b_r`` (R,), ``A`` (h, h), ``E`` (R, h), ``Y_c`` (C_t, h), ``b_c``
    (C_t,); the table ``slot`` (|V|,), first a random placement drawn from the seed.

    >>> layer = LightOutput(V=10, h=4)
    >>> layer.R, layer.C_t
    (4, 3)
    >>> P = layer.init_params(np.random.default_rng(0), np.float64)
    >>> a = np.random.default_rng(1).standard_normal((2, 4))
    >>> np.exp(layer.log_probs(P, {"U": a})).sum(axis=1).round(12).tolist()
    [1.0, 1.0]
    """

    name = "lightrnn"
    state = ("slot",)

    def __init__(self, V: int, h: int):
        check_sizes(V, h)
        self.V, self.h, self.widths = V, h, {"U": h}
        self.R, self.C_t = table_shape(V)
        self.decayed = ("Y_r", "A", "Y_c")

    def init_params(self, rng, dtype) -> dict:
        R, C_t, h = self.R, self.C_t, self.h
        r = 1 / np.sqrt(h)
        return {"Y_r": rng.uniform(-r, r, size=(R, h)).astype(dtype),  # (R, h)
                "b_r": np.zeros(R, dtype),
                "A": rng.uniform(-r, r, size=(h, h)).astype(dtype),  # (h, h)
                "E": rng.uniform(-r, r, size=(R, h)).astype(dtype),  # (R, h) each row's vector
                "Y_c": rng.uniform(-r, r, size=(C_t, h)).astype(dtype),  # (C_t, h)
                "b_c": np.zeros(C_t, dtype),
                "slot": rng.permutation(R * C_t)[:self.V].astype(dtype)}  # (|V|,) a random placement

    def masks(self, P, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
        """0 where a row (R,) / a slot (R, C_t) holds a word, -inf where it is empty (of ``dtype``)."""
        occupied = np.zeros(self.R * self.C_t, bool)
        occupied[P["slot"].astype(np.int64)] = True
        occupied = occupied.reshape(self.R, self.C_t)  # (R, C_t)
        return (np.where(occupied.any(axis=1), 0.0, -np.inf).astype(dtype),
                np.where(occupied, 0.0, -np.inf).astype(dtype))

    def check_table(self, P) -> None:
        slot = P["slot"].astype(np.int64)
        if slot.shape != (self.V,) or slot.min() < 0 or slot.max() >= self.R * self.C_t or \
                len(np.unique(slot)) != self.V:
            raise UserError(f"a LightRNN table must place each of the {self.V} words in its own slot of "
                            f"{self.R} x {self.C_t}")

    # ----------------------------------------------------------------- forward
    def _forward(self, P, a, targets):
        row, col = rows_cols(P, self.C_t)
        r, c = row[targets], col[targets]  # (K,) the targets' rows and columns
        mask_r, mask_c = self.masks(P, a.dtype)
        lr = log_softmax(a @ P["Y_r"].T + P["b_r"] + mask_r)  # (K, R) log P_r
        g = np.tanh(a @ P["A"].T + P["E"][r])  # (K, h) the state after reading the row
        lc = log_softmax(g @ P["Y_c"].T + P["b_c"] + mask_c[r])  # (K, C_t) log P_c( . | row)
        K = len(targets)
        logp = lr[np.arange(K), r].astype(np.float64) + lc[np.arange(K), c]  # (K,)
        return logp, {"a": a, "r": r, "c": c, "lr": lr, "g": g, "lc": lc}

    def loss(self, params, inputs, targets):
        logp, cache = self._forward(params, self.input(inputs), check_targets(targets, self.V))
        return float(-logp.mean()), cache

    def backward_sparse(self, params, cache):
        a, r, c, g = cache["a"], cache["r"], cache["c"], cache["g"]
        K, dt, idx = len(r), a.dtype, np.arange(len(r))
        # backward through the row's softmax + NLL: dL/dy^r = (P_r - 1[R_w]) / K
        gyr = np.exp(cache["lr"]).astype(dt)  # (K, R)
        gyr[idx, r] -= 1
        gyr /= K
        # backward through y^r = b^r + a @ Y^r.T
        grads = {"Y_r": gyr.T @ a, "b_r": gyr.sum(axis=0)}
        ga = gyr @ params["Y_r"]  # (K, h)
        # backward through the column's softmax + NLL: dL/dy^c = (P_c - 1[C_w]) / K
        gyc = np.exp(cache["lc"]).astype(dt)  # (K, C_t)
        gyc[idx, c] -= 1
        gyc /= K
        # backward through y^c = b^c + g @ Y^c.T
        grads["Y_c"], grads["b_c"] = gyc.T @ g, gyc.sum(axis=0)
        gg = gyc @ params["Y_c"]  # (K, h)
        # backward through g = tanh(a @ A.T + E(R_w))
        gpre = gg * (1 - g ** 2)  # (K, h)
        grads["A"] = gpre.T @ a  # (h, h)
        gE = np.zeros_like(params["E"])  # (R, h)
        np.add.at(gE, r, gpre)  # examples of one row add up
        grads["E"] = gE
        ga += gpre @ params["A"]
        return {"U": ga}, grads

    # ----------------------------------------------------------------- probabilities
    def log_prob(self, params, inputs, targets):
        return self._forward(params, self.input(inputs), check_targets(targets, self.V))[0]

    def log_probs(self, params, inputs):
        """log P(w | a) of every word: (K, |V|) float64, each row's column softmax computed once."""
        a = self.input(inputs).astype(np.float64)
        P64 = {k: params[k].astype(np.float64) for k in ("Y_r", "b_r", "A", "E", "Y_c", "b_c")}
        row, col = rows_cols(params, self.C_t)
        mask_r, mask_c = self.masks(params)
        lr = log_softmax(P64["b_r"] + a @ P64["Y_r"].T + mask_r)  # (K, R)
        out = np.empty((len(a), self.V))  # (K, |V|)
        for i in np.unique(row):
            g = np.tanh(a @ P64["A"].T + P64["E"][i])  # (K, h) the state after reading row i
            lc = log_softmax(P64["b_c"] + g @ P64["Y_c"].T + mask_c[i])  # (K, C_t)
            words = np.flatnonzero(row == i)
            out[:, words] = lr[:, i:i + 1] + lc[:, col[words]]
        return out

    def _float64(self, params, inputs):
        return self.input(inputs).astype(np.float64), {k: params[k].astype(np.float64) for k in ("Y_r", "b_r", "A", "E", "Y_c", "b_c")}

    def row_log_probs(self, params, inputs) -> np.ndarray:
        """For reassigning the table: log P_r of every row (K, R), no mask (an empty row may be filled)."""
        a, P64 = self._float64(params, inputs)
        return log_softmax(P64["b_r"] + a @ P64["Y_r"].T)  # (K, R)

    def column_log_probs(self, params, inputs, rows: np.ndarray) -> np.ndarray:
        """For reassigning the table: log P_c of every column given each of the rows ``rows`` (K, q):
        (K, q, C_t), no mask (an empty slot may be filled)."""
        a, P64 = self._float64(params, inputs)
        g = np.tanh((a @ P64["A"].T)[:, None] + P64["E"][rows])  # (K, q, h) the state after reading each row
        return log_softmax((g @ P64["Y_c"].T + P64["b_c"]).reshape(-1, self.C_t)).reshape(rows.shape + (self.C_t,))


class LightInput(InputLayer):
    """LightRNN's input vectors: x(w) = (X^r(R_w), X^c(C_w)), m/2 features each, R_w and C_w read from
    the table ``slot`` of the :class:`LightOutput` on the same network (one table for both).

    >>> layer = LightInput(V=10, m=4)
    >>> P = {**layer.init_params(np.random.default_rng(0), np.float64), "slot": np.arange(10.0)}
    >>> x, _ = layer.forward(P, np.array([0, 1]))  # words 0 and 1: slots (0, 0) and (0, 1)
    >>> bool((x[0, :2] == x[1, :2]).all()), bool((x[0, 2:] == x[1, 2:]).all())  # one row vector, two column vectors
    (True, False)
    """

    name, decayed = "lightrnn", ("X_r", "X_c")

    def __init__(self, V: int, m: int):
        if m < 2 or m % 2:
            raise UserError(f"LightRNN's input vectors need an even m (half row, half column), got m = {m}", setting="m")
        self.V, self.m = V, m
        self.R, self.C_t = table_shape(V)

    def init_params(self, rng, dtype):
        return {"X_r": rng.uniform(-0.1, 0.1, size=(self.R, self.m // 2)).astype(dtype),  # (R, m/2)
                "X_c": rng.uniform(-0.1, 0.1, size=(self.C_t, self.m // 2)).astype(dtype)}  # (C_t, m/2)

    def forward(self, params, ids):
        row, col = rows_cols(params, self.C_t)
        r, c = row[ids], col[ids]
        x = np.concatenate([params["X_r"][r], params["X_c"][c]], axis=-1)  # (..., m) x = (X^r(R_w), X^c(C_w))
        return x, {"r": r, "c": c}

    def backward(self, params, cache, gx):
        half = self.m // 2
        # backward through the look-ups: each place's gradient added to its row's and its column's vector
        g_r, g_c = np.zeros_like(params["X_r"]), np.zeros_like(params["X_c"])
        np.add.at(g_r, np.ravel(cache["r"]), gx.reshape(-1, self.m)[:, :half])
        np.add.at(g_c, np.ravel(cache["c"]), gx.reshape(-1, self.m)[:, half:])
        return {"X_r": g_r, "X_c": g_c}

    def num_params(self) -> int:
        return (self.R + self.C_t) * (self.m // 2)
