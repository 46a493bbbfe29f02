"""Training speed of the NPLM on 1 and 2 threads: examples/s, GFLOP/s as a fraction of this machine's
matmul peak on as many threads, the scaling from 1 to 2 threads, and (when PyTorch is installed, or
in ``/tmp/threads/torch_site``) the same model and update in PyTorch on the same threads, side by side in one run.

    .venv/bin/python benchmarks/bench_train.py [--rounds 15] [--seconds 0.4] [--threads 1,2] [--json F]

Shapes of Table 1: MLP1 (n 5, h 50, m 60, direct) and MLP9 (n 5, h 100, m 30, no direct), with
|V| = 17,907, at batch 128 and batch 1. One "update" is the full training step of
:meth:`FusedNPLM.sgd_update` (forward, softmax, backward, SGD with weight decay on all of C, H, U, W);
on T threads the output layer is split into T blocks of units (:mod:`nplm_edu.numerics.threads`).
FLOPs counted per example: 6 |V| D for the output layer (forward, dL/d[a x], dL/d[U W]; D = h +
(n-1)m with direct connections, h without) + 6 h (n-1)m for the hidden layer. The peak is the
best of a few 2048 x 2048 float32 numpy matmuls on the same threads. The measurements are many short
interleaved rounds (benchmarks/README.md, "How the 1 -> 2 thread figures are measured"): a speed is
the median over the rounds (the best round beside it), a ratio the median of the ratios within each
round, with its quartiles. Targets at batch 128: >= 1.25x PyTorch's examples/s; on 2 threads >= 1.7x
our own speed on one and our lead over PyTorch on 2 threads >= 85% of our lead on one (the medians).

The column "GEMMs" is a ceiling for these shapes: the examples/s of the output layer's three
matrix products alone ([a x] [U W]^T, [U W]^T dL/dy^T, dL/dy^T [a x]) in BLAS on the same threads,
with no softmax, no hidden layer and no update. The skinny (K x D) by (D x |V|) products of Table 1
(D = 100 to 290) run well below the square-matrix peak in any BLAS; "of GEMMs" is the share of that
ceiling our whole training step reaches.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads_common import (METHOD, OthersMeter, import_torch, interleaved_rounds, quartiles,  # noqa: E402
                            ratio_of_rounds, round_scaling, scaling_line, speed_fields, targets_met,
                            threads_from_argv, use_threads)

THREADS = threads_from_argv()  # before numpy and torch load

import numpy as np  # noqa: E402

STARTED = time.monotonic()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from nplm_edu.models.nplm import NPLMConfig  # noqa: E402
from nplm_edu.numerics.fused import FusedNPLM  # noqa: E402

V = 17_907
SHAPES = {"MLP1": dict(n=5, h=50, m=60, direct=True), "MLP9": dict(n=5, h=100, m=30, direct=False)}


def flops_per_example(n, h, m, direct) -> float:
    D = h + (n - 1) * m if direct else h
    return 6.0 * V * D + 6.0 * h * (n - 1) * m


def matmul_peak(seconds: float) -> float:
    """GFLOP/s of the best 2048^3 float32 matmul (numpy's BLAS, the same threads)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 2048, 2048), dtype=np.float32)
    out = np.empty_like(a)
    np.matmul(a, b, out=out)
    best, t_end = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t = time.perf_counter()
        np.matmul(a, b, out=out)
        best = max(best, 2 * 2048 ** 3 / (time.perf_counter() - t) / 1e9)
    return best


def batches(K, n, count, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, V, (K, n - 1)), rng.integers(0, V, K)) for _ in range(count)]


def gemm_step(shape, K):
    """The output layer's three BLAS products of one step, alone: the ceiling for these shapes."""
    n, h, m, direct = shape["n"], shape["h"], shape["m"], shape["direct"]
    D = h + (n - 1) * m if direct else h
    rng = np.random.default_rng(0)
    z = rng.standard_normal((K, D), dtype=np.float32)  # [a x]
    UW = rng.standard_normal((V, D), dtype=np.float32)  # [U W]
    y = np.empty((K, V), np.float32)
    gzT = np.empty((D, K), np.float32)
    gUW = np.empty((V, D), np.float32)

    def step(c, t):
        np.matmul(z, UW.T, out=y)  # y = [U W] [a x]   (K, |V|)
        np.matmul(UW.T, y.T, out=gzT)  # dL/d[a x]^T   (D, K)
        np.matmul(y.T, z, out=gUW)  # dL/d[U W]   (|V|, D)

    return step


def numpy_step(shape, K):
    """Our training step (forward, backward, SGD update) on a fresh MLP of the given shape."""
    model = FusedNPLM(NPLMConfig(V=V, dtype="float32", seed=0, **shape))
    return lambda c, t: model.sgd_update(c, t, 1e-3, 1e-4)


