"""What the benchmarks against PyTorch share: the thread counts asked for (read before numpy and
PyTorch load, so their thread pools can grow to the most), PyTorch imported when installed or from
``/tmp/threads/torch_site`` when that folder exists, switching all of them between measurements, and
a timed loop and alternating rounds of them, the scaling from 1 to 2 threads with its targets."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

TORCH_SITE = Path("/tmp/threads/torch_site")  # a PyTorch installed beside the project's environment


def threads_from_argv() -> list[int]:
    """The thread counts of ``--threads 1,2`` (default 1, 2); the env vars allow the most of them."""
    counts = [1, 2]
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            counts = [int(t) for t in sys.argv[i + 1].split(",")]
        elif a.startswith("--threads="):
            counts = [int(t) for t in a.split("=", 1)[1].split(",")]
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(max(counts))
    return counts


def import_torch(skip: bool = False):
    """PyTorch's version, or None (not installed, or skipped)."""
    if skip:
        return None
    if TORCH_SITE.is_dir() and str(TORCH_SITE) not in sys.path:
        sys.path.insert(0, str(TORCH_SITE))
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__


def use_threads(T: int, have_torch) -> None:
    """Our output blocks, numpy's BLAS and PyTorch on T threads from now on."""
    from nplm_edu.numerics.threads import set_threads

    set_threads(T)
    if have_torch:
        import torch

        torch.set_num_threads(T)


SETTLE = 0.3  # seconds of pause before each measurement (see time_loop)


def time_loop(step, data, seconds: float, min_steps: int = 2, warmup: int = 1) -> float:
    """Predicted words/s (examples/s) of ``step(X, Y)`` over the data (cycled) for about ``seconds``,
    wall clock, after a pause of SETTLE seconds and ``warmup`` steps. The pause lets the thread pools
    the previous measurement woke (numpy's OpenBLAS, PyTorch's) stop polling for work: for about a
    tenth of a second after a product on several threads, OpenBLAS's threads keep spinning on the
    cores the next contender needs."""
    time.sleep(SETTLE)
    for X, Y in data[:warmup]:
        step(X, Y)
    done, i, t0 = 0, 0, time.perf_counter()
    while True:
        X, Y = data[i % len(data)]
        step(X, Y)
        done, i = done + Y.size, i + 1  # numpy is not imported here: it must load after threads_from_argv
        if i >= min_steps and time.perf_counter() - t0 > seconds:
            break
    return done / (time.perf_counter() - t0)


METHOD = ("interleaved rounds: in each round every (thread count, contender) runs once for the same time, "
          "the order rotated by one each round; a speed is the median over the rounds, a ratio the median "
          "of the ratios within each round (quartiles beside it); the targets are judged on the medians")


def rotated(items: list, r: int) -> list:
    """The order of round r: ``items`` rotated left by r, so that over len(items) rounds each item
    runs once in every position (no contender always follows the same one).

    >>> rotated(["a", "b", "c"], 1), rotated(["a", "b", "c"], 4)
    (['b', 'c', 'a'], ['b', 'c', 'a'])
    """
    k = r % len(items) if items else 0
    return items[k:] + items[:k]


def interleaved_rounds(steps: dict, data, threads: list[int], have_torch, seconds: float, rounds: int,
                       warm_round: bool = False, **loop) -> dict:
    """{T: {who: [words/s in round 0, 1, ...]}}: in each round every (thread count, contender) runs
    once for ``seconds``, in :func:`rotated` order, so that the measurements of one round lie close
    together in time and a ratio within a round sees the machine in one state. ``warm_round``: one
    round first whose numbers are dropped (each contender's buffers and thread pools made);
    ``loop``: :func:`time_loop`'s ``min_steps`` and ``warmup``."""
    configs = [(t, who) for who in steps for t in threads]
    speeds = {t: {who: [] for who in steps} for t in threads}
    for r in range(-1 if warm_round else 0, rounds):
        for t, who in rotated(configs, r):
            use_threads(t, have_torch)
            v = time_loop(steps[who], data, seconds, **loop)
            if r >= 0:
                speeds[t][who].append(v)
    return speeds


