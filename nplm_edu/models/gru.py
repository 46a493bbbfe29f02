"""The GRU language model (Cho et al. 2014), written to be read.

The gated recurrent unit keeps the LSTM's idea, an update that is mostly additive so the gradient
can pass back through many steps, with one state instead of two and two gates instead of three
(Cho et al. 2014; compared with the LSTM by Chung et al. 2014). With x_t = C(w_t) (the look-up table,
as in the NPLM and :mod:`nplm_edu.models.rnn`)::

    z_t = sigma(W^z x_t + U^z h_{t-1} + b^z)              update gate
    r_t = sigma(W^r x_t + U^r h_{t-1} + b^r)              reset gate
    n_t = phi(W^n x_t + U^n (r_t * h_{t-1}) + b^n)        the candidate (phi = tanh)
    h_t = (1 - z_t) * n_t + z_t * h_{t-1}                 the new state

z_t near 1 copies the previous state (the long memory); r_t near 0 lets the candidate forget it and
read the current word only; z_t = 0, r_t = 1 is the Elman network. The reset gate acts on h_{t-1}
BEFORE U^n, as in Cho et al. (2014); some libraries (cuDNN, and so PyTorch's ``nn.GRU``) apply it
after, r_t * (U^n h_{t-1} + b^n), a slightly different cell. The three W^k are stacked in ``Wx``
(3h, m) and the three U^k in ``Wh`` (3h, h), in the order z, r, n; the biases in ``d`` (3h,).
(``U`` keeps the paper's meaning: the output layer's matrix, y_t = b + U h_t.) The state carried from
batch to batch is h_t; a reset zeroes it.

Initialisation, regularisation, the output layer and truncated backpropagation through time: as
:mod:`nplm_edu.models.rnn` (d = 0). This is the reference, one loop over time each way; the fast path
(:class:`~nplm_edu.numerics.recurrent.FastGRU`) computes the same numbers.
"""

from __future__ import annotations

import numpy as np

from .lstm import sigmoid
from .rnn import RecurrentLM, _keep, embedding_grad


class GRU(RecurrentLM):
    """The GRU language model (Cho et al. 2014; see the module docstring)."""

    kind = "gru"
    G = 3  # rows of Wx, Wh per hidden unit: z, r, n
    n_state = 1  # (h,)

    def forward(self, X, state=None, mask_x=None, mask_a=None, resets=None) -> dict:
        X, (h0,), resets = self._read(X, state, resets)
        P, (B, T), h = self.params, X.shape, self.config.h
        x = P["C"][X.T]  # (T, B, m) x_t = C(w_t)
        if mask_x is not None:
            x = x * mask_x  # dropout between the look-up table and the GRU
        Wzr, Wn = P["Wh"][:2 * h], P["Wh"][2 * h:]  # (2h, h) U^z, U^r stacked; (h, h) U^n
        hs = np.empty((T + 1, B, h), h0.dtype)  # hs[t + 1] = h_t, hs[0] = the carried state
        hs[0] = h0
        gates = np.empty((T, B, 3 * h), h0.dtype)  # [z r n] after their nonlinearities
        prev = np.empty((T, B, h), h0.dtype)  # h_{t-1} as step t reads it (after a reset)
        for t in range(T):
            keep = _keep(resets, t)
            prev[t] = hs[t] if keep is None else hs[t] * keep  # a reset: h_{t-1} := 0
            ax = x[t] @ P["Wx"].T + P["d"]  # (B, 3h) W^k x_t + b^k for k = z, r, n
            azr = ax[:, :2 * h] + prev[t] @ Wzr.T  # (B, 2h) both gates before the sigmoid
            z, r = sigmoid(azr[:, :h]), sigmoid(azr[:, h:])  # (B, h) each
            n = np.tanh(ax[:, 2 * h:] + (r * prev[t]) @ Wn.T)  # (B, h) the candidate
            hs[t + 1] = (1 - z) * n + z * prev[t]  # h_t = (1 - z_t) n_t + z_t h_{t-1}
            gates[t] = np.concatenate([z, r, n], axis=1)
        a = hs[1:] if mask_a is None else hs[1:] * mask_a  # dropout between h_t and the output layer
        return {"X": X, "x": x, "hs": hs, "gates": gates, "prev": prev, "resets": resets, "mask_x": mask_x,
                "inputs": {"U": a.reshape(T * B, h)}, "state": (hs[T].copy(),)}

    def backward(self, cache, ga):
        P, x, gates, prev = self.params, cache["x"], cache["gates"], cache["prev"]
        T, B, h = ga.shape
        Wzr, Wn = P["Wh"][:2 * h], P["Wh"][2 * h:]
        grads = {k: np.zeros_like(P[k]) for k in ("Wx", "Wh", "d")}
        gx = np.empty_like(x)  # (T, B, m)
        gh_next = np.zeros((B, h), ga.dtype)  # dL/dh_t through step t+1
        for t in reversed(range(T)):
            z, r, n = (gates[t][:, k * h:(k + 1) * h] for k in range(3))
            p = prev[t]  # (B, h) h_{t-1}
            gh = ga[t] + gh_next  # dL/dh_t: from the output at t and from step t+1   (B, h)
            # backward through h_t = (1 - z_t) n_t + z_t h_{t-1}
            gz = gh * (p - n)  # dL/dz_t
            gn = gh * (1 - z)  # dL/dn_t
            gp = gh * z  # dL/dh_{t-1}, the direct (additive) path
            # backward through n_t = phi(an_t), an_t = W^n x_t + U^n (r_t h_{t-1}) + b^n
            gan = gn * (1 - n ** 2)  # dL/dan_t  (B, h)
            grads["Wh"][2 * h:] += gan.T @ (r * p)  # dL/dU^n  (h, h)
            grp = gan @ Wn  # dL/d(r_t h_{t-1})  (B, h)
            gr = grp * p  # dL/dr_t
            gp = gp + grp * r  # dL/dh_{t-1} through the candidate
            # backward through the gates' sigmoids: sigma' = sigma (1 - sigma)
            gazr = np.concatenate([gz * z * (1 - z), gr * r * (1 - r)], axis=1)  # (B, 2h)
            # backward through azr_t = W^{z,r} x_t + U^{z,r} h_{t-1} + b^{z,r}
            grads["Wh"][:2 * h] += gazr.T @ p  # (2h, h)
            gp = gp + gazr @ Wzr  # dL/dh_{t-1} through the gates
            gax = np.concatenate([gazr, gan], axis=1)  # (B, 3h) dL/d(W^k x_t + b^k)
            grads["d"] += gax.sum(axis=0)
            grads["Wx"] += gax.T @ x[t]  # (3h, m)
            gx[t] = gax @ P["Wx"]  # (B, m)
            keep = _keep(cache["resets"], t)
            gh_next = gp if keep is None else gp * keep  # backward through a reset
        # truncated BPTT: dL/dh_0 would go into the previous batch; it is dropped
        return {**grads, "C": embedding_grad(P["C"], cache["X"], gx, cache["mask_x"])}
