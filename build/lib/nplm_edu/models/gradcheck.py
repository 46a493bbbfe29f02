"""Gradient check: the hand-derived backward pass against central finite differences.

For a parameter entry theta_i, (L(theta + eps e_i) - L(theta - eps e_i)) / (2 eps) approximates
dL/dtheta_i with an error O(eps^2). Run in float64 (eps ~ 1e-5) the hand-derived gradient and the
numerical one agree to ~1e-8 relative error; a wrong backward pass gives errors of order 1.
Relative error of a parameter: ||g - g_num|| / (||g|| + ||g_num||) over its checked entries
(Euclidean norms), as in chapter 5: entries whose gradient is ~0 cannot blow it up.
"""

from __future__ import annotations

import numpy as np


def relative_error(g: np.ndarray, g_num: np.ndarray, tiny: float = 1e-12) -> float:
    """||g - n|| / max(||g|| + ||n||, tiny): 0 when equal, 1/3 when one is twice the other."""
    g, g_num = np.asarray(g, np.float64), np.asarray(g_num, np.float64)
    if g.size == 0:
        return 0.0
    return float(np.linalg.norm(g - g_num) / max(np.linalg.norm(g) + np.linalg.norm(g_num), tiny))


def numerical_grad(model, contexts, targets, name: str, entries=None, eps: float = 1e-5) -> np.ndarray:
    """Central differences of the mean NLL w.r.t. ``model.params[name]`` (all entries, or the flat
    indices in ``entries``); returns an array shaped like the parameter (unchecked entries nan)."""
    p = model.params[name]
    num = np.full(p.shape, np.nan)
    flat_idx = range(p.size) if entries is None else entries
    for i in flat_idx:
        idx = np.unravel_index(i, p.shape)
        old = p[idx]
        p[idx] = old + eps
        lp, _ = model.loss_and_grads(contexts, targets)
        p[idx] = old - eps
        lm, _ = model.loss_and_grads(contexts, targets)
        p[idx] = old
        num[idx] = (lp - lm) / (2 * eps)
    return num


def gradcheck(model, contexts, targets, max_entries: int = 200, eps: float = 1e-5, seed: int = 0) -> dict:
    """Relative error of every parameter's gradient (float64 models), checking up to
    ``max_entries`` entries per parameter: all of them if it is small, else a random sample that
    always includes the rows of C of the words in the contexts (the ones with nonzero gradient)."""
    if model.params["C"].dtype != np.float64:
        raise ValueError("gradient checks need a float64 model (NPLMConfig(dtype='float64'))")
    rng = np.random.default_rng(seed)
    _, grads = model.loss_and_grads(contexts, targets)
    grads = {k: v.copy() for k, v in grads.items()}  # loss_and_grads reuses buffers
    errors = {}
    for name in grads:  # tied embeddings: "U" is "C", and only "C" has a gradient
        p = model.params[name]
        if p.size <= max_entries:
            entries = np.arange(p.size)
        else:
            entries = rng.choice(p.size, max_entries, replace=False)
            if name == "C":  # make sure the rows that matter are covered
                m = p.shape[1]
                rows = np.unique(np.asarray(contexts).ravel())
                used = (rows[:, None] * m + np.arange(m)).ravel()
                entries = np.unique(np.r_[entries, used[:max_entries]])
        num = numerical_grad(model, contexts, targets, name, entries, eps)
        flat_g, flat_n = grads[name].ravel()[entries], num.ravel()[entries]
        errors[name] = relative_error(flat_g, flat_n)
    return errors
