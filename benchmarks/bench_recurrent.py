"""Training speed of the LSTM and GRU language models: tokens/s of our training step, and (when PyTorch
is installed, or in ``/tmp/threads/torch_site``) of PyTorch's nn.LSTM or nn.GRU + nn.Linear + cross-entropy
+ SGD on the same shapes and threads.

    .venv/bin/python benchmarks/bench_recurrent.py [--seconds 10] [--threads 1,2] [--json F]

Shapes: |V| = 17,907 (Brown), m = h = 256 and 512, B = 32 streams, T = 35 steps, the full softmax and
(for the LSTM) the class-factored softmax (round(sqrt |V|) = 134 classes by frequency binning, Mikolov
et al. 2011).
Word ids are drawn from a Zipf distribution over the vocabulary (P(rank r) proportional to 1/r, as
in text), which is what makes the class-factored layer's cost realistic: frequent words sit in small
classes. One step is what the
trainer does per batch (:meth:`nplm_edu.training.stream.StreamBackend.update`): forward over T steps
from the carried state, the output layer for all T B positions, truncated BPTT, the gradient norm
clipped, SGD. PyTorch does the same: embedding, ``nn.LSTM`` or ``nn.GRU``, ``nn.Linear``,
``cross_entropy`` (mean over the T B tokens), ``clip_grad_norm_``, ``SGD``, the state carried and detached.
The GRU cells differ in one place: PyTorch's ``nn.GRU`` (as cuDNN) applies the reset gate after the
matrix, r_t * (U^n h_{t-1} + b^n), while Cho et al. (2014) and ours apply it before, U^n (r_t * h_{t-1});
the cost is the same (one (B, h) x (h, h) product and one elementwise product a step).
FLOPs per token: 6 |V| h for the output layer (logits, dL/dh, dL/dU) + 6 (G h)(m + h) for the gates
(G = 4 for the LSTM, 3 for the GRU).
On T threads our full softmax is split into T blocks of output units (:mod:`nplm_edu.numerics.threads`).
Ours and PyTorch's, on every thread count, alternate in rounds and the best round of each counts: on a
shared, noisy machine that is fairer than one long run each; the load average before and after is
reported. Targets: >= 1.0x PyTorch on 1 and 2 threads; on 2 threads >= 1.7x our own speed on one and
our lead over PyTorch on 2 threads >= 85% of our lead on one.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads_common import (OthersMeter, best_of_rounds, import_torch, scaling, scaling_line, targets_met,  # noqa: E402
                            threads_from_argv, use_threads)

THREADS = threads_from_argv()  # before numpy and torch load

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nplm_edu.models.class_softmax import ClassSoftmax, frequency_classes  # noqa: E402
from nplm_edu.models.rnn import RecurrentConfig  # noqa: E402
from nplm_edu.numerics.recurrent import recurrent_model  # noqa: E402
from nplm_edu.training.stream import StreamBackend, StreamConfig  # noqa: E402
from nplm_edu.training.trainer import TrainConfig  # noqa: E402

V, B, T = 17_907, 32, 35
HIDDEN = (256, 512)
CELLS = {"lstm": 4, "gru": 3}  # the cells measured, and their gates (G)


def flops_per_token(h: int, m: int, cell: str = "lstm") -> float:
    return 6.0 * V * h + 6.0 * CELLS[cell] * h * (m + h)


def matmul_peak(seconds: float) -> float:
    """GFLOP/s of the best 2048^3 float32 matmul (numpy's BLAS, the same threads)."""
    a, b = np.random.default_rng(0).standard_normal((2, 2048, 2048), dtype=np.float32)
    out = np.empty_like(a)
    np.matmul(a, b, out=out)
    best, t_end = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t = time.perf_counter()
        np.matmul(a, b, out=out)
        best = max(best, 2 * 2048 ** 3 / (time.perf_counter() - t) / 1e9)
    return best


ZIPF = 1.0 / np.arange(1, V + 1)  # word id r - 1 has rank r


def batches(count: int, seed: int = 0):
    """``count`` batches (X, Y) of (B, T) word ids drawn from the Zipf distribution."""
    rng = np.random.default_rng(seed)
    p = ZIPF / ZIPF.sum()
    return [(rng.choice(V, (B, T), p=p), rng.choice(V, (B, T), p=p)) for _ in range(count)]


def numpy_step(h: int, output: str = "full", cell: str = "lstm"):
    """Our training step, as the trainer calls it (no dropout); ``output`` "full" or "class"."""
    layer = None
    if output == "class":
        counts = np.round(1e6 * ZIPF / ZIPF.sum()).astype(np.int64)  # expected counts of a million tokens
        layer = ClassSoftmax(V, h, frequency_classes(counts, round(np.sqrt(V))))
    model = recurrent_model(RecurrentConfig(V=V, cell=cell, m=h, h=h, seed=0), layer)
    cfg = TrainConfig(batch=B, lr=1.0, weight_decay=0.0)
    backend = StreamBackend(model, cfg, StreamConfig(T=T, clip=0.25))
    state = {"first": True}

    def step(X, Y):
        backend.update(X, Y, None, state["first"], 1.0)
        state["first"] = False

    return step


def torch_step(h: int, cell: str = "lstm"):
    import torch

    torch.manual_seed(0)
    rnn = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[cell](h, h, batch_first=True)
    emb, out = torch.nn.Embedding(V, h), torch.nn.Linear(h, V)
    params = list(emb.parameters()) + list(rnn.parameters()) + list(out.parameters())
    opt = torch.optim.SGD(params, lr=1.0)
    state = {"hc": None}

    def step(X, Y):
        x, y = torch.from_numpy(X), torch.from_numpy(Y)
        hs, hc = rnn(emb(x), state["hc"])
        state["hc"] = hc.detach() if cell == "gru" else tuple(s.detach() for s in hc)  # truncated BPTT: no gradient into it
        loss = torch.nn.functional.cross_entropy(out(hs).reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.25)
        opt.step()

    return step


def measure(h: int, cell: str, torch_version, seconds: float, rounds: int = 3) -> dict:
    """{T: {who: best tokens/s}}, every thread count and contender alternating in each round."""
    steps = {"ours": numpy_step(h, cell=cell)}
    if cell == "lstm":
        steps["class"] = numpy_step(h, "class")
    if torch_version:
        steps["torch"] = torch_step(h, cell)
    return best_of_rounds(steps, batches(4), THREADS, torch_version, seconds, rounds)


def table_rows(cell: str, h: int, best: dict, peak: dict, torch_version) -> list[dict]:
    """One row per thread count for a cell and size, printed as it is made."""
    rows = []
    for t in THREADS:
        b = best[t]
        gf = b["ours"] * flops_per_token(h, h, cell) / 1e9
        cls = b.get("class")
        line = (f"{cell:>4} {h:4d} {t:7d} {b['ours']:10.0f} {gf:8.1f} {gf / peak[t]:8.1%} "
                + (f"{cls:11.0f} {cls / b['ours']:10.2f}" if cls else f"{'-':>11} {'-':>10}"))
        if torch_version:
            line += f" {b['torch']:11.0f} {b['ours'] / b['torch']:10.2f}"
        print(line, flush=True)
        rows.append({"cell": cell, "h": h, "m": h, "V": V, "B": B, "T": T, "threads": t, "output": "full softmax",
                     "ours_tokens_per_s": round(b["ours"], 1), "gflops": round(gf, 2),
                     "of_peak": round(gf / peak[t], 4),
                     "class_softmax_tokens_per_s": round(cls, 1) if cls else None,
                     "class_over_full": round(cls / b["ours"], 3) if cls else None,
                     "torch_tokens_per_s": round(b["torch"], 1) if torch_version else None,
                     "ours_over_torch": round(b["ours"] / b["torch"], 3) if torch_version else None})
    return rows


def scalings(rows: list[dict], cells: list[str], torch_version) -> list[dict]:
    """The scaling from 1 to 2 threads of each cell and size, printed."""
    scale = []
    for cell in cells:
        for h in HIDDEN:
            by_t = {r["threads"]: r for r in rows if r["h"] == h and r["cell"] == cell}
            if 1 in by_t and 2 in by_t:
                scale.append({"cell": cell, "h": h, **scaling(by_t[1], by_t[2], "tokens_per_s", torch_version)})
                print(scaling_line(f"{cell.upper()} h {h}", scale[-1]))
    return scale


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))  # the first paragraph
    ap.add_argument("--seconds", type=float, default=10.0, help="time per measurement (split into rounds)")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    ap.add_argument("--cells", default=",".join(CELLS), help="cells, comma-separated (default lstm,gru)")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    ap.add_argument("--json", help="also write the results here (e.g. data/results/bench_recurrent_threads.json)")
    args = ap.parse_args()
    cells = [c for c in args.cells.split(",") if c]
    if any(c not in CELLS for c in cells):
        ap.error(f"--cells: choose from {', '.join(CELLS)}")
    started = time.monotonic()
    torch_version = import_torch(args.no_torch)
    from nplm_edu.experiments.common import machine

    load_before = list(os.getloadavg())
    others = OthersMeter()
    print(f"{machine()}; threads {THREADS}; numpy {np.__version__}; torch: {torch_version or 'not installed (skipped)'}; "
          f"load average {load_before[0]:.2f}")
    peak = {}
    for t in THREADS:
        use_threads(t, torch_version)
        peak[t] = matmul_peak(min(3.0, args.seconds))
    print("float32 matmul peak (2048^3, best): " + ", ".join(f"{peak[t]:.1f} GFLOP/s on {t}" for t in THREADS))
    print(f"{'cell':>4} {'h':>4} {'threads':>7} {'ours tok/s':>10} {'GFLOP/s':>8} {'of peak':>8} {'class tok/s':>11} "
          f"{'class/full':>10}" + (f" {'torch tok/s':>11} {'ours/torch':>10}" if torch_version else ""))
    rows = []
    for cell in cells:
        for h in HIDDEN:
            rows += table_rows(cell, h, measure(h, cell, torch_version, args.seconds), peak, torch_version)
    scale = scalings(rows, cells, torch_version)
    load_after = list(os.getloadavg())
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {others.line()}", flush=True)
    if args.json:
        from nplm_edu.experiments.common import command_line, write_results

        met = {"ours_over_torch_at_least_1.0": (all(r["ours_over_torch"] >= 1.0 for r in rows) if torch_version
                                                else None), **targets_met(scale, torch_version)}
        write_results(Path(args.json), {
            "threads": THREADS, "torch": torch_version, "load_average_before": load_before, "others_cpu_share": round(others.share(), 3),
            "load_average_after": load_after, "matmul_peak_gflops": {str(t): round(peak[t], 2) for t in THREADS},
            "flops_per_token": "6 |V| h + 6 (G h)(m + h), G = 4 (LSTM), 3 (GRU)", "rows": rows, "scaling": scale, "targets_met": met},
            started, command=command_line())
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
