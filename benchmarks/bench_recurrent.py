"""Training speed of the LSTM and GRU language models: tokens/s of our training step, and (when PyTorch
is installed, or in ``/tmp/threads/torch_site``) of PyTorch's nn.LSTM or nn.GRU + nn.Linear + cross-entropy
+ SGD on the same shapes and threads.

    .venv/bin/python benchmarks/bench_recurrent.py [--rounds 11] [--seconds 0.5] [--threads 1,2] [--json F]

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
Ours and PyTorch's, on every thread count, run in many short interleaved rounds (benchmarks/README.md,
"How the 1 -> 2 thread figures are measured"; one round first is dropped, then each measurement is at
least one whole step): a speed is the median over the rounds (the best round beside it), a ratio the
median of the ratios within each round, with its quartiles. Targets: >= 1.0x PyTorch on 1 and 2
threads; on 2 threads >= 1.7x our own speed on one and our lead over PyTorch on 2 threads >= 85% of our
lead on one (the medians).

``--readable`` times instead the GRU's fast step (:class:`~nplm_edu.numerics.recurrent.FastGRU`) against
the readable one (:class:`~nplm_edu.models.gru.GRU`), the same step and shapes on one thread, in the same
interleaved rounds: the median of the rounds' fast/readable ratios with its quartiles (``--json``: e.g.
``data/results/bench_gru_readable.json``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads_common import (METHOD, OthersMeter, fast_vs_readable, import_torch, interleaved_rounds,  # noqa: E402
                            per_round, quartiles, ratio_of_rounds, readable_line, round_scaling, scaling_line,
                            speed_fields, summary, targets_met, threads_from_argv, use_threads)

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


def numpy_step(h: int, output: str = "full", cell: str = "lstm", fast: bool = True):
    """Our training step, as the trainer calls it (no dropout); ``output`` "full" or "class"; ``fast``
    False: the readable reference model (:mod:`nplm_edu.models.gru`, ...) instead of the fast one."""
    layer = None
    if output == "class":
        counts = np.round(1e6 * ZIPF / ZIPF.sum()).astype(np.int64)  # expected counts of a million tokens
        layer = ClassSoftmax(V, h, frequency_classes(counts, round(np.sqrt(V))))
    model = recurrent_model(RecurrentConfig(V=V, cell=cell, m=h, h=h, seed=0), layer, fast=fast)
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


def measure(h: int, cell: str, torch_version, seconds: float, rounds: int) -> dict:
    """{T: {who: [tokens/s of each round]}}, every thread count and contender once in each round
    (:func:`threads_common.interleaved_rounds`; a first round dropped, then at least one step each)."""
    steps = {"ours": numpy_step(h, cell=cell)}
    if cell == "lstm":
        steps["class"] = numpy_step(h, "class")
    if torch_version:
        steps["torch"] = torch_step(h, cell)
    return interleaved_rounds(steps, batches(4), THREADS, torch_version, seconds, rounds, warm_round=True,
                              min_steps=1, warmup=0)


def table_rows(cell: str, h: int, speeds: dict, peak: dict, torch_version) -> list[dict]:
    """One row per thread count for a cell and size from its rounds, printed as it is made: each
    speed the median over the rounds (``*_best``: the best round), a ratio the median of the rounds' ratios."""
    rows = []
    for t in THREADS:
        sp = speeds[t]
        b = {who: quartiles(v)[1] for who, v in sp.items()}
        gf = b["ours"] * flops_per_token(h, h, cell) / 1e9
        cls = b.get("class")
        line = (f"{cell:>4} {h:4d} {t:7d} {b['ours']:10.0f} {gf:8.1f} {gf / peak[t]:8.1%} "
                + (f"{cls:11.0f} {cls / b['ours']:10.2f}" if cls else f"{'-':>11} {'-':>10}"))
        if torch_version:
            vs_torch = ratio_of_rounds(sp["ours"], sp["torch"])["median"]
            line += f" {b['torch']:11.0f} {vs_torch:10.2f}"
        print(line, flush=True)
        rows.append({"cell": cell, "h": h, "m": h, "V": V, "B": B, "T": T, "threads": t, "output": "full softmax",
                     "rounds": len(sp["ours"]), **speed_fields(sp["ours"], "ours_tokens_per_s"), "gflops": round(gf, 2),
                     "of_peak": round(gf / peak[t], 4),
                     **(speed_fields(sp["class"], "class_softmax_tokens_per_s") if cls else
                        {"class_softmax_tokens_per_s": None}),
                     "class_over_full": round(cls / b["ours"], 3) if cls else None,
                     **(speed_fields(sp["torch"], "torch_tokens_per_s") if torch_version else {"torch_tokens_per_s": None}),
                     "ours_over_torch": round(vs_torch, 3) if torch_version else None})
    return rows


