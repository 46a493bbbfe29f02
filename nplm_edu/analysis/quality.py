"""Over the seeds of a comparison: mean ± standard deviation (:func:`mean_std`), and time to quality, how
long a run took to come within a fraction of a reference's best validation perplexity, per seed and over
the seeds.

The reference is a method of the same results file, fixed by the comparison before any result is read
(the full softmax in the output-layer comparison; the NPLM with the recurrent rows' size and dropout
in the recurrent table): the mean over its seeds of each seed's best validation perplexity
(:func:`reference_of`). :func:`times_to_quality` gives every method's times against it, from the
epochs each seed's row keeps (``history``: per epoch ``valid_ppl``, wall ``seconds``, ``cpu_seconds``),
so a results file written before these times were kept gives them too, without training.

    ref, times = times_to_quality(doc["runs"], "nplm-dropout", doc["protocol"]["seeds"])
    times["lstm"]   # [within 5%, within 1%]: seeds that reached it, mean ± std of their wall and CPU seconds
"""

from __future__ import annotations

import math

import numpy as np

WITHIN = (0.05, 0.01)  # time to quality: within 5% and 1% of the reference's best validation perplexity


def mean_std(values) -> dict:
    """Mean, sample standard deviation (ddof 1; None for one value) and the values themselves.

    >>> mean_std([1.0, 2.0, 3.0])
    {'mean': 2.0, 'std': 1.0, 'n': 3, 'values': [1.0, 2.0, 3.0]}
    """
    v = np.asarray([float(x) for x in values], dtype=np.float64)
    if v.size == 0:
        return {"mean": None, "std": None, "n": 0, "values": []}
    std = float(np.std(v, ddof=1)) if v.size > 1 else None
    return {"mean": float(np.mean(v)), "std": std, "n": int(v.size), "values": v.tolist()}


def whole_epoch_cpu(history) -> list[float]:
    """The CPU seconds of each epoch of ``history`` (epoch rows) timed whole: an epoch without them, or
    timed only in part (``timing_partial``: resumed from a checkpoint inside it), left out.

    >>> whole_epoch_cpu([{"cpu_seconds": 10.0}, {"cpu_seconds": 3.0, "timing_partial": True}, {"epoch": 3}])
    [10.0]
    """
    return [e["cpu_seconds"] for e in history if e.get("cpu_seconds") and not e.get("timing_partial")]


def best_valid(epochs) -> float | None:
    """The lowest validation perplexity of a run's epoch rows, over those that have one (None: none has)."""
    return min((e["valid_ppl"] for e in epochs if "valid_ppl" in e), default=None)


def time_to_quality(history, reference_best: float, within=WITHIN, clock=("seconds", "cpu_seconds")) -> list[dict]:
    """When a run's validation perplexity first came within each fraction of ``within`` of
    ``reference_best`` (the reference's best): the epoch, and the wall and CPU seconds summed over the
    epochs up to it (``clock``: the keys of the epoch rows holding them; no CPU key: None); or epoch
    "never" with the best the run reached. ``history``: a trainer's history dict or its epoch rows."""
    epochs = history["epochs"] if isinstance(history, dict) else history
    wall_key, cpu_key = clock
    best = best_valid(epochs)
    out = []
    for w in within:
        target = reference_best * (1 + w)
        row = {"within": w, "target_ppl": target, "epoch": "never", "wall_seconds": None, "cpu_seconds": None,
               "best_valid_ppl": best}
        wall, cpu = 0.0, 0.0
        for e in epochs:
            wall += e.get(wall_key, 0.0)
            cpu = None if cpu is None or cpu_key not in e else cpu + e[cpu_key]
            if e.get("valid_ppl", math.inf) <= target:
                row.update(epoch=e["epoch"], wall_seconds=wall, cpu_seconds=cpu)
                break
        out.append(row)
    return out


def seeds_time_to_quality(histories: list, reference_best: float, within=WITHIN,
                          clock=("seconds", "cpu_seconds")) -> list[dict]:
    """:func:`time_to_quality` over the seeds' histories: for each fraction, how many seeds reached it,
    and mean ± std of the wall and CPU seconds of those that did (each seed's value kept); ``epochs``: each
    seed's epoch of reaching it, or "never"."""
    per_seed = [time_to_quality(h, reference_best, within, clock) for h in histories]
    out = []
    for i, w in enumerate(within):
        hits = [s[i] for s in per_seed if s[i]["epoch"] != "never"]
        out.append({"within": w, "target_ppl": reference_best * (1 + w), "reached": len(hits), "seeds": len(per_seed),
                    "epochs": [s[i]["epoch"] for s in per_seed],
                    "wall_seconds": mean_std(h["wall_seconds"] for h in hits),
                    "cpu_seconds": mean_std(h["cpu_seconds"] for h in hits if h["cpu_seconds"] is not None),
                    "best_valid_ppl": mean_std(b for s in per_seed if (b := s[i]["best_valid_ppl"]) is not None)})
    return out


def reference_of(runs: list[dict], method: str, seeds=None) -> dict | None:
    """The reference quality: the mean over ``method``'s seed rows (those with an epoch that has a validation
    perplexity) of each one's best (:func:`best_valid`); ``complete``: whether those are the seeds ``seeds``
    (the protocol's). None before the method has such a row."""
    rows = sorted((r for r in runs if r["method"] == method and best_valid(r.get("history") or []) is not None),
                  key=lambda r: r["seed"])
    if not rows:
        return None
    best = mean_std(best_valid(r["history"]) for r in rows)
    return {"method": method, "seeds": [r["seed"] for r in rows], "best_valid_ppl": best,
            "complete": [r["seed"] for r in rows] == list(seeds or [])}


def times_to_quality(runs: list[dict], method: str, seeds=None) -> tuple[dict | None, dict[str, list | None]]:
    """(:func:`reference_of` ``method``, and per method of ``runs`` in the order they first appear the
    :func:`seeds_time_to_quality` of its seed rows, by seed, against the reference's mean best; None for
    every method while the reference has no row)."""
    ref = reference_of(runs, method, seeds)
    by_method: dict[str, list] = {}
    for r in runs:
        by_method.setdefault(r["method"], []).append(r)
    return ref, {m: seeds_time_to_quality([r["history"] for r in sorted(rows, key=lambda r: r["seed"])],
                                          ref["best_valid_ppl"]["mean"]) if ref else None
                 for m, rows in by_method.items()}
