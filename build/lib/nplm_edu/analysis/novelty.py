"""Which test n-grams were never seen in training, and which would have been with a similar word.

The paper's argument (section 1.1): "the cat is walking in the bedroom" gets a high probability
even if never seen, because "a dog was running in a room" was seen and cat/dog, is/was ... have
similar features. On real text we test it token by token. For a test token w_t with context
(w_{t-n+1}, ..., w_{t-1}):

* ``seen``: the n-gram (w_{t-n+1}, ..., w_t) occurs in the training stream;
* ``neighbour_seen``: it does not, but replacing ONE context word by one of its k nearest
  neighbours (cosine similarity of the rows of C) gives an n-gram that does;
* ``no_neighbour``: neither.

A model that generalizes through similar words should beat the n-gram most where a neighbour
makes the n-gram seen. :func:`frequency_matched` gives a control with the same number of
substitutes, of about the same frequency, but unrelated to the word.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError


def ngram_keys(contexts: np.ndarray, targets: np.ndarray, V: int) -> np.ndarray:
    """Each window (context, target) as one int64 key (base-|V| digits), (K,)."""
    contexts = np.asarray(contexts, np.int64)
    if V ** (contexts.shape[1] + 1) >= 2 ** 63:
        raise UserError(f"n-grams of order {contexts.shape[1] + 1} over |V| = {V} do not fit in 64-bit keys")
    key = np.zeros(len(targets), np.int64)
    for j in range(contexts.shape[1]):
        key = key * V + contexts[:, j]
    return key * V + np.asarray(targets, np.int64)


def is_in(keys: np.ndarray, table: np.ndarray) -> np.ndarray:
    """keys (any shape) found in the sorted unique array ``table``: a bool array like keys."""
    i = np.minimum(np.searchsorted(table, keys), len(table) - 1)
    return table[i] == keys


def neighbour_seen(contexts, targets, train_table, neighbours: np.ndarray, V: int) -> np.ndarray:
    """For each window, whether replacing one context word w by one of ``neighbours[w]`` (|V|, k)
    (rows of -1 allowed: no neighbours) gives an n-gram of the sorted key array ``train_table``."""
    contexts = np.asarray(contexts, np.int64)
    out = np.zeros(len(targets), bool)
    for j in range(contexts.shape[1]):
        subs = neighbours[contexts[:, j]]  # (K, k)
        for c in range(subs.shape[1]):
            ctx = contexts.copy()
            ctx[:, j] = np.maximum(subs[:, c], 0)
            out |= (subs[:, c] >= 0) & is_in(ngram_keys(ctx, targets, V), train_table)
    return out


def frequency_matched(neighbours: np.ndarray, rng: np.random.Generator, spread: float = 0.1) -> np.ndarray:
    """A control for ``neighbours`` (|V|, k) when ids are in order of decreasing frequency (as our
    vocabularies are): each neighbour u replaced by a random id within +-spread of its rank u."""
    u = neighbours.astype(np.float64)
    lo = np.floor(u * (1 - spread))
    hi = np.ceil(u * (1 + spread)) + 1
    out = (lo + np.floor(rng.random(u.shape) * (hi - lo))).astype(np.int64)
    return np.where(neighbours >= 0, np.minimum(out, len(neighbours) - 1), -1)


def novelty_groups(contexts, targets, train_table, neighbours, V: int) -> dict[str, np.ndarray]:
    """Boolean masks (K,) of the three groups of the module docstring."""
    seen = is_in(ngram_keys(contexts, targets, V), train_table)
    near = ~seen & neighbour_seen(contexts, targets, train_table, neighbours, V)
    return {"seen": seen, "neighbour_seen": near, "no_neighbour": ~seen & ~near}


def compare(masks: dict, logs: dict, first: str, second: str) -> dict:
    """Per group: tokens, share, mean natural-log probability of each model, the difference
    ``first`` - ``second`` and how often ``first`` gives the higher probability (aggregates only)."""
    total = sum(int(m.sum()) for m in masks.values())
    out = {}
    for name, m in masks.items():
        k = int(m.sum())
        entry = {"tokens": k, "share": round(k / max(total, 1), 4)}
        for model, lp in logs.items():
            entry[f"mean_log_prob_{model}"] = round(float(lp[m].mean()), 4) if k else None
        entry[f"{first}_minus_{second}"] = round(float((logs[first][m] - logs[second][m]).mean()), 4) if k else None
        entry[f"{first}_higher"] = round(float(np.mean(logs[first][m] > logs[second][m])), 4) if k else None
        out[name] = entry
    return out
