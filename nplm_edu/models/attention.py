"""The pieces of a Transformer block, each a forward and a backward written to be read: layer
normalization (Ba, Kiros & Hinton 2016), the GELU nonlinearity (Hendrycks & Gimpel 2016) and causal
multi-head self-attention (Vaswani et al. 2017).

Every forward returns its output and a cache (a dict of what its backward needs); every backward
takes the gradient of the loss with respect to the output and the cache, and returns the gradients
with respect to the inputs and the parameters. Arrays are batches of K windows of T positions with
m features each, (K, T, m), rows as everywhere in this package (the paper's ``H x`` is ``x @ H.T``).
:mod:`nplm_edu.models.transformer` assembles them into the language model.
"""

from __future__ import annotations

import math

import numpy as np

LN_EPS = 1e-5  # added to the variance in layer normalization, so a constant row does not divide by 0
GELU_C = math.sqrt(2 / math.pi)  # the constant of GELU's tanh form (a Python float: float32 stays float32)


# ----------------------------------------------------------------- layer normalization
def layer_norm(x, g, beta):
    """y = g * (x - mean(x)) / sqrt(var(x) + eps) + beta over the last axis (each position's m
    features; Ba, Kiros & Hinton 2016). x (..., m), g and beta (m,)."""
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    xc = x - mu  # (..., m) centred
    sigma = np.sqrt((xc ** 2).mean(axis=-1, keepdims=True) + LN_EPS)  # (..., 1)
    xhat = xc / sigma  # (..., m) mean 0, variance 1 (up to eps)
    y = g * xhat + beta  # (..., m)
    return y, {"xhat": xhat, "sigma": sigma, "g": g}


def layer_norm_backward(gy, cache):
    """(dL/dx, dL/dg, dL/dbeta) of :func:`layer_norm`. With xhat = (x - mu) / sigma, every xhat_j
    depends on every x_i through mu and sigma, and the chain rule sums to
    dL/dx = (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) / sigma."""
    xhat, sigma, g = cache["xhat"], cache["sigma"], cache["g"]
    axes = tuple(range(gy.ndim - 1))  # every axis but the features'
    # backward through y = g * xhat + beta
    gg = (gy * xhat).sum(axis=axes)  # (m,)
    gbeta = gy.sum(axis=axes)  # (m,)
    gxhat = gy * g  # (..., m)
    # backward through xhat = (x - mu) / sigma: the mean and the variance read every feature
    gx = (gxhat - gxhat.mean(axis=-1, keepdims=True)
          - xhat * (gxhat * xhat).mean(axis=-1, keepdims=True)) / sigma  # (..., m)
    return gx, gg, gbeta


# ----------------------------------------------------------------- GELU
def gelu(z):
    """GELU(z) = z Phi(z) ~ 0.5 z (1 + tanh(c (z + 0.044715 z^3))), c = sqrt(2/pi) (Hendrycks &
    Gimpel 2016; the tanh form, as in GPT-2). Returns (GELU(z), cache)."""
    t = np.tanh(GELU_C * (z + 0.044715 * z ** 3))  # (..., d_ff)
    return 0.5 * z * (1 + t), {"z": z, "t": t}


def gelu_backward(ga, cache):
    """dL/dz of :func:`gelu`: GELU'(z) = 0.5 (1 + t) + 0.5 z (1 - t^2) c (1 + 3 * 0.044715 z^2)."""
    z, t = cache["z"], cache["t"]
    dt_dz = (1 - t ** 2) * GELU_C * (1 + 3 * 0.044715 * z ** 2)  # (..., d_ff) tanh' times the inner derivative
    return ga * (0.5 * (1 + t) + 0.5 * z * dt_dz)  # (..., d_ff)


