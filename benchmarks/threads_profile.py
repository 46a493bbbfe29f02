"""Where the second thread's time goes, counted in CPU time and waits instead of wall time (so that
it can be read on a busy machine): for the NPLM's training step (MLP1 and MLP9 at batch 128, as
``bench_train.py``) and the LSTM's (h 256 and 512, as ``bench_recurrent.py``) on 1 and 2 threads,

- the process's CPU time per step (all threads): more on 2 threads than on 1 is work the split adds;
- the CPU time the calling thread spends outside the threads' blocks (``run_blocks``): the serial
  part of the step, and its share of the step's CPU (Amdahl's bound on 2 threads is 2 / (1 + share));
- the blocking waits per step of each thread (voluntary context switches: the barriers, the task
  queues, the interpreter's lock).

    .venv/bin/python benchmarks/threads_profile.py [--steps 20] [--models MLP1,MLP9,LSTM256,LSTM512] [--json F]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

STARTED = time.monotonic()

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threads_common import OthersMeter, threads_from_argv  # noqa: E402

threads_from_argv()  # BLAS's pool sized for 2 threads before numpy loads

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from nplm_edu.numerics import full_output, fused, recurrent, threads  # noqa: E402

INSIDE = {"cpu": 0.0}  # the calling thread's CPU time inside run_blocks


def _counted(run_blocks):
    def run(fn, T):
        c = time.thread_time()
        try:
            return run_blocks(fn, T)
        finally:
            INSIDE["cpu"] += time.thread_time() - c
    return run


_RUN = _counted(threads.run_blocks)
for _module in (threads, fused, full_output, recurrent):  # every module that calls the blocks by name
    _module.run_blocks = _RUN


def waits() -> dict:
    """{thread id: voluntary context switches so far} of this process's threads."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                out[tid] = next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt"))
        except (FileNotFoundError, StopIteration):
            continue
    return out


MODELS = ("MLP1", "MLP9", "LSTM256", "LSTM512")  # bench_train.py's shapes and bench_recurrent.py's h


def make_step(name: str):
    """(step(X, Y), batches) of bench_train.py's or bench_recurrent.py's contender "ours"."""
    if name.startswith("LSTM"):
        import bench_recurrent

        return bench_recurrent.numpy_step(int(name[4:])), bench_recurrent.batches(4)
    import bench_train

    shape = bench_train.SHAPES[name]
    return bench_train.numpy_step(shape, 128), bench_train.batches(128, shape["n"], 8)


def profile(name: str, T: int, steps: int) -> dict:
    step, data = make_step(name)
    threads.set_threads(T)  # after the step is built (a backend sets its own thread count)
    for X, Y in data[:2]:
        step(X, Y)
    INSIDE["cpu"], w0 = 0.0, waits()
    p0, m0 = time.process_time(), time.thread_time()
    for i in range(steps):
        step(*data[i % len(data)])
    cpu, main = time.process_time() - p0, time.thread_time() - m0
    w1 = waits()
    serial = main - INSIDE["cpu"] if T > 1 else main
    return {"cpu_ms": 1e3 * cpu / steps, "serial_ms": 1e3 * serial / steps, "serial_share": serial / cpu,
            "waits": sorted(round((w1[t] - w0[t]) / steps, 1) for t in w1 if t in w0 and w1[t] > w0[t])}


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--steps", type=int, default=20, help="steps measured per model and thread count")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, among {','.join(MODELS)}")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--json", help="also write the results here (machine, load, commit, one row per model and thread count)")
    args = ap.parse_args()
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        ap.error(f"--models: unknown {','.join(unknown)}; choose among {','.join(MODELS)}")
    load_before, others, rows = list(os.getloadavg()), OthersMeter(), []
    print(f"{'model':8} {'threads':>7} {'CPU ms/step':>11} {'serial ms':>9} {'serial':>7} {'bound':>6}  waits/step per thread")
    for name in args.models.split(","):
        for T in [int(t) for t in args.threads.split(",")]:
            steps = args.steps if name.startswith("MLP") else max(2, args.steps // 4)
            r = profile(name, T, steps)
            bound = T / (1 + (T - 1) * r["serial_share"])
            print(f"{name:8} {T:7d} {r['cpu_ms']:11.1f} {r['serial_ms']:9.2f} {r['serial_share']:7.1%} {bound:6.2f}  "
                  f"{r['waits']}", flush=True)
            rows.append({"model": name, "threads": T, "steps": steps, "cpu_ms_per_step": round(r["cpu_ms"], 2),
                         "serial_ms_per_step": round(r["serial_ms"], 3), "serial_share": round(r["serial_share"], 4),
                         "amdahl_bound": round(bound, 3), "waits_per_step_per_thread": r["waits"]})
    load_after = list(os.getloadavg())
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; {others.line()}"
          " (CPU times hold under load; the waits do not count the time waited)")
    if args.json:
        from nplm_edu.experiments.common import command_line, write_results

        write_results(Path(args.json), {
            "threads": [int(t) for t in args.threads.split(",")], "load_average_before": load_before,
            "others_cpu_share": round(others.share(), 3), "load_average_after": load_after, "rows": rows},
            STARTED, command_line())
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
