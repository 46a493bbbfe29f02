"""Character-aware input (Kim, Jernite, Sontag and Rush 2016), written to be read.

The NPLM's look-up table C gives each of the |V| words its own m features, learned from that
word's occurrences only: a rare word gets few updates and a word never seen in training gets none
(the paper's section 5 asks what to do about such words). Kim et al. (2016) compute a word's input
vector from its spelling instead, so words that share pieces (``walk``, ``walked``, ``walking``)
share parameters, the input layer no longer grows with |V|, and any string gets a vector.

A word k is spelled c_1 .. c_l from a fixed character inventory, between a begin mark ``{`` and an
end mark ``}`` and padded with a zero character to L = ``max_len`` + 2 places. Its characters' d
features, the columns of Q (here rows: Q is (A, d) for A characters), form C^k (L, d). For each
filter width w there are h_w filters F (h_w, w d) (Kim et al. call a filter H; here H is the NPLM's
hidden layer)::

    f^k[i] = tanh(F (C^k[i], .., C^k[i + w - 1]) + b_F)   (L - w + 1, h_w)  the filter over each window
    y^k    = max_i f^k[i]                                 (h_w,)            max-over-time pooling
    y      = [y^k of every width]                         (m,)              m = sum_w h_w
    t = sigma(W_T y + b_T)                                (m,)              the highway's transform gate
    x = t * g(W_H y + b_H) + (1 - t) * y                  (m,)              g = ReLU (Kim et al.'s highway)

and x replaces the row C(w_k) wherever the network read it. Kim et al.'s small model: d = 15,
widths 1..6 with h_w = 25 w filters (m = 525), one highway layer. b_T starts at -2, so the highway
first carries y through (Srivastava et al. 2015). Backward (a dL/dx per word)::

    dL/dt = dL/dx * (g - y),  dL/dg = dL/dx * t,  dL/dy = dL/dx * (1 - t)
    dL/da_H = dL/dg * 1[a_H > 0],  dL/da_T = dL/dt * t (1 - t)      (a_H, a_T: the gates' inputs)
    dL/dy += dL/da_H W_H + dL/da_T W_T
    dL/df^k[i] = dL/dy^k where i is the argmax, else 0               (the max passes one position)
    dL/d(window i) = (dL/df^k[i] * (1 - f^k[i]^2)) F, added back to the w characters it covers
    dL/dQ[c] = the sum of dL/dC^k over every place that reads character c (the padding excepted)

The rules of the spelling: characters outside the inventory (the printable ASCII characters) share
one unknown-character id; words longer than ``max_len`` are cut to their first ``max_len``
characters; the padding character's row of Q stays zero (it has no gradient). A word outside the
training vocabulary is spelled by the same rules, so it gets a vector as any word does.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from .input import InputLayer

INVENTORY = "".join(c for c in string.printable if not c.isspace())  # 94 printable ASCII characters
PAD, BOW, EOW, UNK_CHAR = 0, 1, 2, 3  # the padding, the begin and end marks, an unknown character


@dataclass
class CharConfig:
    """The character-aware input layer's shape: d features per character, ``filters`` filters per
    unit of width for each width in ``widths`` (h_w = filters w), words cut at ``max_len``."""

    d: int = 15
    widths: tuple = (1, 2, 3, 4, 5, 6)
    filters: int = 25
    max_len: int = 20

    def validate(self) -> None:
        if self.d < 1 or self.filters < 1:
            raise UserError(f"d and filters must be at least 1, got d={self.d}, filters={self.filters}")
        if not self.widths or any(w < 1 or w > self.max_len + 2 for w in self.widths):
            raise UserError(f"filter widths must lie in 1..max_len + 2 = {self.max_len + 2}, got {self.widths}")

    @property
    def m(self) -> int:
        """Features per word: one per filter, m = sum_w h_w."""
        return sum(self.filters * w for w in self.widths)


def spell(words, max_len: int) -> np.ndarray:
    """Each word as character ids (N, max_len + 2): ``{``, its first ``max_len`` characters (one
    shared id for a character outside the inventory), ``}``, then padding."""
    index = {c: i + 4 for i, c in enumerate(INVENTORY)}  # ids 0..3 are PAD, BOW, EOW, UNK_CHAR
    S = np.full((len(words), max_len + 2), PAD, np.int64)  # (N, L)
    for k, word in enumerate(words):
        ids = [index.get(c, UNK_CHAR) for c in str(word)[:max_len]]
        S[k, :len(ids) + 2] = [BOW] + ids + [EOW]
    return S


def char_windows(E: np.ndarray, w: int) -> np.ndarray:
    """The (L - w + 1) windows of w consecutive rows of E (N, L, d), each flattened: (N, L - w + 1, w d)."""
    P = E.shape[1] - w + 1
    return np.concatenate([E[:, o:o + P] for o in range(w)], axis=2)  # (N, P, w d) window i = C^k[i .. i+w-1]


def sigmoid(a: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * a))  # = 1 / (1 + exp(-a)), without overflow


class CharInput(InputLayer):
    """Kim et al.'s character-aware input (see the module docstring) for the words ``words``.

    Parameters: ``Q`` (A, d) the features of the A characters (inventory and marks); per width w ``F_w`` (h_w, w d) and
    ``bF_w`` (h_w,); the highway's ``W_H``, ``W_T`` (m, m) and ``b_H``, ``b_T`` (m,).

    >>> layer = CharInput(["the", "cat"], CharConfig(d=4, widths=(1, 2), filters=3))
    >>> P = layer.init_params(np.random.default_rng(0), np.float64)
    >>> x, _ = layer.forward(P, np.array([[1, 0, 1]]))
    >>> x.shape, layer.m
    ((1, 3, 9), 9)
    """

    name = "char"

    def __init__(self, words, config: CharConfig | None = None):
        self.char = config or CharConfig()
        self.char.validate()
        self.m = self.char.m
        self.S = spell(words, self.char.max_len)  # (|V|, L) the spelling of every word of the vocabulary
        self.decayed = ("Q",) + tuple(f"F_{w}" for w in self.char.widths) + ("W_H", "W_T")

    def describe(self) -> dict:
        """The layer's shape, kept in a checkpoint's meta (``input``) to rebuild it."""
        return {"d": self.char.d, "widths": list(self.char.widths), "filters": self.char.filters,
                "max_len": self.char.max_len}

    def init_params(self, rng, dtype) -> dict:
        c, m = self.char, self.m
        Q = rng.uniform(-0.1, 0.1, size=(len(INVENTORY) + 4, c.d))  # (|chars|, d)
        Q[PAD] = 0  # the padding reads as zeros
        P = {"Q": Q.astype(dtype)}
        for w in c.widths:
            r = 1 / np.sqrt(w * c.d)
            P[f"F_{w}"] = rng.uniform(-r, r, size=(c.filters * w, w * c.d)).astype(dtype)  # (h_w, w d)
            P[f"bF_{w}"] = np.zeros(c.filters * w, dtype)  # (h_w,)
        r = 1 / np.sqrt(m)
        P["W_H"] = rng.uniform(-r, r, size=(m, m)).astype(dtype)  # (m, m)
        P["b_H"] = np.zeros(m, dtype)
        P["W_T"] = rng.uniform(-r, r, size=(m, m)).astype(dtype)  # (m, m)
        P["b_T"] = np.full(m, -2.0, dtype)  # the highway first carries y through
        return P

    def num_params(self) -> int:
        """Parameters of the layer: A d + sum_w h_w (w d + 1) + 2 m (m + 1) for A characters, whatever |V| is."""
        c = self.char
        return (len(INVENTORY) + 4) * c.d + sum(c.filters * w * (w * c.d + 1) for w in c.widths) + 2 * self.m * (self.m + 1)

    # ----------------------------------------------------------------- forward
    def spelled(self, P: dict, S: np.ndarray) -> tuple[np.ndarray, dict]:
        """x of each spelling S (N, L) of character ids: (N, m), and what backward needs."""
        E = P["Q"][S]  # (N, L, d) C^k: the characters' features
        ys, convs = [], []
        for w in self.char.widths:
            win = char_windows(E, w)  # (N, L - w + 1, w d)
            f = np.tanh(win @ P[f"F_{w}"].T + P[f"bF_{w}"])  # (N, L - w + 1, h_w) f^k[i]
            j = f.argmax(axis=1)  # (N, h_w) where each filter's maximum is
            ys.append(np.take_along_axis(f, j[:, None], axis=1)[:, 0])  # (N, h_w) y^k = max_i f^k[i]
            convs.append((w, win, f, j))
        y = np.concatenate(ys, axis=1)  # (N, m)
        t = sigmoid(y @ P["W_T"].T + P["b_T"])  # (N, m) the transform gate
        g = np.maximum(y @ P["W_H"].T + P["b_H"], 0)  # (N, m) g(W_H y + b_H), g = ReLU
        x = t * g + (1 - t) * y  # (N, m)
        return x, {"S": S, "y": y, "t": t, "g": g, "convs": convs}

    def forward(self, P, ids):
        ids = np.asarray(ids)
        words, inverse = np.unique(ids, return_inverse=True)  # each word's spelling read once
        x, cache = self.spelled(P, self.S[words])  # (N, m)
        cache["inverse"], cache["n_words"] = inverse.reshape(-1), len(words)
        return x[inverse.reshape(-1)].reshape(ids.shape + (self.m,)), cache

    # ----------------------------------------------------------------- backward
    def spelled_backward(self, P: dict, cache: dict, gx: np.ndarray) -> dict:
        """The gradients of the layer's parameters from dL/dx (N, m) of the spellings of ``cache``."""
        y, t, g = cache["y"], cache["t"], cache["g"]
        # backward through x = t * g + (1 - t) * y
        gt, gg, gy = gx * (g - y), gx * t, gx * (1 - t)  # (N, m) each
        # backward through g = ReLU(a_H), a_H = W_H y + b_H
        gaH = gg * (g > 0)  # (N, m)
        # backward through t = sigma(a_T), a_T = W_T y + b_T
        gaT = gt * t * (1 - t)  # (N, m)
        grads = {"W_H": gaH.T @ y, "b_H": gaH.sum(axis=0), "W_T": gaT.T @ y, "b_T": gaT.sum(axis=0)}
        gy = gy + gaH @ P["W_H"] + gaT @ P["W_T"]  # (N, m)
        S = cache["S"]
        gE = np.zeros(S.shape + (self.char.d,), gx.dtype)  # (N, L, d) dL/dC^k
        lo = 0
        for w, win, f, j in cache["convs"]:
            hw = f.shape[2]
            # backward through y^k = max_i f^k[i]: only the maximum's place receives the gradient
            gf = np.zeros_like(f)  # (N, L - w + 1, h_w)
            np.put_along_axis(gf, j[:, None], gy[:, None, lo:lo + hw], axis=1)
            lo += hw
            # backward through f = tanh(window F^T + b_F)
            ga = gf * (1 - f ** 2)  # (N, L - w + 1, h_w)
            grads[f"F_{w}"] = ga.reshape(-1, hw).T @ win.reshape(-1, win.shape[2])  # (h_w, w d)
            grads[f"bF_{w}"] = ga.sum(axis=(0, 1))
            gwin = ga @ P[f"F_{w}"]  # (N, L - w + 1, w d)
            # backward through the windows: window i's slot o is character i + o
            n = gwin.shape[1]
            for o in range(w):
                gE[:, o:o + n] += gwin[:, :, o * self.char.d:(o + 1) * self.char.d]
        # backward through the characters' look-up: each place's gradient added to its character's row of Q
        gQ = np.zeros_like(P["Q"])  # (|chars|, d)
        np.add.at(gQ, S.ravel(), gE.reshape(-1, self.char.d))
        gQ[PAD] = 0  # the padding stays zero
        grads["Q"] = gQ
        return grads

    def backward(self, P, cache, gx):
        # backward through x = x_words[inverse]: the places of one word add up
        gw = np.zeros((cache["n_words"], self.m), gx.dtype)  # (N, m)
        np.add.at(gw, cache["inverse"], gx.reshape(-1, self.m))
        return self.spelled_backward(P, cache, gw)

    def vectors(self, P: dict, words) -> np.ndarray:
        """x of any strings, in the vocabulary or not, spelled by the rules above: (N, m)."""
        return self.spelled(P, spell(words, self.char.max_len))[0]