# --------------------------------------------------------------------------- the statistics of the rounds
def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile) of the values, interpolated between order statistics
    (numpy's default percentiles; one value is its own quartiles).

    >>> quartiles([4.0, 1.0, 3.0, 2.0, 5.0])
    (2.0, 3.0, 4.0)
    """
    v = sorted(values)
    if not v:
        raise ValueError("no values")

    def at(q):
        x = q * (len(v) - 1)
        lo = int(x)
        return v[lo] + (x - lo) * (v[min(lo + 1, len(v) - 1)] - v[lo])

    return at(0.25), at(0.5), at(0.75)


def per_round(speeds: dict, fn) -> list[float]:
    """``fn(speeds of round r)`` for each round r, the speeds of a round given as {T: {who: words/s}}."""
    n = min(len(v) for by in speeds.values() for v in by.values())
    return [fn({t: {who: v[r] for who, v in by.items()} for t, by in speeds.items()}) for r in range(n)]


def summary(values: list[float], digits: int = 3) -> dict:
    """{"median", "iqr": [q1, q3]} of a list of per-round values, rounded."""
    q1, med, q3 = quartiles(values)
    return {"median": round(med, digits), "iqr": [round(q1, digits), round(q3, digits)]}


def round_scaling(speeds: dict, have_torch) -> dict:
    """The scaling from 1 to 2 threads of interleaved rounds ({1: {who: [...]}, 2: {...}}): in each
    round our speed on 2 threads over ours on 1 (and PyTorch's, and our lead over PyTorch on 2 over
    our lead on 1), from that round's measurements alone; the median over the rounds is the figure
    (``ours_2_over_1``, ``torch_2_over_1``, ``lead_kept``, judged against the targets), its quartiles
    beside it (``*_iqr``), and the ratio of the best rounds (``*_best``, as measured before)."""
    ratios = {"ours_2_over_1": per_round(speeds, lambda s: s[2]["ours"] / s[1]["ours"])}
    best = {t: {who: max(v) for who, v in by.items()} for t, by in speeds.items()}
    bests = {"ours_2_over_1": best[2]["ours"] / best[1]["ours"]}
    if have_torch:
        ratios["torch_2_over_1"] = per_round(speeds, lambda s: s[2]["torch"] / s[1]["torch"])
        ratios["lead_kept"] = per_round(
            speeds, lambda s: (s[2]["ours"] / s[2]["torch"]) / (s[1]["ours"] / s[1]["torch"]))
        bests["torch_2_over_1"] = best[2]["torch"] / best[1]["torch"]
        bests["lead_kept"] = (best[2]["ours"] / best[2]["torch"]) / (best[1]["ours"] / best[1]["torch"])
    out = {"rounds": len(ratios["ours_2_over_1"])}
    for k, v in ratios.items():
        s = summary(v)
        out.update({k: s["median"], f"{k}_iqr": s["iqr"], f"{k}_best": round(bests[k], 3)})
    out["ours_2_over_1_at_least_1.7"] = out["ours_2_over_1"] >= 1.7
    if have_torch:
        out["lead_kept_at_least_0.85"] = out["lead_kept"] >= 0.85
    return out


def ratio_of_rounds(a: list[float], b: list[float]) -> dict:
    """{"median", "iqr"} of a[r] / b[r] over the rounds r: each round's ratio from that round's two
    measurements alone (the machine's drift from round to round cancels), then their median and quartiles."""
    return summary([x / y for x, y in zip(a, b)])


def fast_vs_readable(fast, readable, data, seconds: float, rounds: int, unit: str, **loop) -> dict:
    """A fast path against its readable reference, one training step each on one thread, in
    :func:`interleaved_rounds` (a first round dropped; ``loop``: :func:`time_loop`'s): each speed the
    median over the rounds (``*_best``: the best round), ``fast_over_readable`` the median of the
    rounds' ratios with its quartiles. ``unit``: what the speeds count, e.g. "examples_per_s"."""
    sp = interleaved_rounds({"fast": fast, "readable": readable}, data, [1], None, seconds, rounds,
                            warm_round=True, **loop)[1]
    r = ratio_of_rounds(sp["fast"], sp["readable"])
    return {"threads": 1, "method": METHOD, "rounds": len(sp["fast"]), "seconds_per_measurement": seconds,
            **speed_fields(sp["fast"], f"fast_{unit}"), **speed_fields(sp["readable"], f"readable_{unit}"),
            "fast_over_readable": r["median"], "fast_over_readable_iqr": r["iqr"]}


def readable_line(label: str, row: dict, unit: str) -> str:
    """The printed line of :func:`fast_vs_readable`'s row."""
    q1, q3 = row["fast_over_readable_iqr"]
    return (f"{label}, one thread, median of {row['rounds']} rounds: fast {row[f'fast_{unit}']:,.0f}, readable "
            f"{row[f'readable_{unit}']:,.0f} {unit.replace('_per_s', '')}/s; fast/readable "
            f"x{row['fast_over_readable']:.2f} (quartiles {q1:.2f}-{q3:.2f})")


def speed_fields(speeds: list[float], name: str) -> dict:
    """{name: the median words/s over the rounds, name_best: the best round}."""
    return {name: round(quartiles(speeds)[1], 1), f"{name}_best": round(max(speeds), 1)}


def scaling_line(label: str, s: dict) -> str:
    def fig(k, fmt):
        iqr = s.get(f"{k}_iqr")
        return (f"{format(s[k], fmt)} (quartiles {format(iqr[0], fmt)}-{format(iqr[1], fmt)}, best-of "
                f"{format(s[k + '_best'], fmt)})" if iqr else format(s[k], fmt))

    return (f"{label}, 1 -> 2 threads, median of {s.get('rounds', '?')} rounds: ours x{fig('ours_2_over_1', '.2f')} "
            f"({'met' if s['ours_2_over_1_at_least_1.7'] else 'NOT met'}: >= 1.7)"
            + (f"; PyTorch x{fig('torch_2_over_1', '.2f')}; our lead over PyTorch kept {fig('lead_kept', '.0%')} "
               f"({'met' if s['lead_kept_at_least_0.85'] else 'NOT met'}: >= 85%)" if "lead_kept" in s else ""))


def targets_met(scale: list[dict], have_torch) -> dict:
    return {"scaling_at_least_1.7": all(s["ours_2_over_1_at_least_1.7"] for s in scale) if scale else None,
            "lead_kept_at_least_0.85": (all(s["lead_kept_at_least_0.85"] for s in scale) if scale and have_torch
                                        else None)}


class OthersMeter:
    """How much of the cores other processes used while we measured: the machine's busy CPU time
    (/proc/stat) minus this process's own, over the wall time times the cores. The load average
    cannot tell, since it counts our own threads."""

    def __init__(self):
        self.start = self._read()

    @staticmethod
    def _read():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        tick = os.sysconf("SC_CLK_TCK")
        return (sum(fields[:8]) - idle) / tick, time.process_time(), time.monotonic()

    def share(self) -> float:
        """The others' share of all the cores since the start (0 on a quiet machine)."""
        busy0, own0, wall0 = self.start
        busy1, own1, wall1 = self._read()
        return max(0.0, ((busy1 - busy0) - (own1 - own0)) / ((wall1 - wall0) * os.cpu_count()))

    def line(self) -> str:
        s = self.share()
        return (f"other processes used {s:.0%} of the {os.cpu_count()} cores during the measurements"
                + (": the numbers are low" if s > 0.05 else ""))