def old_step(package_dir: str):
    """``numpy_step`` of another checkout of the package (e.g. an older commit in a git worktree), loaded
    beside this one in the same process: its own module objects, so both run side by side."""
    import importlib

    mine = {k: v for k, v in sys.modules.items() if k == "nplm_edu" or k.startswith("nplm_edu.")}
    for k in mine:
        del sys.modules[k]
    sys.path.insert(0, package_dir)
    try:
        try:
            mod = importlib.import_module("nplm_edu.numerics.fused")
            cls, cfg = mod.FusedNPLM, mod.NPLMConfig
        except ImportError:
            mod = importlib.import_module("nplm_edu.model")  # the layout before the package was reshaped
            cls, cfg = mod.NPLM, mod.NPLMConfig
    finally:
        sys.path.remove(package_dir)
        for k in [k for k in sys.modules if k == "nplm_edu" or k.startswith("nplm_edu.")]:
            del sys.modules[k]
        sys.modules.update(mine)

    def make(shape, K):
        model = cls(cfg(V=V, dtype="float32", seed=0, **shape))
        return lambda c, t: model.sgd_update(c, t, 1e-3, 1e-4)

    return make


def compared_commit(package_dir: str | None) -> str | None:
    """The short commit hash of the checkout given to --compare-with (None if it has none)."""
    if not package_dir:
        return None
    import subprocess

    try:
        out = subprocess.run(["git", "-C", package_dir, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def torch_step(shape, K):
    """The same model and update in PyTorch: embedding, linear layers, cross-entropy, SGD with
    weight decay on C, H, U, W (not on the biases)."""
    import torch

    torch.manual_seed(0)
    n, h, m, direct = shape["n"], shape["h"], shape["m"], shape["direct"]
    nm1 = (n - 1) * m
    C = torch.nn.Embedding(V, m)
    hid = torch.nn.Linear(nm1, h)  # H, d
    U = torch.nn.Linear(h, V)  # U, b
    W = torch.nn.Linear(nm1, V, bias=False) if direct else None
    decayed = [C.weight, hid.weight, U.weight] + ([W.weight] if direct else [])
    opt = torch.optim.SGD([{"params": decayed, "weight_decay": 1e-4},
                           {"params": [hid.bias, U.bias], "weight_decay": 0.0}], lr=1e-3)

    def step(c, t):
        c = torch.from_numpy(c[:, ::-1].copy())
        t = torch.from_numpy(t)
        x = C(c).reshape(len(t), nm1)
        y = U(torch.tanh(hid(x)))
        if direct:
            y = y + W(x)
        loss = torch.nn.functional.cross_entropy(y, t)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()

    return step


def measure(shape, K, threads, have_torch, old, seconds, rounds) -> dict:
    """{T: {who: [examples/s of each round]}} for ours, the GEMM ceiling, torch and another checkout,
    every thread count and contender once in each round (:func:`threads_common.interleaved_rounds`)."""
    data = batches(K, shape["n"], 16)
    steps = {"ours": numpy_step(shape, K)}
    if K > 1:
        steps["gemm"] = gemm_step(shape, K)
    if have_torch:
        steps["torch"] = torch_step(shape, K)
    if old:
        steps["other"] = old(shape, K)
    return interleaved_rounds(steps, data, threads, have_torch, seconds, rounds, min_steps=3, warmup=2)


def row_of(name, shape, K, T, speeds, peak, have_torch, old) -> dict:
    """The row of one shape, batch size and thread count from its rounds ``speeds`` {who: [examples/s]}:
    each speed the median over the rounds (``*_best``: the best round), a ratio the median of the
    rounds' ratios."""
    med = {who: quartiles(v)[1] for who, v in speeds.items()}
    gf = med["ours"] * flops_per_example(**shape) / 1e9

    def ratio(other):
        return ratio_of_rounds(speeds["ours"], speeds[other])["median"]

    return {"shape": name, **shape, "V": V, "batch": K, "threads": T, "rounds": len(speeds["ours"]),
            **speed_fields(speeds["ours"], "ours_examples_per_s"), "gflops": round(gf, 2), "of_peak": round(gf / peak, 4),
            "gemm_ceiling_examples_per_s": round(med["gemm"], 1) if K > 1 else None,
            **(speed_fields(speeds["torch"], "torch_examples_per_s") if have_torch else {"torch_examples_per_s": None}),
            "ours_over_torch": ratio("torch") if have_torch else None,
            **({**speed_fields(speeds["other"], "other_examples_per_s"), "ours_over_other": ratio("other")} if old else {})}


def print_row(r: dict, have_torch: bool, old) -> None:
    ceiling = (f"{r['gemm_ceiling_examples_per_s']:10.0f} {r['ours_examples_per_s'] / r['gemm_ceiling_examples_per_s']:8.1%}"
               if r["batch"] > 1 else f"{'-':>10} {'-':>8}")  # at K = 1: matrix-vector products, no ceiling
    line = (f"{r['shape']:6} {r['batch']:5d} {r['threads']:7d} {r['ours_examples_per_s']:10.0f} {r['gflops']:8.1f} "
            f"{r['of_peak']:8.1%} {ceiling}")
    if have_torch:
        line += f" {r['torch_examples_per_s']:10.0f} {r['ours_over_torch']:10.2f}"
    if old:
        line += f" {r['other_examples_per_s']:10.0f} {r['ours_over_other']:10.3f}"
    print(line, flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))  # the first paragraph
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (the medians are kept)")
    ap.add_argument("--seconds", type=float, default=0.4, help="time per measurement in each round (half at batch 1)")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    ap.add_argument("--batches", default="128,1", help="batch sizes, comma-separated (default 128,1)")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    ap.add_argument("--compare-with", metavar="DIR", default=None,
                    help="a checkout of another version of the package (e.g. `git worktree add /tmp/old REV`): its "
                         "training step is measured beside ours, alternating rounds")
    ap.add_argument("--json", help="also write the results here (e.g. data/results/bench_threads.json)")
    args = ap.parse_args()
    if args.compare_with and not (Path(args.compare_with) / "nplm_edu" / "__init__.py").is_file():
        ap.error(f"--compare-with {args.compare_with}: no nplm_edu package in that folder (a checkout of this repository)")
    return args


def print_header(torch_version, old, peak: dict) -> None:
    from nplm_edu.experiments.common import machine
    from nplm_edu.numerics import blas

    print(f"{machine()}; threads {THREADS}; numpy {np.__version__}; fused BLAS gemm update: "
          f"{'yes' if blas._GEMM else 'no (numpy fallback)'}; torch: "
          f"{torch_version or 'not installed (skipped)'}")
    print("float32 matmul peak (2048^3, best): " + ", ".join(f"{peak[T]:.1f} GFLOP/s on {T}" for T in THREADS))
    print(f"{'shape':6} {'batch':>5} {'threads':>7} {'ours ex/s':>10} {'GFLOP/s':>8} {'of peak':>8} {'GEMMs ex/s':>10} "
          f"{'of GEMMs':>8}" + (f" {'torch ex/s':>10} {'ours/torch':>10}" if torch_version else "")
          + (f" {'other ex/s':>10} {'ours/other':>10}" if old else ""))


def measure_rows(batch_sizes, seconds: float, rounds: int, peak: dict, have_torch, old) -> tuple[list, list]:
    """Every shape and batch size, each printed as it is measured: (rows, the scaling from 1 to 2
    threads of each shape at batch 128)."""
    rows, scale = [], []
    for name, shape in SHAPES.items():
        for K in batch_sizes:
            speeds = measure(shape, K, THREADS, have_torch, old, seconds if K > 1 else seconds / 2, rounds)
            for T in THREADS:
                rows.append(row_of(name, shape, K, T, speeds[T], peak[T], have_torch, old))
                print_row(rows[-1], have_torch, old)
            if K == 128 and 1 in speeds and 2 in speeds:
                scale.append({"shape": name, "batch": 128, **round_scaling(speeds, have_torch)})
    for s in scale:
        print(scaling_line(f"{s['shape']} at batch 128", s))
    return rows, scale


def main() -> None:
    args = parse_args()
    torch_version = import_torch(args.no_torch)
    have_torch = torch_version is not None
    old = old_step(args.compare_with) if args.compare_with else None
    load_before = list(os.getloadavg())
    others = OthersMeter()
    peak = {}
    for T in THREADS:
        use_threads(T, have_torch)
        peak[T] = matmul_peak(3.0)
    print_header(torch_version, old, peak)
    rows, scale = measure_rows([int(k) for k in args.batches.split(",")], args.seconds, args.rounds, peak, have_torch, old)
    load_after = list(os.getloadavg())
    at128 = [r for r in rows if r["batch"] == 128]
    met = {"ours_over_torch_at_least_1.25": (all(r["ours_over_torch"] >= 1.25 for r in at128) if have_torch else None),
           **targets_met(scale, have_torch)}
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {others.line()}", flush=True)
    if args.json:
        from nplm_edu.experiments.common import command_line, write_results

        write_results(Path(args.json), {
            "threads": THREADS, "method": METHOD, "rounds": args.rounds, "seconds_per_measurement": args.seconds,
            "compared_with": args.compare_with,
            "compared_commit": compared_commit(args.compare_with), "torch": torch_version,
            "load_average_before": load_before, "others_cpu_share": round(others.share(), 3), "load_average_after": load_after,
            "matmul_peak_gflops": {str(T): round(peak[T], 2) for T in THREADS},
            "flops_per_example": "6 |V| D + 6 h (n-1) m, D = h + (n-1) m with direct connections, h without",
            "rows": rows, "scaling": scale, "targets_met": met}, STARTED, command_line())
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
