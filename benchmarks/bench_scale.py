"""How the data and n-gram side scale: corpora of 1, 10 and 100 million tokens, time and peak memory.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_scale.py \\
        [--sizes 1e6,1e7,1e8] [--seed 0] [--mem-cap-gb 18] [--tmp DIR] [--json data/results/scale.json]

Corpora: Brown's tokens resampled by their bigram statistics (a Markov chain over all of Brown's
word types: 1,000 chains drawn at once with numpy, each continuing from block to block), written as
a text file with one paragraph per line into a temporary folder. Such text has Brown's unigram and
bigram statistics but more distinct 3- to 5-grams than real text of the same length (a chain
forgets after one word), so the n-gram tables are larger than on real text: a pessimistic case.

Each step runs in its own process, whose peak resident memory comes from ``os.wait4`` (the maximum
RSS of that process alone), under an address-space cap of ``--mem-cap-gb`` (RLIMIT_AS, 16 GiB: the target for the n-gram fit):

  generate   write the text file (not a measured target)
  read       ``python -m nplm_edu corpus info --corpus FILE`` with an empty cache: the streaming
             reader (vocabulary count, int32 ids) and the cache write
  read_cached the same command again: ids and vocabulary from the cache
  kn5        interpolated modified Kneser-Ney of order 5 (nplm_edu.models.ngram.KneserNey): fit on the
             training split (80%), its CPU time split into user and system (page faults), then score
             every token of the test split (10%); ``--repeats`` fresh processes (3), the median of each
             time recorded and every run's CPU seconds listed. Also timed, as yardsticks of the
             machine: one gather of all training tokens in a random order (``np.take``, best of 3),
             the memory system's cost per access, and numpy's sort of as many random 64-bit
             integers (``np.sort``, best of 3), the textbook n log n operation. Counted once, after
             the clocks: what scoring searches at each order (:func:`search_steps`)
  train      the NPLM (n 5, m 30, h 50, direct, batch 128) with :func:`nplm_edu.training.trainer.train` for
             ``--train-updates`` updates: examples/s, and the hours one epoch would take

Rows are merged into ``--json`` by size, so sizes can be run separately; a log-log plot of the
CPU seconds and the peak memory of each step is written beside it (scale.png). Targets on the
2-core, 24 GiB machine: 100 million tokens read in under 2 minutes within 2 GiB; KN 5-gram fitted on
them in 15 minutes within 16 GiB; cost growing no faster than n log n. Each step records its
wall-clock and its CPU seconds (user + system): the targets are wall-clock, while the plot and the
growth ratios use CPU seconds, which other users' load on a shared machine disturbs less. The
1-minute load average is sampled every 10 s during each size and recorded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GiB = 2 ** 30
LMPLZ_NOTE = ("KenLM's lmplz (interpolated modified Kneser-Ney, sorting on disk, writes an ARPA file), built "
              "from the C++ source in PyPI's kenlm 0.3.0 sdist with cmake and Debian's Boost 1.74: not "
              "installed by this project; a reference only")
TARGETS = {"read_seconds": 120, "read_peak_gib": 2, "kn5_fit_seconds": 900, "kn5_fit_peak_gib": 16}


# --------------------------------------------------------------------------- steps (child processes)

def step_generate(out: str, tokens: int, seed: int) -> dict:
    """Brown resampled by its bigram statistics: ``tokens`` tokens, ``<p>`` written as a line end."""
    import numpy as np

    from nplm_edu.data.corpus import PARAGRAPH, load_corpus

    brown = load_corpus("brown", min_count=1)  # every word type of Brown
    ids, V = brown.ids.astype(np.int64), brown.V
    keys, n = np.unique(ids[:-1] * V + ids[1:], return_counts=True)  # bigram types, sorted by first word
    prev, nxt = keys // V, keys % V
    row_total = np.bincount(prev, weights=n, minlength=V)  # (|V|,) occurrences of each first word
    within = np.cumsum(n) - (np.cumsum(row_total) - row_total)[prev]  # (B,) cumulative count in its row
    cum = prev + within / row_total[prev]  # (B,) in (prev, prev + 1], increasing: one searchsorted samples
    words = np.array(brown.vocab.words, dtype=object)
    words[brown.vocab.index[PARAGRAPH]] = "\n"  # the reader puts <p> back at every line end
    rng = np.random.default_rng(seed)
    P, S = 1000, 1000  # chains, steps per block
    state = rng.choice(ids, size=P)  # (P,) start from the unigram distribution
    written = 0
    with open(out, "w", encoding="utf-8") as f:
        while written < tokens:
            block = np.empty((S, P), np.int64)  # (S, P)
            for s in range(S):
                state = nxt[np.searchsorted(cum, state + rng.random(P), side="right")]
                block[s] = state
            flat = block.T.ravel()[: tokens - written]  # each chain's S steps in a row
            f.write(" ".join(words[flat].tolist()) + " ")
            written += len(flat)
        f.write("\n")
    return {"bytes": os.path.getsize(out), "brown_types": int(V)}


def search_steps(m, ctx) -> list[dict]:
    """What scoring searches, order by order (k = 2..n): the share of test windows whose context (the
    k-1 words before the target) occurs in training, so that order k searches among its s children,
    and the entries of the table that search reads (``search_slices``: ceil(log2 s) halvings, then
    the one entry left; none when s = 0), summed and divided by all windows. That is what one search
    reads alone; in a batch, a query down to one entry stays in the halvings until half of the
    queries are, so a batch reads somewhat more."""
    import numpy as np

    out = []
    for k in range(2, m.order + 1):
        h = m.ngrams.find(ctx[:, ctx.shape[1] - (k - 1):])  # (K,) id of the context in table k-1, -1 if unseen
        off, hs = m.ngrams.offsets[k], h[h >= 0]
        s = (off[hs + 1] - off[hs]).astype(np.float64)  # (S,) children of each seen context
        probes = np.where(s > 0, np.ceil(np.log2(np.maximum(s, 1))) + 1, 0)  # (S,)
        out.append({"order": k, "context_seen": round(float(np.mean(h >= 0)), 4),
                    "probes_per_window": round(float(probes.sum() / len(h)), 3)})
    return out


def step_kn5(corpus: str, order: int, count_steps: bool = False) -> dict:
    import numpy as np

    from nplm_edu.data.corpus import load_corpus
    from nplm_edu.models.ngram import KneserNey

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GiB

    c = load_corpus(corpus)
    def usage():  # user and system CPU seconds so far, to the microsecond (os.times counts 10 ms ticks)
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime, u.ru_stime

    t0, c0, o0 = time.perf_counter(), time.process_time(), usage()
    m = KneserNey(order, c.V).fit(c.train)
    fit_s, fit_cpu, fit_peak, o1 = time.perf_counter() - t0, time.process_time() - c0, peak(), usage()
    gather = np.random.default_rng(0).permutation(len(c.train))  # the memory system alone: one gather
    out = np.empty(len(c.train), c.train.dtype)  # of every training token in a random order, into memory
    gather_s = []  # already written, best of 3 (the counting's gathers are of this kind)
    for _ in range(3):
        g0 = time.perf_counter()
        np.take(c.train, gather, out=out)
        gather_s.append(time.perf_counter() - g0)
    del gather, out
    keys = np.random.default_rng(1).integers(0, 2 ** 62, len(c.train))  # the textbook n log n step: numpy's
    work = np.empty_like(keys)  # own sort of as many 64-bit keys as there are training tokens, best of 3, in
    sort_s = []  # place in memory already written, so that it times the sort, not the kernel's fresh pages
    for _ in range(3):
        work[...] = keys
        s0 = time.process_time()
        work.sort()
        sort_s.append(time.process_time() - s0)
    del keys, work
    ngrams = [int(m.ngrams.size(k)) for k in range(1, order + 1)]
    ctx, tgt = c.windows("test", order)
    t1, c1 = time.perf_counter(), time.process_time()
    ppl = m.perplexity(ctx, tgt, batch=1 << 16)
    return {"train_tokens": int(len(c.train)), "test_tokens": int(len(tgt)), "V": c.V,
            "fit_seconds": fit_s, "fit_cpu_seconds": fit_cpu, "fit_peak_gib": fit_peak,
            "fit_user_seconds": o1[0] - o0[0], "fit_system_seconds": o1[1] - o0[1],
            "gather_seconds": min(gather_s), "sort_seconds": min(sort_s),
            "score_seconds": time.perf_counter() - t1, "score_cpu_seconds": time.process_time() - c1,
            "test_perplexity": float(ppl), "ngram_types": ngrams,
            **({"search": search_steps(m, ctx)} if count_steps else {})}  # after the clock: not in its seconds


def step_train(corpus: str, updates: int) -> dict:
    from nplm_edu.data.corpus import load_corpus
    from nplm_edu.models.nplm import NPLMConfig
    from nplm_edu.numerics.fused import FusedNPLM
    from nplm_edu.training.trainer import TrainConfig, train

    c = load_corpus(corpus)
    model = FusedNPLM(NPLMConfig(V=c.V, n=5, m=30, h=50, direct=True))
    times = {}
    warm = 5  # the first updates (permutation, page faults) are not timed

    def clock(step, _model):
        times[step] = (time.perf_counter(), time.process_time())

    cfg = TrainConfig(epochs=1, batch=128, lr=0.01, max_updates=updates)
    train(model, (c.windows("train", 5), None), cfg, callback=clock, callback_every=1, quiet=True)
    done = (updates - warm) * cfg.batch
    eps = done / (times[updates][1] - times[warm][1])  # per CPU second (one thread)
    examples = len(c.train) - 4
    return {"V": c.V, "updates": updates, "batch": cfg.batch, "examples_per_second": eps,
            "examples_per_wall_second": done / (times[updates][0] - times[warm][0]),
            "epoch_examples": examples, "epoch_hours": examples / eps / 3600}


STEPS = {"generate": step_generate, "kn5": step_kn5, "train": step_train}


# --------------------------------------------------------------------------- the parent

def run_process(cmd: list[str], cap_gib: float, env: dict, stderr=None) -> tuple[str, dict]:
    """Run ``cmd`` under the address-space cap: its stdout, and its wall-clock seconds, CPU seconds
    (user + system, all its threads) and peak RSS in GiB, the last two of this process alone."""
    def limit():
        if cap_gib:
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            cap = int(cap_gib * GiB) if hard == resource.RLIM_INFINITY else min(int(cap_gib * GiB), hard)
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))

    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, env=env, preexec_fn=limit, cwd=ROOT)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)  # the peak RSS of this child alone
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(cmd)} failed (exit {os.waitstatus_to_exitcode(status)})")
    return out.decode(), {"seconds": round(seconds, 2), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
                          "peak_gib": round(usage.ru_maxrss * 1024 / GiB, 3)}


def run_step(name: str, cap_gib: float, env: dict, **kw) -> dict:
    """One step of this file in a child process: its result, seconds and peak RSS."""
    out, usage = run_process([sys.executable, __file__, "--step", name, "--kw", json.dumps(kw)], cap_gib, env)
    return {**json.loads(out.strip().splitlines()[-1]), **usage}


def provenance(argv) -> dict:
    """The package's provenance block (command, commit, machine, versions, BLAS threads) and the memory."""
    from nplm_edu.experiments.common import command_line, provenance as common_provenance

    mem = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        k, v = line.split(":", 1)
        if k in ("MemTotal", "MemAvailable"):
            mem[k] = round(int(v.split()[0]) * 1024 / GiB, 1)
    return {**common_provenance(STARTED, command_line(["benchmarks/bench_scale.py", *argv])), "memory_gib": mem}


