"""The row of benchmarks/README.md's table for the 1 -> 2 thread benchmarks, written from their results
files (so that the README says what the committed JSON says):

    .venv/bin/python benchmarks/threads_row.py [--train data/results/bench_threads.json]
                                               [--recurrent data/results/bench_recurrent_threads.json]

prints one Markdown table row; paste it over the row that names these files.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(path: str) -> dict:
    return json.loads(Path(path).read_text())


def _conditions(d: dict) -> str:
    share = d.get("others_cpu_share")
    busy = (f"other processes {share:.0%} of the cores" if share is not None
            else f"load average {d['load_average_before'][0]:.2f} to {d['load_average_after'][0]:.2f}")
    return f"torch {d['torch'].split('+')[0]}, {busy}" if d.get("torch") else busy


def _peak(rows: list, T: int, **key) -> float:
    return next(r["of_peak"] for r in rows if r["threads"] == T and all(r.get(k) == v for k, v in key.items()))


def _against_other(train: dict, name: str) -> str:
    """", ours / the code before the reshaping (COMMIT) 1.019 and 1.189 on 1 and 2 threads" when bench_train.py ran with
    --compare-with (the code before the trainer's reshaping, measured beside ours), else ""."""
    ratios = [next((r.get("ours_over_other") for r in train["rows"]
                    if r["shape"] == name and r["batch"] == 128 and r["threads"] == T), None) for T in (1, 2)]
    if not train.get("compared_with") or None in ratios:
        return ""
    commit = train.get("compared_commit") or Path(train["compared_with"]).name.removeprefix("old-")
    return (f", ours / the code before the reshaping ({commit}) {ratios[0]:.3f} and "
            f"{ratios[1]:.3f} on 1 and 2 threads")


def _fig(s: dict, key: str, fmt: str) -> str:
    """"x1.80 (IQR 1.71-1.88, best-of 1.85)" of a median with its quartiles; the bare figure in a file
    measured before the medians (best-of only)."""
    iqr = s.get(f"{key}_iqr")
    return (f"{format(s[key], fmt)} (IQR {format(iqr[0], fmt)}-{format(iqr[1], fmt)}, best-of {format(s[key + '_best'], fmt)})"
            if iqr else format(s[key], fmt))


def _scaling(s: dict) -> str:
    return (f"x{_fig(s, 'ours_2_over_1', '.2f')}"
            + (f" (PyTorch x{_fig(s, 'torch_2_over_1', '.2f')}, lead kept {_fig(s, 'lead_kept', '.0%')})"
               if "lead_kept" in s else ""))


def row(train: dict, rec: dict) -> str:
    """The Markdown row: what was measured (medians of the rounds' ratios with their quartiles where the
    files have them), and whether the scaling targets held."""
    what, missed_scale, missed_lead, met_lead = [], [], [], []
    for s in train["scaling"]:
        name = s["shape"]
        what.append(f"{name} {_scaling(s)}"
                    + f", {_peak(train['rows'], 1, shape=name, batch=128):.1%} then "
                      f"{_peak(train['rows'], 2, shape=name, batch=128):.1%} of the matmul peak"
                    + _against_other(train, name))
    for s in rec["scaling"]:
        name = f"{s.get('cell', 'lstm').upper()} h {s['h']}"
        what.append(f"{name} {_scaling(s)}"
                    + (f", class-factored output x{s['class_2_over_1']:.2f}" if "class_2_over_1" in s else "")
                    + f", {_peak(rec['rows'], 1, cell=s.get('cell', 'lstm'), h=s['h']):.1%} then "
                      f"{_peak(rec['rows'], 2, cell=s.get('cell', 'lstm'), h=s['h']):.1%}")
    for s, name in [(s, s["shape"]) for s in train["scaling"]] + [
            (s, f"{s.get('cell', 'lstm').upper()} h {s['h']}") for s in rec["scaling"]]:
        if not s["ours_2_over_1_at_least_1.7"]:
            missed_scale.append(f"{name} {s['ours_2_over_1']:.2f}")
        if "lead_kept" in s:
            (met_lead if s["lead_kept_at_least_0.85"] else missed_lead).append(f"{name} ({s['lead_kept']:.0%})")
    target = (">= 1.7x on 2 threads: " + (f"missed ({', '.join(missed_scale)})" if missed_scale else "met")
              + "; lead over PyTorch kept >= 85%: "
              + (f"met for {', '.join(met_lead)}" if met_lead else "")
              + (f"; missed for {', '.join(missed_lead)}" if missed_lead else ""))
    conditions = _conditions(train) if _conditions(train) == _conditions(rec) else f"{_conditions(train)}; {_conditions(rec)}"
    files = f"`bench_threads.json`, `bench_recurrent_threads.json` (`--threads 1,2`; {conditions}), {train['machine'].split(',')[0]}"
    rounds = (f", medians of {train['rounds']} and {rec['rounds']} interleaved rounds (the peak's share from the median speed)"
              if "rounds" in train and "rounds" in rec else "")
    return f"| {files} | 1 to 2 threads, batch 128 and B 32 x T 35{rounds}: {'; '.join(what)} | {target} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--train", default=str(ROOT / "data" / "results" / "bench_threads.json"))
    ap.add_argument("--recurrent", default=str(ROOT / "data" / "results" / "bench_recurrent_threads.json"))
    args = ap.parse_args()
    print(row(_load(args.train), _load(args.recurrent)))


if __name__ == "__main__":
    main()
