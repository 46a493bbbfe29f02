"""Time to quality: how long a run took to come within a fraction of a reference's best validation
perplexity (the full softmax's, in the output-layer comparison), per seed and over the seeds."""

from __future__ import annotations

import math

from .protocol import mean_std

WITHIN = (0.05, 0.01)  # time to quality: within 5% and 1% of the reference's best validation perplexity


def time_to_quality(history, reference_best: float, within=WITHIN, clock=("seconds", "cpu_seconds")) -> list[dict]:
    """When a run's validation perplexity first came within each fraction of ``within`` of
    ``reference_best`` (the full softmax's best): the epoch, and the wall and CPU seconds summed over the
    epochs up to it (``clock``: the keys of the epoch rows holding them; no CPU key: None); or epoch
    "never" with the best the run reached. ``history``: a trainer's history dict or its epoch rows."""
    epochs = history["epochs"] if isinstance(history, dict) else history
    wall_key, cpu_key = clock
    best = min((e["valid_ppl"] for e in epochs if "valid_ppl" in e), default=None)
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
    and mean ± std of the wall and CPU seconds of those that did (each seed's value kept)."""
    per_seed = [time_to_quality(h, reference_best, within, clock) for h in histories]
    out = []
    for i, w in enumerate(within):
        hits = [s[i] for s in per_seed if s[i]["epoch"] != "never"]
        out.append({"within": w, "target_ppl": reference_best * (1 + w), "reached": len(hits), "seeds": len(per_seed),
                    "wall_seconds": mean_std(h["wall_seconds"] for h in hits),
                    "cpu_seconds": mean_std(h["cpu_seconds"] for h in hits if h["cpu_seconds"] is not None),
                    "best_valid_ppl": mean_std(b for s in per_seed if (b := s[i]["best_valid_ppl"]) is not None)})
    return out
