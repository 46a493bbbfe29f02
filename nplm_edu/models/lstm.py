"""The LSTM language model (Hochreiter & Schmidhuber 1997), written to be read.

The Elman network's gradient through k steps is a product of k Jacobians diag(1 - h^2) Wh, which shrinks
(or grows) geometrically in k: the vanishing and exploding gradients of Hochreiter (1991) and Bengio,
Simard & Frasconi (1994). The LSTM (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al.
2000) carries a second state, the cell s_t, that is updated additively, so dL/ds_{t-1} = f_t dL/ds_t
passes back unchanged as long as the forget gate f_t stays near 1. The equations, with x_t = C(w_t) (the
look-up table, as in the NPLM and :mod:`nplm_edu.models.rnn`)::

    i_t = sigma(W^i x_t + U^i h_{t-1} + b^i)        input gate
    f_t = sigma(W^f x_t + U^f h_{t-1} + b^f)        forget gate
    o_t = sigma(W^o x_t + U^o h_{t-1} + b^o)        output gate
    g_t = phi(W^g x_t + U^g h_{t-1} + b^g)          the candidate (phi = tanh, seed eq. 7)
    s_t = g_t * i_t + s_{t-1} * f_t                 the cell
    h_t = o_t * phi(s_t)                            the output

(The seed prints the last line as s_t * phi(o_t); the LSTM of its reference [25] and of every
implementation is o_t * phi(s_t), used here.) The four W^k are stacked in ``Wx`` (4h, m) and the
four U^k in ``Wh`` (4h, h), in the order i, f, o, g, so each step's gates are ONE product::

    z_t = x_t @ Wx.T + h_{t-1} @ Wh.T + d           # (B, 4h) = [i f o g] before the nonlinearities

(``U`` keeps the paper's meaning: the output layer's matrix, y_t = b + U h_t.) The state carried
from batch to batch is the pair (h_t, s_t); a reset zeroes both.

Initialisation: as :mod:`nplm_edu.models.rnn` (C ~ U(-0.1, 0.1), Wx ~ U(+-1/sqrt(m)), Wh ~
U(+-1/sqrt(h)), the output layer's U ~ U(+-1/sqrt(h)), b = 0), and d = 0 except the forget gate's
bias b^f = 1, so that f_t starts near 0.73 and the cell remembers from the first update
(Gers et al. 2000; Jozefowicz et al. 2015). Regularisation: weight decay on C, Wx, Wh, U; dropout
on x_t and on h_t where it enters the output layer, never on the recurrent connections (Zaremba et
al. 2014).
"""

from __future__ import annotations

import numpy as np

from .rnn import RecurrentLM, _keep, embedding_grad


def sigmoid(z):
    """sigma(z) = 1 / (1 + exp(-z)), the logistic function, without overflow for large ``|z|``."""
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1 / (1 + e), e / (1 + e))


