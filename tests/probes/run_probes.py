"""Fault probes of the command line, replayed on the synthetic corpus in a few minutes.

Each probe does what a careful, adversarial user would (kill -9 and resume, Ctrl-C and SIGTERM,
corrupt checkpoints and results files, a full disk, an unwritable folder, concurrent runs, bad
options) and checks what the package promises: one line on stderr and exit status 2 for bad input,
never a traceback; no run and no row lost; one writer per run folder and results file; no output
over an input. Prints a table (probe, expected, observed, pass) and exits 1 if any probe fails.

    python tests/probes/run_probes.py            # every probe
    python tests/probes/run_probes.py -k lock    # the probes whose name contains "lock"
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SYN = ["--corpus", "synthetic", "--synthetic-tokens", "3000"]
TRAIN = ["train", "--corpus", "synthetic", "--synthetic-tokens", "40000", "--batch", "16", "--quiet"]
PROBES = []


def probe(name: str, expected: str):
    """Register ``f(folder) -> (observed, passed)`` as a probe."""
    def register(f):
        PROBES.append((name, expected, f))
        return f
    return register


def env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
            "NPLM_EDU_RUNS": "runs"}


def nplm(cwd, *args, timeout=120, preexec=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nplm_edu", *map(str, args)], cwd=cwd, env=env(), text=True,
                          capture_output=True, timeout=timeout, preexec_fn=preexec)


def start(cwd, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "nplm_edu", *map(str, args)], cwd=cwd, env=env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def one_line(p) -> tuple[str, bool]:
    """(what the command said, whether it was one 'error:' line with exit status 2 and no traceback)."""
    lines = p.stderr.strip().splitlines()
    said = lines[-1] if lines else "(nothing)"
    ok = p.returncode == 2 and len(lines) == 1 and said.startswith("error: ") and "Traceback" not in p.stderr
    return f"exit {p.returncode}: {said[:110]}", ok


def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 60) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end and proc.poll() is None:
        if path.exists():
            return True
        time.sleep(0.05)
    return path.exists()


def epochs(folder: Path) -> list:
    return [round(e["valid_ppl"], 6) for e in json.loads((folder / "history.json").read_text())["epochs"]]


# --------------------------------------------------------------------------- kill, signals, resume
def interrupted_then_resumed(d: Path, how) -> tuple[str, bool]:
    full = nplm(d, *TRAIN, "--epochs", "3", "--out", d / "full")
    p = start(d, *TRAIN, "--epochs", "3", "--out", d / "cut")
    if not wait_for(d / "cut" / "history.json", p):  # epoch 1 done and checkpointed
        p.kill()
        return "no checkpoint appeared", False
    os.kill(p.pid, how)
    p.communicate(timeout=60)
    resumed = nplm(d, *TRAIN, "--epochs", "3", "--out", d / "cut", "--resume")
    if full.returncode or resumed.returncode:
        return f"exit {full.returncode}/{resumed.returncode}: {resumed.stderr.strip()[-100:]}", False
    same = epochs(d / "full") == epochs(d / "cut")
    return f"killed with exit {p.returncode}, resumed: history {'equal' if same else 'DIFFERENT'}", same


@probe("kill -9 mid-run, then --resume", "resumes; history equal to an uninterrupted run")
def kill9(d):
    return interrupted_then_resumed(d, signal.SIGKILL)


@probe("SIGINT mid-run, then --resume", "checkpoint kept; history equal to an uninterrupted run")
def sigint(d):
    return interrupted_then_resumed(d, signal.SIGINT)


@probe("SIGTERM mid-run, then --resume", "checkpoint kept; history equal to an uninterrupted run")
def sigterm(d):
    return interrupted_then_resumed(d, signal.SIGTERM)


def first_history(root: Path, proc: subprocess.Popen, seconds: float) -> Path | None:
    """The first history.json written anywhere under ``root`` (a run folder's first epoch), or None."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and proc.poll() is None:
        found = sorted(root.rglob("history.json")) if root.exists() else []
        if found:
            return found[0]
        time.sleep(0.05)
    return None


@probe("kill -9 a sampled output layer (nce) after epoch 1", "the rerun resumes it")
def kill9_nce(d):
    args = ["reproduce", "output-layers", "--corpus", "synthetic", "--synthetic-tokens", "40000", "--quick",
            "--methods", "nce", "--seeds", "0", "--quiet", "--out", d / "o.json", "--runs-dir", d / "R"]
    p = start(d, *args)
    hist = first_history(d / "R", p, 120)
    if hist is None:
        p.kill()
        return "no checkpoint appeared", False
    p.kill()
    p.communicate()
    first = json.loads(hist.read_text())["epochs"][0]["seconds"]  # a rerun from scratch would time it anew
    q = nplm(d, *args)
    kept = json.loads(hist.read_text())["epochs"][0]["seconds"] == first
    runs = [r["run"] for r in json.loads((d / "o.json").read_text())["runs"]] if q.returncode == 0 else []
    ok = q.returncode == 0 and kept and runs == ["nce/seed0"]
    return f"exit {q.returncode}; epoch 1 {'kept' if kept else 'trained again'}; rows {runs} {q.stderr.strip()[:60]}", ok


@probe("kill -9 a writer, next writer of its --out", "stale lock taken over, with a line saying so")
def stale_lock(d):
    p = start(d, *TRAIN, "--epochs", "5", "--out", d / "x")
    wait_for(d / ".x.lock", p)
    time.sleep(0.3)
    p.kill()
    p.communicate()
    q = nplm(d, "train", *SYN, "--epochs", "1", "--quiet", "--out", d / "x", "--force")
    took = "took over the lock" in q.stdout
    return f"exit {q.returncode}; {'took over' if took else 'no line'}", q.returncode == 0 and took


# --------------------------------------------------------------------------- corrupt files
@probe("corrupt checkpoint, --resume", "one line, exit 2")
def corrupt_checkpoint(d):
    nplm(d, "train", *SYN, "--epochs", "1", "--quiet", "--out", d / "x")
    ck = d / "x" / "checkpoint.npz"
    ck.write_bytes(ck.read_bytes()[: ck.stat().st_size // 2])
    return one_line(nplm(d, "train", *SYN, "--epochs", "2", "--quiet", "--out", d / "x", "--resume"))


@probe("garbage checkpoint given to mix", "one line, exit 2")
def garbage_checkpoint(d):
    (d / "c.npz").write_bytes(b"PK\x03\x04 not a zip")
    return one_line(nplm(d, "mix", d / "c.npz", *SYN))


@probe("corrupt results file as --out", "one line, exit 2; file unchanged")
def corrupt_results(d):
    (d / "t.json").write_text('{"rows": {')
    p = nplm(d, "reproduce", "table1", *SYN, "--quick", "--quiet", "--out", d / "t.json")
    said, ok = one_line(p)
    return said, ok and (d / "t.json").read_text() == '{"rows": {'


@probe("corrupt row_config.json in a runs folder", "one line, exit 2")
def corrupt_stamp(d):
    args = ["reproduce", "table1", *SYN, "--rows", "MLP7", "--epochs", "1", "--quiet", "--out", d / "t.json",
            "--runs-dir", d / "runs", "--no-save-features"]
    nplm(d, *args)
    (d / "t.json").unlink()
    (d / "runs" / "t" / "MLP7" / "row_config.json").write_text("{not json")
    return one_line(nplm(d, *args))


@probe("results --dir with odd types and deep nesting", "no traceback")
def odd_results(d):
    (d / "r").mkdir()
    (d / "r" / "a.json").write_text('{"command": ["x"], "date": 5, "commit": 3, "rows": [{"commit": 7}, 1]}')
    a = nplm(d, "results", "--dir", d / "r", "--check")
    (d / "r" / "b.json").write_text('{"rows": ' + "[" * 50_000 + "]" * 50_000 + "}")
    b = nplm(d, "results", "--dir", d / "r")
    ok = all(p.returncode == 2 and "Traceback" not in p.stderr for p in (a, b))
    return f"exit {a.returncode}, {b.returncode}: {b.stderr.strip()[:80]}", ok


# --------------------------------------------------------------------------- disks and folders
def file_size_limit(limit: int):
    def preexec():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
    return preexec


@probe("full disk while checkpointing (file-size limit)", "one line, exit 2; no file cut short left")
def full_disk(d):
    p = nplm(d, "train", *SYN, "--epochs", "1", "--quiet", "--out", d / "x", preexec=file_size_limit(2000))
    said, ok = one_line(p)
    left = sorted(q.name for q in (d / "x").glob("*")) if (d / "x").exists() else []
    return f"{said}; left {left}", ok and "checkpoint.npz" not in left and not any(".tmp" in n for n in left)


@probe("unwritable --out (a file in the path)", "one line, exit 2, before training")
def unwritable(d):
    (d / "f").write_text("a file")
    return one_line(nplm(d, "train", *SYN, "--out", d / "f" / "run"))


# --------------------------------------------------------------------------- concurrent writers
@probe("two train runs into one --out", "second refused naming the first; first finishes")
def two_trains(d):
    a = start(d, *TRAIN, "--epochs", "3", "--out", d / "x")
    wait_for(d / ".x.lock", a)
    b = nplm(d, *TRAIN, "--epochs", "1", "--out", d / "x", "--force")
    a.communicate(timeout=120)
    said, ok = one_line(b)
    return said, ok and f"process {a.pid}" in said and a.returncode == 0


@probe("two reproduce recurrent runs into one file", "both rows kept")
def two_recurrent(d):
    args = ["reproduce", "recurrent", *SYN, "--quick", "--quiet", "--seeds", "0", "--out", d / "r.json",
            "--runs-dir", d / "runs"]
    procs = [start(d, *args, "--models", m) for m in ("rnn", "lstm")]
    codes = [p.wait(timeout=300) for p in procs]
    for p in procs:
        p.communicate()
    doc = json.loads((d / "r.json").read_text()) if (d / "r.json").exists() else {"runs": []}
    rows = sorted(r["run"] for r in doc["runs"])
    return f"exit {codes}, rows {rows}", codes == [0, 0] and rows == ["lstm/seed0", "rnn/seed0"]


@probe("two reproduce table1 runs into one file", "both rows kept")
def two_table1(d):
    args = ["reproduce", "table1", *SYN, "--epochs", "1", "--quiet", "--out", d / "t.json", "--runs-dir", d / "runs",
            "--no-save-features"]
    procs = [start(d, *args, "--rows", r) for r in ("MLP7", "MLP3")]
    codes = [p.wait(timeout=120) for p in procs]
    for p in procs:
        p.communicate()
    rows = sorted(json.loads((d / "t.json").read_text())["rows"]) if (d / "t.json").exists() else []
    return f"exit {codes}, rows {rows}", codes == [0, 0] and rows == ["MLP3", "MLP4", "MLP7", "MLP8"]


@probe("output-layers: same file name in two folders", "the first's checkpoints kept")
def same_name(d):
    args = ["reproduce", "output-layers", *SYN, "--quick", "--quiet", "--methods", "full", "--seeds", "0",
            "--runs-dir", d / "runs"]
    nplm(d, *args, "--out", d / "a" / "ol.json")
    before = {c: c.read_bytes() for c in (d / "runs").rglob("checkpoint.npz")} if (d / "runs").exists() else {}
    p = nplm(d, *args, "--corpus-seed", "1", "--out", d / "b" / "ol.json")  # other settings, same file name
    kept = bool(before) and all(c.exists() and c.read_bytes() == b for c, b in before.items())
    return f"exit {p.returncode}; first run {'kept' if kept else 'LOST'}", p.returncode == 0 and kept


# --------------------------------------------------------------------------- outputs over inputs
@probe("outputs equal to inputs", "each refused in one line; inputs unchanged")
def over_inputs(d):
    nplm(d, "train", *SYN, "--epochs", "1", "--quiet", "--out", d / "x")
    ck = d / "x" / "checkpoint.npz"
    before = ck.read_bytes()
    (d / "f.txt").write_text("the cat sat on the mat .\n" * 100)
    runs = [nplm(d, "mix", ck, *SYN, "--json", ck),
            nplm(d, "train", *SYN, "--epochs", "1", "--out", d / "x", "--force", "--results", ck),
            nplm(d, "ngram", "--corpus", d / "f.txt", "--json", d / "f.txt"),
            nplm(d, "reproduce", "ngrams", "--corpus", d / "f.txt", "--out", d / "f.txt")]
    results = [one_line(p) for p in runs]
    ok = all(r[1] for r in results) and ck.read_bytes() == before and (d / "f.txt").read_text().startswith("the cat")
    return f"{sum(r[1] for r in results)}/{len(runs)} refused; e.g. {results[0][0][:60]}", ok


@probe("another target's results file as --out", "one line, exit 2; file unchanged")
def other_target(d):
    nplm(d, "reproduce", "table1", *SYN, "--rows", "MLP7", "--epochs", "1", "--quiet", "--out", d / "t.json",
         "--runs-dir", d / "runs", "--no-save-features")
    before = (d / "t.json").read_bytes()
    a = one_line(nplm(d, "reproduce", "recurrent", *SYN, "--quick", "--out", d / "t.json"))
    b = one_line(nplm(d, "reproduce", "ngrams", *SYN, "--classes", "5", "--out", d / "t.json"))
    return a[0], a[1] and b[1] and (d / "t.json").read_bytes() == before


# --------------------------------------------------------------------------- bad options
@probe("settings refused before training (output-layers)", "one line, exit 2, in seconds")
def before_training(d):
    t0 = time.monotonic()
    runs = [nplm(d, "reproduce", "output-layers", *SYN, "--class-file", "/nonexistent"),
            nplm(d, "reproduce", "output-layers", *SYN, "--methods", "is", "--k-is", "0")]
    results = [one_line(p) for p in runs]
    seconds = time.monotonic() - t0
    return f"{results[0][0][:60]}; {seconds:.1f} s", all(r[1] for r in results) and not (d / "runs").exists()


@probe("a pipe as --corpus", "one line naming it")
def pipe(d):
    os.mkfifo(d / "p")
    said, ok = one_line(nplm(d, "corpus", "info", "--corpus", d / "p"))
    return said, ok and str(d / "p") in said


BAD = [["train", *SYN, *extra] for extra in (["--epochs", "0"], ["--lr", "-1"], ["--batch", "0"], ["--h", "-1"],
                                               ["--dropout-x", "1.5"], ["--n", "1"], ["--min-count", "0"],
                                               ["--workers", "0"], ["--resume", "--force"], ["--results", "."])]
BAD += [["reproduce", "table1", *SYN, "--rows", "MLP2"], ["reproduce", "lr-sweep", *SYN, "--lrs", "0,1"],
        ["reproduce", "recurrent", *SYN, "--models", "grux"], ["reproduce", "central-claim", "--seeds", "0"],
        ["reproduce", "beyond", *SYN, "--tie"], ["ngram", *SYN, "--model", "kn", "--classes", "5"],
        ["mix", "missing.npz", *SYN], ["corpus", "info", "--corpus", "no-such-file.txt"]]


@probe(f"{len(BAD)} bad options", "each refused with exit 2, no traceback")
def bad_options(d):
    failed = []
    for args in BAD:
        p = nplm(d, *args, *(["--out", d / "x"] if args[0] == "train" else []))
        if p.returncode != 2 or "Traceback" in p.stderr or not p.stderr.strip():
            failed.append(" ".join(args))
    return f"{len(BAD) - len(failed)}/{len(BAD)} refused" + (f"; not: {failed}" if failed else ""), not failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", default="", help="only the probes whose name contains this")
    args = ap.parse_args()
    rows, t0 = [], time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nplm-probes-") as tmp:
        for i, (name, expected, f) in enumerate(p for p in PROBES if args.k in p[0]):
            d = Path(tmp) / f"p{i}"
            d.mkdir()
            try:
                observed, ok = f(d)
            except Exception as e:  # a probe that cannot run fails, with why
                observed, ok = f"probe crashed: {type(e).__name__}: {e}", False
            rows.append((name, expected, observed.replace(f"{d}/", ""), ok))
            print(f"{'pass' if ok else 'FAIL'}  {name}", file=sys.stderr, flush=True)
    w = [max(len(r[i]) for r in rows + [("probe", "expected", "observed")]) for i in range(3)]
    print(f"\n{'probe':{w[0]}}  {'expected':{w[1]}}  {'observed':{w[2]}}  pass")
    for name, expected, observed, ok in rows:
        print(f"{name:{w[0]}}  {expected:{w[1]}}  {observed:{w[2]}}  {'yes' if ok else 'NO'}")
    failed = sum(not r[3] for r in rows)
    print(f"\n{len(rows) - failed} of {len(rows)} probes passed in {time.monotonic() - t0:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