def clear_cache(folder: Path) -> None:
    for f in folder.glob("*"):
        f.unlink()


def measure_size(tokens: int, a, tmp: Path, env: dict) -> dict:
    corpus = str(tmp / f"brown_bigram_{tokens}.txt")
    env = {**env, "NPLM_EDU_CACHE": str(tmp / f"cache_{tokens}")}
    row = {"tokens_nominal": tokens, "load_average_before": list(os.getloadavg())}
    clear_cache(tmp / f"cache_{tokens}")  # the first read must find no cache
    print(f"--- {tokens:,} tokens", flush=True)
    g = run_step("generate", a.mem_cap_gb, env, out=corpus, tokens=tokens, seed=a.seed)
    row["generate"] = g
    print(f"generate: {g['seconds']:.1f} s, {g['bytes'] / 1e6:.0f} MB of text", flush=True)
    for name in ("read", "read_cached"):  # python -m nplm_edu corpus info, as a user runs it
        info, row[name] = run_process([sys.executable, "-m", "nplm_edu", "corpus", "info", "--corpus", corpus],
                                      a.mem_cap_gb, env)
        print(f"{name}: {row[name]['seconds']:.1f} s ({row[name]['cpu_seconds']:.1f} CPU s), "
              f"peak {row[name]['peak_gib']:.2f} GiB", flush=True)
    row["info"] = info.strip().splitlines()
    row["tokens"] = int(info.split(":", 1)[1].split("tokens")[0].replace(",", ""))
    runs = [run_step("kn5", a.mem_cap_gb, env, corpus=corpus, order=5, count_steps=i == 0) for i in range(a.repeats)]
    search = runs[0]["search"]  # the same in every run: counted once
    k = median_run(runs)  # one fit of 0.2 s varies by half from process to process: the median of fresh ones
    row["kn5"] = {**{key: round(k[key], 3) for key in ("fit_seconds", "fit_cpu_seconds", "fit_user_seconds",
                                                      "fit_system_seconds", "score_seconds", "score_cpu_seconds")},
                  "gather_seconds": round(k["gather_seconds"], 4), "sort_seconds": round(k["sort_seconds"], 4),
                  "fit_peak_gib": round(k["fit_peak_gib"], 3), "peak_gib": k["peak_gib"],
                  "process_seconds": k["seconds"], "train_tokens": k["train_tokens"],
                  "test_tokens": k["test_tokens"], "V": k["V"], "test_perplexity": round(k["test_perplexity"], 2),
                  "ngram_types": k["ngram_types"], "search": search, "repeats": len(runs),
                  "runs_fit_cpu_seconds": [round(r["fit_cpu_seconds"], 3) for r in runs],
                  "runs_fit_user_seconds": [round(r["fit_user_seconds"], 3) for r in runs],
                  "runs_score_cpu_seconds": [round(r["score_cpu_seconds"], 3) for r in runs]}
    print(f"kn5: fit {k['fit_seconds']:.1f} s ({k['fit_cpu_seconds']:.1f} CPU s: {k['fit_user_seconds']:.1f} user, "
          f"{k['fit_system_seconds']:.1f} system; peak {k['fit_peak_gib']:.2f} GiB), "
          f"random gather {1e9 * k['gather_seconds'] / k['train_tokens']:.1f} ns/token, "
          f"sort of as many 64-bit keys {k['sort_seconds']:.2f} s, "
          f"score {k['test_tokens']:,} test tokens {k['score_seconds']:.1f} s ({k['score_cpu_seconds']:.1f} CPU s), peak {k['peak_gib']:.2f} GiB, |V| {k['V']:,}, "
          f"perplexity {k['test_perplexity']:.1f}, n-gram types {k['ngram_types']}; table entries read by the searches "
          f"per test window {sum(o['probes_per_window'] for o in search):.1f}", flush=True)
    if a.train_updates:
        t = run_step("train", a.mem_cap_gb, env, corpus=corpus, updates=a.train_updates)
        row["train"] = {key: (round(v, 3) if isinstance(v, float) else v) for key, v in t.items()}
        print(f"train: {t['examples_per_second']:.0f} examples per CPU second, {t['examples_per_wall_second']:.0f} per "
              f"wall-clock second (|V| {t['V']:,}), one epoch of "
              f"{t['epoch_examples']:,} examples: {t['epoch_hours']:.1f} h; peak {t['peak_gib']:.2f} GiB", flush=True)
    if a.lmplz and tokens <= a.lmplz_max_tokens:
        row["lmplz"] = measure_lmplz(a, corpus, tmp, env)
    row["load_average_after"] = list(os.getloadavg())
    clear_cache(tmp / f"cache_{tokens}")
    if not a.keep:
        os.unlink(corpus)
    return row