class LSTM(RecurrentLM):
    """The LSTM language model (Hochreiter & Schmidhuber 1997; forget gate: Gers et al. 2000; see the
    module docstring)."""

    kind = "lstm"
    G = 4  # gates per hidden unit: i, f, o, g
    n_state = 2  # (h, s)

    def initial_bias(self, dt):
        h = self.config.h
        d = np.zeros(4 * h, dt)  # (4h,) = [b^i b^f b^o b^g]
        d[h:2 * h] = 1.0  # the forget gate starts open
        return d

    def forward(self, X, state=None, mask_x=None, mask_a=None, resets=None) -> dict:
        X, (h0, s0), resets = self._read(X, state, resets)
        P, (B, T), h = self.params, X.shape, self.config.h
        x = P["C"][X.T]  # (T, B, m) x_t = C(w_t)
        if mask_x is not None:
            x = x * mask_x  # dropout between the look-up table and the LSTM
        hs = np.empty((T + 1, B, h), h0.dtype)  # hs[t + 1] = h_t, hs[0] = the carried h
        ss = np.empty((T + 1, B, h), h0.dtype)  # ss[t + 1] = s_t, ss[0] = the carried cell
        hs[0], ss[0] = h0, s0
        gates = np.empty((T, B, 4 * h), h0.dtype)  # [i f o g] after their nonlinearities
        prev_h, prev_s = np.empty((T, B, h), h0.dtype), np.empty((T, B, h), h0.dtype)
        for t in range(T):
            keep = _keep(resets, t)
            prev_h[t] = hs[t] if keep is None else hs[t] * keep  # a reset: h_{t-1} := 0 ...
            prev_s[t] = ss[t] if keep is None else ss[t] * keep  # ... and s_{t-1} := 0
            z = x[t] @ P["Wx"].T + prev_h[t] @ P["Wh"].T + P["d"]  # (B, 4h) all four gates at once
            i, f, o = sigmoid(z[:, :h]), sigmoid(z[:, h:2 * h]), sigmoid(z[:, 2 * h:3 * h])
            g = np.tanh(z[:, 3 * h:])
            ss[t + 1] = g * i + prev_s[t] * f  # s_t = g_t i_t + s_{t-1} f_t
            hs[t + 1] = o * np.tanh(ss[t + 1])  # h_t = o_t phi(s_t)
            gates[t] = np.concatenate([i, f, o, g], axis=1)
        a = hs[1:] if mask_a is None else hs[1:] * mask_a  # dropout between h_t and the output layer
        return {"X": X, "x": x, "hs": hs, "ss": ss, "gates": gates, "prev_h": prev_h, "prev_s": prev_s,
                "resets": resets, "mask_x": mask_x, "inputs": {"U": a.reshape(T * B, h)},
                "state": (hs[T].copy(), ss[T].copy())}

    def backward(self, cache, ga):
        P, x, ss, gates = self.params, cache["x"], cache["ss"], cache["gates"]
        T, B, h = ga.shape
        grads = {k: np.zeros_like(P[k]) for k in ("Wx", "Wh", "d")}
        gx = np.empty_like(x)  # (T, B, m)
        gh_next = np.zeros((B, h), ga.dtype)  # dL/dh_t through step t+1
        gs_next = np.zeros((B, h), ga.dtype)  # dL/ds_t through step t+1 (the cell's own path)
        for t in reversed(range(T)):
            i, f, o, g = (gates[t][:, k * h:(k + 1) * h] for k in range(4))
            tanh_s = np.tanh(ss[t + 1])
            gh = ga[t] + gh_next  # dL/dh_t: from the output at t and from step t+1   (B, h)
            # backward through h_t = o_t phi(s_t)
            go = gh * tanh_s  # dL/do_t
            gs = gs_next + gh * o * (1 - tanh_s ** 2)  # dL/ds_t: through h_t and through s_{t+1}
            # backward through s_t = g_t i_t + s_{t-1} f_t
            gi, gg, gf = gs * g, gs * i, gs * cache["prev_s"][t]
            gs_next = gs * f  # dL/ds_{t-1}: the additive path, scaled by the forget gate only
            # backward through the nonlinearities: sigma' = sigma (1 - sigma), phi' = 1 - phi^2
            gz = np.concatenate([gi * i * (1 - i), gf * f * (1 - f), go * o * (1 - o), gg * (1 - g ** 2)],
                                axis=1)  # dL/dz_t  (B, 4h)
            # backward through z_t = x_t Wx^T + h_{t-1} Wh^T + d
            grads["d"] += gz.sum(axis=0)
            grads["Wx"] += gz.T @ x[t]  # (4h, m)
            grads["Wh"] += gz.T @ cache["prev_h"][t]  # (4h, h)
            gx[t] = gz @ P["Wx"]  # (B, m)
            gh_next = gz @ P["Wh"]  # dL/dh_{t-1}  (B, h)
            keep = _keep(cache["resets"], t)
            if keep is not None:  # backward through a reset: the zeroed state did not reach step t
                gh_next, gs_next = gh_next * keep, gs_next * keep
        # truncated BPTT: dL/dh_0 and dL/ds_0 would go into the previous batch; they are dropped
        return {**grads, "C": embedding_grad(P["C"], cache["X"], gx, cache["mask_x"])}