# ----------------------------------------------------------------- causal multi-head self-attention
def split_heads(x, heads):
    """(K, T, m) -> (K, heads, T, m / heads): each head reads its own slice of the features."""
    K, T, m = x.shape
    return x.reshape(K, T, heads, m // heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    """(K, heads, T, dh) -> (K, T, heads dh): the heads' outputs side by side, the inverse of split_heads."""
    K, H, T, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(K, T, H * dh)


def causal_mask(T):
    """(T, T) boolean, True where position j is after position i (j > i): what position i may not read."""
    return np.triu(np.ones((T, T), bool), k=1)


def self_attention(u, Wq, Wk, Wv, Wo, heads):
    """Causal multi-head self-attention (Vaswani et al. 2017, section 3.2), without biases:

        q, k, v = u Wq^T, u Wk^T, u Wv^T      each split into ``heads`` heads of dh = m / heads features
        S = q k^T / sqrt(dh)                   (K, heads, T, T)  S[i, j]: how well position i's query fits j's key
        S[i, j] = -inf for j > i              the causal mask: position i reads only positions j <= i
        A = softmax(S) over j                  each row of A: weights summing to 1 over positions 0..i
        z = A v                                (K, heads, T, dh) a weighted mean of the values
        out = [z_1 ... z_heads] Wo^T           (K, T, m)

    u (K, T, m); Wq, Wk, Wv, Wo (m, m). Returns (out, cache)."""
    K, T, m = u.shape
    dh = m // heads
    q = split_heads(u @ Wq.T, heads)  # (K, heads, T, dh) queries
    k = split_heads(u @ Wk.T, heads)  # (K, heads, T, dh) keys
    v = split_heads(u @ Wv.T, heads)  # (K, heads, T, dh) values
    S = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)  # (K, heads, T, T) scaled scores
    S = np.where(causal_mask(T), -np.inf, S)  # (K, heads, T, T) the future is masked out
    S = S - S.max(axis=-1, keepdims=True)  # subtract each row's max (the diagonal is never masked)
    e = np.exp(S)  # (K, heads, T, T) exactly 0 where masked
    A = e / e.sum(axis=-1, keepdims=True)  # (K, heads, T, T) attention weights, rows sum to 1
    z = merge_heads(A @ v)  # (K, T, m) every head's weighted mean of the values, side by side
    out = z @ Wo.T  # (K, T, m)
    return out, {"u": u, "q": q, "k": k, "v": v, "A": A, "z": z, "heads": heads}


def self_attention_backward(gout, cache, Wq, Wk, Wv, Wo):
    """(dL/du, {"Wq", "Wk", "Wv", "Wo": their gradients}) of :func:`self_attention`."""
    u, q, k, v, A, z, heads = (cache[n] for n in ("u", "q", "k", "v", "A", "z", "heads"))
    dh = q.shape[-1]
    # backward through out = z Wo^T
    gWo = np.einsum("kti,ktj->ij", gout, z, optimize=True)  # (m, m)
    gz = split_heads(gout @ Wo, heads)  # (K, heads, T, dh)
    # backward through z = A v
    gA = gz @ v.transpose(0, 1, 3, 2)  # (K, heads, T, T)
    gv = A.transpose(0, 1, 3, 2) @ gz  # (K, heads, T, dh)
    # backward through A = softmax(S), row by row: its Jacobian is diag(A) - A A^T, so
    # dL/dS = A * (dL/dA - sum_j dL/dA_j A_j)
    gS = A * (gA - (gA * A).sum(axis=-1, keepdims=True))  # (K, heads, T, T)
    # backward through the causal mask: a masked score was the constant -inf, so it gets no
    # gradient; A is exactly 0 there, which already made gS 0
    # backward through S = q k^T / sqrt(dh)
    gq = gS @ k / math.sqrt(dh)  # (K, heads, T, dh)
    gk = gS.transpose(0, 1, 3, 2) @ q / math.sqrt(dh)  # (K, heads, T, dh)
    # backward through q, k, v = u Wq^T, u Wk^T, u Wv^T: u fed all three
    gu = np.zeros_like(u)  # (K, T, m)
    grads = {"Wo": gWo}
    for name, W, g in (("Wq", Wq, gq), ("Wk", Wk, gk), ("Wv", Wv, gv)):
        g = merge_heads(g)  # (K, T, m)
        grads[name] = np.einsum("kti,ktj->ij", g, u, optimize=True)  # (m, m)
        gu += g @ W  # (K, T, m)
    return gu, grads
