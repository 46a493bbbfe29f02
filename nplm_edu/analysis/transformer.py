"""What a Transformer does with its window, measured: what a word costs as the window grows, and
which earlier words each position reads (its attention maps).

A causal Transformer trained on blocks of T words predicts all T of them in one pass
(:mod:`nplm_edu.training.blocks`). Per predicted word, the projections, the MLP and the output layer
cost the same at every T; attention's scores and weighted means cost T m multiply-adds each per
layer (the full T x T square is computed and the future masked to -inf, so half of it is thrown
away), so the cost per word grows linearly with the window and the cost per block quadratically.
:func:`multiply_adds_per_word` counts this; :func:`time_per_word` measures it.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ..models.attention import self_attention, self_attention_backward
from ..models.transformer import TransformerConfig
from ..numerics.transformer import FastTransformer


def multiply_adds_per_word(config: TransformerConfig, T: int) -> dict:
    """Multiply-adds of one forward pass per predicted word, for blocks of T words: attention's
    scores and weighted means (2 T m per layer, the masked half included), its four projections
    (4 m^2 per layer), the MLP (2 m d_ff per layer) and the output layer (|V| m)."""
    c = config
    parts = {"attention": c.layers * 2 * T * c.m, "projections": c.layers * 4 * c.m * c.m,
             "mlp": c.layers * 2 * c.m * c.d_ff, "output": c.V * c.m}
    return {**parts, "total": sum(parts.values())}


def time_per_word(config: TransformerConfig, contexts=(4, 8, 16, 32, 64, 128), words: int = 512,
                  rounds: int = 3, seed: int = 0) -> list[dict]:
    """For each window length T of ``contexts``: the CPU seconds of one training update
    (:class:`~nplm_edu.numerics.transformer.FastTransformer`'s loss and every gradient) on K = words // T
    blocks of T random words, and of the attention sublayers alone (forward and backward of every
    layer's self-attention), per predicted word. The lengths are measured in turn, ``rounds`` times,
    and each keeps its fastest round (the one least disturbed by other processes). Returns one row
    per T with the counted multiply-adds per word beside the times."""
    rng = np.random.default_rng(seed)
    cases = []
    for T in contexts:
        model = FastTransformer(replace(config, n_ctx=T))
        K = max(1, words // T)
        X, Y = rng.integers(0, config.V, (K, T)), rng.integers(0, config.V, (K, T))
        u = rng.standard_normal((K, T, config.m)).astype(config.dtype)  # (K, T, m) an attention input
        W = [model.params[f"0.{n}"] for n in ("Wq", "Wk", "Wv", "Wo")]
        cases.append((T, K, model, X, Y, u, W))
    best: dict[int, list] = {T: [np.inf, np.inf] for T, *_ in cases}
    for _ in range(rounds + 1):  # the first round warms the caches and buffers up and counts too
        for T, K, model, X, Y, u, W in cases:
            t0 = time.process_time()
            model.loss_and_grads(X, Y)
            t1 = time.process_time()
            out, cache = self_attention(u, *W, config.heads)
            self_attention_backward(out, cache, *W)
            t2 = time.process_time()
            best[T] = [min(best[T][0], t1 - t0), min(best[T][1], (t2 - t1) * config.layers)]
    rows = []
    for T, K, *_ in cases:
        update, attention = best[T]
        rows.append({"n_ctx": T, "K": K, "words": K * T, "update_seconds": round(update, 6),
                     "us_per_word": round(1e6 * update / (K * T), 3),
                     "attention_us_per_word": round(1e6 * attention / (K * T), 3),
                     "multiply_adds_per_word": multiply_adds_per_word(config, T)})
    return rows


def attention_maps(model, ids) -> np.ndarray:
    """Every layer's and head's attention weights on one window of words ``ids`` (T,):
    (layers, heads, T, T), row t the weights position t gives to positions 0 .. t (zero after t)."""
    cache = model.forward(np.asarray(ids)[None, :])
    return np.stack([block["att"]["A"][0] for block in cache["blocks"]])  # (layers, heads, T, T)


def top_reads(weights: np.ndarray, words: list[str], k: int = 2) -> list[tuple[str, list[tuple[str, float]]]]:
    """For each position of one head's map (T, T): its word and the k earlier words it weighs most,
    with their weights, largest first."""
    out = []
    for t, row in enumerate(weights):
        order = np.argsort(-row[:t + 1], kind="stable")[:k]
        out.append((words[t], [(words[j], float(row[j])) for j in order]))
    return out
