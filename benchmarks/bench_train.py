"""Training speed of the NPLM: examples/s, GFLOP/s as a fraction of this machine's matmul peak,
and (when PyTorch is installed) the same model and update in PyTorch on the same threads.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_train.py [--seconds 5] [--threads 2]

Shapes of Table 1: MLP1 (n 5, h 50, m 60, direct) and MLP9 (n 5, h 100, m 30, no direct), with
|V| = 17,907, at batch 128 and batch 1. One "update" is the full training step of
:meth:`FusedNPLM.sgd_update` (forward, softmax, backward, SGD with weight decay on all of C, H, U, W).
FLOPs counted per example: 6 |V| D for the output layer (forward, dL/d[a x], dL/d[U W]; D = h +
(n-1)m with direct connections, h without) + 6 h (n-1)m for the hidden layer. The peak is the
best of a few 2048 x 2048 float32 numpy matmuls. The machine is shared: timings are noisy, run twice.
Targets at batch 128: >= 65% of the matmul peak, >= 1.25x PyTorch's examples/s.

The column "GEMMs" is a ceiling for these shapes: the examples/s of the output layer's three
matrix products alone ([a x] [U W]^T, [U W]^T dL/dy^T, dL/dy^T [a x]), with no softmax, no
hidden layer and no update. The skinny (K x D) by (D x |V|) products of Table 1 (D = 100 to 290)
run well below the square-matrix peak in any BLAS; "of GEMMs" is the share of that ceiling
our whole training step reaches.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def _threads_from_argv() -> int:
    # thread pools are sized when numpy / torch load: set the env vars before importing them
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return int(sys.argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))


THREADS = _threads_from_argv()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(THREADS)

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


def time_loop(step, data, seconds: float, min_steps: int) -> float:
    """Examples/s of ``step`` over the data (cycled) for about ``seconds`` after 2 warm-up steps."""
    for c, t in data[:2]:
        step(c, t)
    done, i, t0 = 0, 0, time.perf_counter()
    while True:
        c, t = data[i % len(data)]
        step(c, t)
        done += len(t)
        i += 1
        if i >= min_steps and time.perf_counter() - t0 > seconds:
            break
    return done / (time.perf_counter() - t0)


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


def torch_step(shape, K):
    """The same model and update in PyTorch: embedding, linear layers, cross-entropy, SGD with
    weight decay on C, H, U, W (not on the biases)."""
    import torch

    torch.set_num_threads(THREADS)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))  # the first paragraph
    ap.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
    ap.add_argument("--threads", type=int, default=THREADS, help="BLAS / torch threads (default OMP_NUM_THREADS)")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    ap.add_argument("--compare-with", metavar="DIR", default=None,
                    help="a checkout of another version of the package (e.g. `git worktree add /tmp/old REV`): its "
                         "training step is measured beside ours, alternating rounds")
    ap.add_argument("--json", help="also write the results here (e.g. data/results/bench_train.json)")
    args = ap.parse_args()
    try:
        if args.no_torch:
            raise ImportError
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    if args.compare_with and not (Path(args.compare_with) / "nplm_edu" / "__init__.py").is_file():
        ap.error(f"--compare-with {args.compare_with}: no nplm_edu package in that folder (a checkout of this repository)")
    old = old_step(args.compare_with) if args.compare_with else None
    from nplm_edu.numerics import blas

    print(f"threads {THREADS}; numpy {np.__version__}; fused BLAS gemm update: "
          f"{'yes' if blas._GEMM else 'no (numpy fallback)'}; torch: "
          f"{torch.__version__ if have_torch else 'not installed (skipped)'}")
    load_before = list(os.getloadavg())
    peak = matmul_peak(min(args.seconds, 3.0))
    print(f"float32 matmul peak (2048^3, best): {peak:.1f} GFLOP/s")
    print(f"{'shape':6} {'batch':>5} {'ours ex/s':>10} {'GFLOP/s':>8} {'of peak':>8} {'GEMMs ex/s':>10} "
          f"{'of GEMMs':>8}" + (f" {'torch ex/s':>10} {'ours/torch':>10}" if have_torch else "")
          + (f" {'other ex/s':>10} {'ours/other':>10}" if old else ""))
    rounds = 3  # ours and torch alternate, best round of each: fairer on a shared, noisy machine
    rows = []
    for name, shape in SHAPES.items():
        for K in (128, 1):
            secs = (args.seconds if K > 1 else args.seconds / 2) / rounds
            data = batches(K, shape["n"], 16)
            steps = {"ours": numpy_step(shape, K)}
            if K > 1:
                steps["gemm"] = gemm_step(shape, K)
            if have_torch:
                steps["torch"] = torch_step(shape, K)
            if old:
                steps["other"] = old(shape, K)
            best = dict.fromkeys(steps, 0.0)
            for _ in range(rounds):
                for who, step in steps.items():
                    best[who] = max(best[who], time_loop(step, data, secs, 3))
            gf = best["ours"] * flops_per_example(**shape) / 1e9
            # at K = 1 the products are matrix-vector ones and our fused update beats the three separate
            # calls: no ceiling to report there
            ceiling = (f"{best['gemm']:10.0f} {best['ours'] / best['gemm']:8.1%}" if K > 1 else f"{'-':>10} {'-':>8}")
            line = f"{name:6} {K:5d} {best['ours']:10.0f} {gf:8.1f} {gf / peak:8.1%} {ceiling}"
            if have_torch:
                line += f" {best['torch']:10.0f} {best['ours'] / best['torch']:10.2f}"
            if old:
                line += f" {best['other']:10.0f} {best['ours'] / best['other']:10.3f}"
            print(line, flush=True)
            rows.append({"shape": name, **shape, "V": V, "batch": K, "ours_examples_per_s": round(best["ours"], 1),
                         "gflops": round(gf, 2), "of_peak": round(gf / peak, 4),
                         "gemm_ceiling_examples_per_s": round(best["gemm"], 1) if K > 1 else None,
                         "torch_examples_per_s": round(best["torch"], 1) if have_torch else None,
                         "ours_over_torch": round(best["ours"] / best["torch"], 3) if have_torch else None,
                         **({"other_examples_per_s": round(best["other"], 1),
                             "ours_over_other": round(best["ours"] / best["other"], 3)} if old else {})})
    peak_end = matmul_peak(min(args.seconds, 3.0))
    print(f"float32 matmul peak again at the end: {peak_end:.1f} GFLOP/s "
          "(a large drop means other jobs took the cores meanwhile)")
    at128 = [r for r in rows if r["batch"] == 128]
    met = {"of_peak_at_least_0.65": all(r["of_peak"] >= 0.65 for r in at128),
           "ours_over_torch_at_least_1.25": (all(r["ours_over_torch"] >= 1.25 for r in at128) if have_torch
                                             else None)}
    print(f"targets at batch 128: >= 65% of peak {'met' if met['of_peak_at_least_0.65'] else 'NOT met'}; "
          f">= 1.25x PyTorch " + {True: "met", False: "NOT met", None: "not measured (no torch)"}[
              met["ours_over_torch_at_least_1.25"]])
    if args.json:
        from nplm_edu.experiments.common import command_line, write_results

        write_results(Path(args.json), {
            "threads": THREADS, "compared_with": args.compare_with, "torch": torch.__version__ if have_torch else None,
            "load_average_before": load_before, "load_average_after": list(os.getloadavg()),
            "matmul_peak_gflops": round(peak, 2), "matmul_peak_gflops_at_end": round(peak_end, 2),
            "flops_per_example": "6 |V| D + 6 h (n-1) m, D = h + (n-1) m with direct connections, h without",
            "rows": rows, "targets_met": met}, STARTED, command_line())
        print(f"wrote {args.json}")

if __name__ == "__main__":
    main()