def class_scaling(speeds: dict) -> dict:
    """The class-factored output layer's scaling from 1 to 2 threads: the median of the rounds' ratios."""
    s = summary(per_round(speeds, lambda r: r[2]["class"] / r[1]["class"]))
    return {"class_2_over_1": s["median"], "class_2_over_1_iqr": s["iqr"]}


def readable_rows(seconds: float, rounds: int) -> list[dict]:
    """``--readable``: the GRU's fast step (:class:`nplm_edu.numerics.recurrent.FastGRU`) against the
    readable one (:class:`nplm_edu.models.gru.GRU`), float32, one thread, at every size of HIDDEN."""
    rows = []
    for h in HIDDEN:
        row = fast_vs_readable(numpy_step(h, cell="gru"), numpy_step(h, cell="gru", fast=False), batches(4),
                               seconds, rounds, "tokens_per_s", min_steps=1, warmup=0)
        rows.append({"cell": "gru", "h": h, "m": h, "V": V, "B": B, "T": T, "output": "full softmax", **row})
        print(readable_line(f"GRU h {h}", row, "tokens_per_s"), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))  # the first paragraph
    ap.add_argument("--rounds", type=int, default=11, help="interleaved rounds (the medians are kept)")
    ap.add_argument("--seconds", type=float, default=0.5, help="time per measurement in each round (at least one step)")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    ap.add_argument("--cells", default=",".join(CELLS), help="cells, comma-separated (default lstm,gru)")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch even if installed")
    ap.add_argument("--readable", action="store_true",
                    help="time the GRU's fast step against its readable reference instead (one thread)")
    ap.add_argument("--json", help="also write the results here (e.g. data/results/bench_recurrent_threads.json)")
    args = ap.parse_args()
    if args.readable:
        run_readable(args)
        return
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
        peak[t] = matmul_peak(3.0)
    print("float32 matmul peak (2048^3, best): " + ", ".join(f"{peak[t]:.1f} GFLOP/s on {t}" for t in THREADS))
    print(f"{'cell':>4} {'h':>4} {'threads':>7} {'ours tok/s':>10} {'GFLOP/s':>8} {'of peak':>8} {'class tok/s':>11} "
          f"{'class/full':>10}" + (f" {'torch tok/s':>11} {'ours/torch':>10}" if torch_version else ""))
    rows, scale = [], []
    for cell in cells:
        for h in HIDDEN:
            speeds = measure(h, cell, torch_version, args.seconds, args.rounds)
            rows += table_rows(cell, h, speeds, peak, torch_version)
            if 1 in speeds and 2 in speeds:
                scale.append({"cell": cell, "h": h, **round_scaling(speeds, torch_version),
                              **(class_scaling(speeds) if "class" in speeds[1] else {})})
    for s in scale:
        print(scaling_line(f"{s['cell'].upper()} h {s['h']}", s)
              + (f"; class-factored output x{s['class_2_over_1']:.2f}" if "class_2_over_1" in s else ""))
    load_after = list(os.getloadavg())
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {others.line()}", flush=True)
    if args.json:
        from nplm_edu.experiments.common import command_line, write_results

        met = {"ours_over_torch_at_least_1.0": (all(r["ours_over_torch"] >= 1.0 for r in rows) if torch_version
                                                else None), **targets_met(scale, torch_version)}
        write_results(Path(args.json), {
            "threads": THREADS, "method": METHOD, "rounds": args.rounds, "seconds_per_measurement": args.seconds,
            "torch": torch_version, "load_average_before": load_before, "others_cpu_share": round(others.share(), 3),
            "load_average_after": load_after, "matmul_peak_gflops": {str(t): round(peak[t], 2) for t in THREADS},
            "flops_per_token": "6 |V| h + 6 (G h)(m + h), G = 4 (LSTM), 3 (GRU)", "rows": rows, "scaling": scale, "targets_met": met},
            started, command=command_line())
        print(f"wrote {args.json}")


def run_readable(args) -> None:
    """``--readable``: :func:`readable_rows`, printed with the load around them (and written to --json)."""
    from nplm_edu.experiments.common import command_line, write_results

    started, load_before, others = time.monotonic(), list(os.getloadavg()), OthersMeter()
    rows = readable_rows(args.seconds, args.rounds)
    doc = {"benchmark": "GRU, fast step against the readable reference", "rows": rows,
           "load_average_before": load_before, "load_average_after": list(os.getloadavg()),
           "others_cpu_share": round(others.share(), 3)}
    print(f"load average before {load_before[0]:.2f}, after {doc['load_average_after'][0]:.2f}; {others.line()}")
    if args.json:
        write_results(Path(args.json), doc, started, command=command_line())
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