def median_run(runs: list[dict]) -> dict:
    """The runs of one step (fresh processes) as one: the median of each time, the largest peak memory."""
    out = dict(runs[-1])
    for key in runs[0]:
        if key.endswith("seconds"):
            out[key] = statistics.median(r[key] for r in runs)
        elif key.endswith("gib"):
            out[key] = max(r[key] for r in runs)
    return out


def measure_lmplz(a, corpus: str, tmp: Path, env: dict) -> dict:
    """KenLM's lmplz -o 5 on the very training split our model sees (``corpus export``), one
    paragraph per line; ``<unk>`` and ``<t>`` renamed (lmplz reserves ``<unk>``), ``<p>`` dropped
    (lmplz ends every line with its own ``</s>``). Writes an ARPA file, as lmplz always does."""
    out = tmp / "export"
    subprocess.run([sys.executable, "-m", "nplm_edu", "corpus", "export", "--corpus", corpus, "--out", str(out)],
                   check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    text = out / "train_lmplz.txt"
    with open(out / "train.txt", encoding="utf-8") as src, open(text, "w", encoding="utf-8") as dst:
        for line in src:
            dst.write(" ".join({"<unk>": "UNK", "<t>": "TEXTMARK"}.get(w, w) for w in line.split() if w != "<p>") + "\n")
    arpa = tmp / "lmplz.arpa"
    cmd = [a.lmplz, "-o", "5", "-S", a.lmplz_memory, "-T", str(tmp), "--text", str(text), "--arpa", str(arpa)]
    with open(tmp / "lmplz.log", "w") as log:
        _, usage = run_process(cmd, 0, env, stderr=log)
    res = {"command": " ".join(["lmplz"] + cmd[1:]), **usage, "arpa_bytes": arpa.stat().st_size}
    print(f"lmplz: {res['seconds']:.1f} s ({res['cpu_seconds']:.1f} CPU s), peak {res['peak_gib']:.2f} GiB "
          f"(ARPA file of {res['arpa_bytes'] / 1e6:.0f} MB)", flush=True)
    for f in [arpa, *out.glob("*.txt")]:
        f.unlink()
    return res


def growth(rows: list[dict]) -> list[dict]:
    """Cost ratio between consecutive sizes, and over the whole range (smallest to largest) when
    there are more than two, against the n log n ratio (n2 log n2) / (n1 log n1)."""
    out = []
    pairs = list(zip(rows, rows[1:])) + ([(rows[0], rows[-1])] if len(rows) > 2 else [])
    for r1, r2 in pairs:
        n1, n2 = r1["tokens"], r2["tokens"]
        bound = n2 * math.log(n2) / (n1 * math.log(n1))
        g = {"from": n1, "to": n2, "n_ratio": round(n2 / n1, 3), "n_log_n_ratio": round(bound, 3)}
        for key, get in (("read", lambda r: r["read"]["cpu_seconds"]),
                         ("kn5_fit", lambda r: r["kn5"]["fit_cpu_seconds"]),
                         ("kn5_fit_user", lambda r: r["kn5"]["fit_user_seconds"]),
                         ("kn5_fit_system", lambda r: r["kn5"]["fit_system_seconds"]),
                         ("gather", lambda r: r["kn5"]["gather_seconds"]),
                         ("sort", lambda r: r["kn5"]["sort_seconds"]),
                         ("kn5_score", lambda r: r["kn5"]["score_cpu_seconds"]),
                         ("read_memory", lambda r: r["read"]["peak_gib"]),
                         ("kn5_memory", lambda r: r["kn5"]["fit_peak_gib"])):
            try:
                g[key] = round(get(r2) / get(r1), 3)
            except KeyError:  # a row measured by an earlier version of this script
                pass
        out.append(g)
    return out


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["rows"]
    n = [r["tokens"] for r in rows]
    plt.rcParams.update({"font.size": 12})  # 12 pt at 100 dpi: about 15 px in the book's column
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(8.4, 6.4), dpi=100)  # 840 px: the book's column shows it whole
    series = [("C0", "read: corpus info, no cache", "read", "cpu_seconds", "peak_gib"),
              ("C1", "read from the cache", "read_cached", "cpu_seconds", "peak_gib"),
              ("C2", "KN 5-gram fit", "kn5", "fit_cpu_seconds", "fit_peak_gib"),
              ("C3", "KN 5-gram scoring of the test split", "kn5", "score_cpu_seconds", None),
              ("C4", "NPLM: one epoch at the measured speed", "train", "epoch_hours", "peak_gib")]
    for color, label, step, time_key, mem_key in series:
        have = [r for r in rows if step in r]
        if not have:
            continue
        x = [r["tokens"] for r in have]
        scale = 3600 if time_key == "epoch_hours" else 1
        ax1.loglog(x, [scale * r[step][time_key] for r in have], "o-", color=color, label=label)
        if mem_key:
            ax2.loglog(x, [r[step][mem_key] for r in have], "o-", color=color, label=label)
    lm = [r for r in rows if "lmplz" in r]
    if lm:
        x = [r["tokens"] for r in lm]
        ax1.loglog(x, [r["lmplz"]["cpu_seconds"] for r in lm], "s", color="C5", mfc="none", label="KenLM lmplz -o 5")
        ax2.loglog(x, [r["lmplz"]["peak_gib"] for r in lm], "s", color="C5", mfc="none", label="KenLM lmplz -o 5")
    srt = [r for r in rows if "sort_seconds" in r.get("kn5", {})]
    if srt:
        ax1.loglog([r["tokens"] for r in srt], [r["kn5"]["sort_seconds"] for r in srt], "^--", color="0.45",
                   mfc="none", label="numpy sort of n 64-bit keys")
    ref = [rows[-1]["kn5"]["fit_cpu_seconds"] * x * math.log(x) / (n[-1] * math.log(n[-1])) for x in n]
    ax1.loglog(n, ref, "k:", lw=1, label="n log n (through the largest fit)")
    ax1.set(xlabel="corpus tokens", ylabel="CPU seconds (user + system)", title="time")
    ax2.set(xlabel="corpus tokens", ylabel="peak resident memory (GiB)", title="memory")
    handles, labels = ax1.get_legend_handles_labels()
    more = [(h, lab) for h, lab in zip(*ax2.get_legend_handles_labels()) if lab not in labels]
    fig.legend(handles + [h for h, _ in more], labels + [lab for _, lab in more], loc="lower center", ncol=2,
               fontsize=12, frameon=False)
    fig.tight_layout(rect=(0, 0.25, 1, 1))
    fig.savefig(path, dpi=100)


