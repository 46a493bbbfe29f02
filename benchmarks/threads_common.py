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


def best_of_rounds(steps: dict, data, threads: list[int], have_torch, seconds: float, rounds: int = 3,
                   **loop) -> dict:
    """{T: {who: best words/s}}: every thread count and contender alternating in each round (on a
    shared, noisy machine fairer than one long run each), ``seconds`` split among the rounds;
    ``loop``: :func:`time_loop`'s ``min_steps`` and ``warmup``."""
    best = {t: dict.fromkeys(steps, 0.0) for t in threads}
    for _ in range(rounds):
        for t in threads:
            use_threads(t, have_torch)
            for who, step in steps.items():
                best[t][who] = max(best[t][who], time_loop(step, data, seconds / rounds, **loop))
    return best


def scaling(one: dict, two: dict, speed: str, have_torch) -> dict:
    """Rows on 1 and 2 threads -> our speed-up, PyTorch's, and whether the targets hold (on 2 threads
    at least 1.7x our speed on one; our lead over PyTorch on 2 at least 85% of our lead on one)."""
    s = {"ours_2_over_1": round(two[f"ours_{speed}"] / one[f"ours_{speed}"], 3)}
    s["ours_2_over_1_at_least_1.7"] = s["ours_2_over_1"] >= 1.7
    if have_torch:
        s["torch_2_over_1"] = round(two[f"torch_{speed}"] / one[f"torch_{speed}"], 3)
        s["lead_kept"] = round(two["ours_over_torch"] / one["ours_over_torch"], 3)
        s["lead_kept_at_least_0.85"] = s["lead_kept"] >= 0.85
    return s


def scaling_line(label: str, s: dict) -> str:
    return (f"{label}, 1 -> 2 threads: ours x{s['ours_2_over_1']:.2f} "
            f"({'met' if s['ours_2_over_1_at_least_1.7'] else 'NOT met'}: >= 1.7)"
            + (f"; PyTorch x{s['torch_2_over_1']:.2f}; our lead over PyTorch kept {s['lead_kept']:.0%} "
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
