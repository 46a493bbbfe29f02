"""What a recurrent language model does with its unbounded context, measured (aggregates only, never
per-token data): perplexity by distance to the previous paragraph mark, and the mixture with an n-gram.

Right after a paragraph mark ``<p>`` every model has little to go on; deep into a paragraph the
recurrent state holds dozens of words while an n-gram still sees its last n-1. Grouping the test
tokens by how many tokens separate them from the last ``<p>`` shows where the long context pays.
"""

from __future__ import annotations

import math

import numpy as np

from .mixture import em_weight, mixed_log_prob

# distance (tokens since the last paragraph mark, the target counted) -> bin
DISTANCE_BINS = [("1", 1, 1), ("2-5", 2, 5), ("6-20", 6, 20), ("21-50", 21, 50), ("51-100", 51, 100),
                 ("101-200", 101, 200), (">200", 201, None)]


def ppl(log_probs) -> float | None:
    """exp(-mean log P) (None for None)."""
    return None if log_probs is None else float(math.exp(-np.mean(log_probs)))


def distance_to_mark(inputs: np.ndarray, mark: int, start: int = 10 ** 6) -> np.ndarray:
    """For each target, 1 + the number of inputs read since the last ``mark`` (the target right after
    a mark has distance 1); ``start`` for targets with no mark before them in ``inputs``."""
    idx = np.arange(len(inputs))
    last = np.maximum.accumulate(np.where(inputs == mark, idx, -1))  # position of the last mark read
    return np.where(last >= 0, idx - last + 1, start)


def by_distance(distance: np.ndarray, logs: dict) -> list[dict]:
    """Perplexity of each model (``logs``: name -> (N,) log P) per distance bin."""
    out = []
    for name, lo, hi in DISTANCE_BINS:
        mask = (distance >= lo) & ((distance <= hi) if hi is not None else True)
        k = int(mask.sum())
        out.append({"bin": name, "tokens": k, **{m: (round(ppl(v[mask]), 3) if k else None) for m, v in logs.items()}})
    return out


def mixture_with(valid_a, valid_b, test_a, test_b) -> dict:
    """lam P_a + (1 - lam) P_b with lam fitted by EM on validation (section 4's mixture): the weight and
    the perplexities on validation and test (None without test log-probabilities)."""
    lam = float(em_weight(valid_a, valid_b)[0])
    return {"weight": round(lam, 5), "valid": ppl(mixed_log_prob(valid_a, valid_b, lam)),
            "test": None if test_a is None else ppl(mixed_log_prob(test_a, test_b, lam))}