STARTED = time.monotonic()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--step", help=argparse.SUPPRESS)
    ap.add_argument("--kw", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="1e6,1e7,1e8", help="corpus sizes in tokens, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot-only", action="store_true", help="redraw the plot beside --json from its numbers, measure nothing")
    ap.add_argument("--train-updates", type=int, default=40, help="NPLM updates timed per size (0: skip)")
    ap.add_argument("--mem-cap-gb", type=float, default=16.0,
                    help="address-space cap (GiB) of every step but lmplz (0: none)")
    ap.add_argument("--tmp", help="folder for the corpora (default: a new temporary folder)")
    ap.add_argument("--repeats", type=int, default=3,
                    help="kn5 runs per size, each in a fresh process: the median is recorded (all are listed)")
    ap.add_argument("--keep", action="store_true", help="keep the generated corpora")
    ap.add_argument("--lmplz", default=shutil.which("lmplz"), help="KenLM's lmplz, for reference (default: on PATH)")
    ap.add_argument("--lmplz-max-tokens", type=float, default=1e8, help="run lmplz on corpora up to this size")
    ap.add_argument("--lmplz-memory", default="4G", help="lmplz -S (its sorting memory)")
    ap.add_argument("--json", default=None,
                    help="merge the rows into this results file (data/results/scale.json for the book's figures) and "
                         "draw the plot beside it; without it the rows are printed and nothing is written")
    a = ap.parse_args()
    if a.plot_only and not a.json:
        ap.error("--plot-only redraws the plot of a results file: name it with --json")
    if a.repeats < 1:
        ap.error(f"--repeats must be at least 1, got {a.repeats}")
    if a.step:  # a child process: on Ctrl-C the parent speaks, once
        try:
            print(json.dumps(STEPS[a.step](**json.loads(a.kw))))
        except KeyboardInterrupt:
            sys.exit(130)
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = Path(a.json) if a.json else None
    doc = json.loads(out.read_text()) if out and out.exists() else {"rows": []}
    if a.plot_only:
        plot(doc, out.with_suffix(".png"))
        print(f"redrew {out.with_suffix('.png')} from {out}")
        return
    from nplm_edu.data.sources import brown_source
    from nplm_edu.errors import UserError

    try:  # the corpora are resampled from Brown: without it, one line now rather than a child's traceback
        brown_source()
    except UserError as e:
        sys.exit(f"error: {e}")
    tmp = Path(a.tmp or tempfile.mkdtemp(prefix="nplm_scale_"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        measure_sizes(a, doc, out, tmp, env)
    except KeyboardInterrupt:  # one line; the rows of the sizes finished are already written
        print(f"interrupted{f': {out} holds the sizes finished before' if out else ''}", file=sys.stderr)
        sys.exit(130)
    finally:
        if not a.keep:  # a corpus being written, and the caches of the ids
            for f in tmp.glob("brown_bigram_*.txt"):
                f.unlink()
            for cache in tmp.glob("cache_*"):
                clear_cache(cache)
            if not a.tmp:
                shutil.rmtree(tmp, ignore_errors=True)


def measure_sizes(a, doc: dict, out: Path | None, tmp: Path, env: dict) -> None:
    """Measure every size of ``--sizes``, merging each row into ``out`` (if any) as soon as it is done."""
    from nplm_edu.experiments.common import write_results

    prov = provenance(sys.argv[1:])
    for size in (int(float(s)) for s in a.sizes.split(",")):
        samples, stop = [os.getloadavg()[0]], threading.Event()  # one sample at the start: never empty

        def sample():
            while not stop.wait(10):
                samples.append(os.getloadavg()[0])

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        row = measure_size(size, a, tmp, env)
        stop.set()
        sampler.join()
        if samples:
            row["load_average_1min_during"] = {"min": min(samples), "mean": round(sum(samples) / len(samples), 2),
                                               "max": max(samples), "samples": len(samples)}
        row["provenance"] = prov
        doc["rows"] = sorted([r for r in doc["rows"] if r["tokens_nominal"] != size] + [row],
                             key=lambda r: r["tokens_nominal"])
        doc.update(provenance=prov, targets=TARGETS, memory_cap_gib=a.mem_cap_gb, growth=growth(doc["rows"]),
                   lmplz=LMPLZ_NOTE if a.lmplz else "lmplz was not available: not measured",
                   corpus="Brown's tokens resampled by their bigram statistics (1,000 Markov chains), "
                          "one paragraph per line; min_count 4; splits 0.8 / 0.1 / 0.1")
        if out is None:
            print(f"(no --json: the row for {size:,} tokens is not written)", flush=True)
            continue
        write_results(out, doc, STARTED, prov["command"])
        plot(doc, out.with_suffix(".png"))
        print(f"wrote {out} and {out.with_suffix('.png')}", flush=True)


if __name__ == "__main__":
    main()
