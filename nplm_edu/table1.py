"""``python -m nplm_edu reproduce table1``: the neural rows of Table 1 (Brown, section 4 of the paper).

The odd rows are trained networks with the paper's n, h, m and direct connections; each even row
is the network above it mixed with the deleted-interpolation trigram at weight 0.5 (fitted on the
training set, its weights by EM on validation, section 4.1), so it needs no training of its own:

    MLP1  n 5  h  50  m 60  direct      MLP2  = MLP1 + trigram, weight 0.5
    MLP3  n 5  h   0  m 60  direct      MLP4  = MLP3 + trigram
    MLP5  n 5  h  50  m 30  direct      MLP6  = MLP5 + trigram
    MLP7  n 3  h  50  m 30  direct      MLP8  = MLP7 + trigram
    MLP9  n 5  h 100  m 30  no direct   MLP10 = MLP9 + trigram

Commands::

    python -m nplm_edu reproduce table1                    # every row on Brown (hours), data/results/table1.json
    python -m nplm_edu reproduce table1 --rows MLP7,MLP1   # some rows only (the others stay in the file)
    python -m nplm_edu reproduce table1 --quick            # same pipeline on a slice, minutes: table1_quick.json
    python -m nplm_edu reproduce table1 --rows MLP1 --force   # retrain a row from scratch

Training: minibatch SGD (``train.train``) with validation after every epoch, early stopping
(``--patience`` epochs without improvement; the best parameters are kept), up to ``--epochs``.
The defaults are the settings of the committed table: K = 128 examples per update, eps_0 = 1.0 on
the minibatch's mean gradient, r = 1e-4 (so the rate falls to 1 / (1 + 1e-4 * 37,500) = 0.21 after
6 epochs of 6,250 updates on Brown), weight decay 1e-4 as in the paper, at most 6 epochs. The
paper's K = 1 would take about half an hour per epoch per row on one core; ``reproduce minibatch``
shows what minibatches change.
Each row trains in its own folder ``<runs-dir>/table1/<ROW>/`` (``--runs-dir``, default
``$NPLM_EDU_RUNS`` or ``~/.cache/nplm_edu/runs``, outside git) and checkpoints there, so Ctrl-C
or a crash loses at most a few minutes: rerunning the same command resumes inside the row.
A finished row is written into the JSON at once (temp file + rename); a rerun skips rows already
there with the same settings. Raising ``--epochs`` or ``--patience`` continues a row from its
checkpoint.

Per row the JSON holds: the configuration, the exact command, commit, machine, the per-epoch
history (learning curve), epochs run, train/valid/test perplexity, training and evaluation
seconds, the mixtures (weight 0.5 = the paper's; one weight learned by EM on validation; one
weight per trigram context bin), and, on the test set, per frequency bin of the target word
(by its training count) the number of tokens and the mean log-probability of the network, the
trigram and the 0.5 mix: aggregates only, never per-token values or text. The paper's numbers
sit beside ours (full Brown only).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .errors import UserError
from .reproduce import RESULTS, command_line, git_commit, package_modified

# Table 1 (Brown): the trained rows and the paper's (train, valid, test) perplexities
ROWS = {
    "MLP1": dict(n=5, h=50, m=60, direct=True),
    "MLP3": dict(n=5, h=0, m=60, direct=True),
    "MLP5": dict(n=5, h=50, m=30, direct=True),
    "MLP7": dict(n=3, h=50, m=30, direct=True),
    "MLP9": dict(n=5, h=100, m=30, direct=False),
}
MIXED = {"MLP2": "MLP1", "MLP4": "MLP3", "MLP6": "MLP5", "MLP8": "MLP7", "MLP10": "MLP9"}
ORDER = ["MLP1", "MLP2", "MLP3", "MLP4", "MLP5", "MLP6", "MLP7", "MLP8", "MLP9", "MLP10"]
PAPER = {"MLP1": (182, 284, 268), "MLP2": (None, 275, 257), "MLP3": (201, 327, 310), "MLP4": (None, 286, 272),
         "MLP5": (209, 296, 279), "MLP6": (None, 273, 259), "MLP7": (210, 309, 293), "MLP8": (None, 284, 270),
         "MLP9": (175, 280, 276), "MLP10": (None, 265, 252)}
# the SGD settings of data/results/table1.json (the defaults of the command): minibatches of 128, a
# learning rate that decays over the run, at most 6 epochs (see "Training" above and the results chapter)
BATCH, LR, DECAY_RATE, EPOCHS = 128, 1.0, 1e-4, 6
QUICK_SPLIT = (30_000, 10_000, 10_000)  # --quick: at most this many train / valid / test tokens
QUICK_EPOCHS = 3
# frequency bins of the target word by its count in the training set (<unk> apart)
FREQ_BINS = [("0-3", 0, 3), ("4-10", 4, 10), ("11-100", 11, 100), ("101-1000", 101, 1000),
             ("1001-10000", 1001, 10000), (">10000", 10001, None)]
TABLE_KEYS = ("batch", "lr", "decay_rate", "weight_decay", "seed")  # shared by every row of one file


def parse_rows(text: str | None) -> list[str]:
    """'MLP7,mlp1' -> ['MLP1', 'MLP7'] (table order); all trained rows when None."""
    if text is None:
        return list(ROWS)
    names = [t.strip().upper() for t in text.split(",") if t.strip()]
    if not names:
        raise UserError("--rows needs at least one row, e.g. --rows MLP1,MLP9")
    for name in names:
        if name in MIXED:
            raise UserError(f"{name} is {MIXED[name]} mixed with the trigram at weight 0.5: it is computed "
                            f"with {MIXED[name]}, so ask for --rows {MIXED[name]}")
        if name not in ROWS:
            raise UserError(f"unknown row {name!r}: Table 1's trained rows are {', '.join(ROWS)} "
                            f"(the even rows come with them)")
    return [r for r in ROWS if r in names]


def table_corpus(args):
    """The corpus of the run; with --quick a slice of it (the synthetic corpus if Brown is absent)."""
    from .corpus import Corpus, corpus_from_args, load_corpus

    try:
        corpus = corpus_from_args(args)
    except UserError as e:
        if not (args.quick and args.corpus == "brown"):
            raise
        print(f"note: {e}; --quick uses the synthetic corpus instead", flush=True)
        corpus = load_corpus("synthetic", seed=args.corpus_seed, synthetic_tokens=args.synthetic_tokens)
    if not args.quick:
        return corpus
    parts = [corpus.split(s)[:k] for s, k in zip(("train", "valid", "test"), QUICK_SPLIT)]
    if all(len(p) == len(corpus.split(s)) for p, s in zip(parts, ("train", "valid", "test"))):
        return corpus  # already small
    a, b = len(parts[0]), len(parts[0]) + len(parts[1])
    return Corpus(name=f"{corpus.name}[quick]", vocab=corpus.vocab, ids=np.concatenate(parts), bounds=(a, b))


def settings_of(args, corpus) -> dict:
    """Everything that decides the numbers: corpus, SGD settings (TABLE_KEYS), epochs, patience."""
    epochs = args.epochs if args.epochs is not None else (QUICK_EPOCHS if args.quick else EPOCHS)
    return {"corpus": {"name": corpus.name, "V": corpus.V, "min_count": args.min_count,
                       "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid", "test")}},
            "batch": args.batch, "lr": args.lr, "decay_rate": args.decay_rate,
            "weight_decay": args.weight_decay, "seed": args.seed, "epochs": epochs, "patience": args.patience,
            "quick": bool(args.quick)}


def _table_part(s: dict) -> dict:
    return {k: s[k] for k in ("corpus", "quick") + TABLE_KEYS}


def explicit_command(row: str, s: dict, args) -> str:
    """A command that reproduces one row with every setting spelled out."""
    corpus = args.corpus if not s["corpus"]["name"].startswith("synthetic") else "synthetic"
    cmd = (f"python -m nplm_edu reproduce table1 --rows {row} --corpus {corpus} --batch {s['batch']} "
           f"--lr {s['lr']} --decay-rate {s['decay_rate']} --weight-decay {s['weight_decay']} "
           f"--epochs {s['epochs']} --patience {s['patience']} --seed {s['seed']}")
    if corpus == "synthetic":
        cmd += f" --synthetic-tokens {args.synthetic_tokens} --corpus-seed {args.corpus_seed}"
    for opt, v in (("--train-size", args.train_size), ("--valid-size", args.valid_size)):
        if v is not None:
            cmd += f" {opt} {v}"
    if args.min_count != 4:
        cmd += f" --min-count {args.min_count}"
    return cmd + (" --quick" if s["quick"] else "")


def machine() -> str:
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    threads = os.environ.get("OMP_NUM_THREADS", "unset")
    return (f"{cpu}, {os.cpu_count()} cores (OMP_NUM_THREADS={threads}), {platform.system()} "
            f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
            f"numpy {np.__version__}")


# --------------------------------------------------------------------------- files
def write_json_atomic(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(doc, indent=1) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def merge_write(out: Path, doc: dict, rows: tuple[str, ...]) -> dict:
    """Write ``rows`` of doc into out, keeping rows that another process wrote there meanwhile.

    Two ``reproduce table1`` processes with the same settings (one per core, different rows) can
    fill one table: the file is re-read under a lock, merged and replaced atomically."""
    import fcntl

    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        disk = read_doc(out)
        merged = dict(disk["rows"]) if disk and disk.get("settings") == doc.get("settings") else {}
        merged.update({k: v for k, v in doc["rows"].items() if k not in merged or k in rows})
        if disk and "trigram" in disk and "trigram" not in doc:
            doc["trigram"] = disk["trigram"]
        rows_sorted = {k: merged[k] for k in ORDER if k in merged}  # table order
        doc = {**{k: v for k, v in doc.items() if k != "rows"}, "rows": rows_sorted}  # rows last: easier to read
        write_json_atomic(out, doc)
    return doc


def read_doc(path: Path) -> dict | None:
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc.get("rows"), dict):
            raise ValueError("no rows")
        return doc
    except (ValueError, AttributeError) as e:
        raise UserError(f"{path} is not a table1 results file ({e}): move it away or pass another --out") from None


def runs_root(args) -> Path:
    if args.runs_dir:
        return Path(args.runs_dir).expanduser()
    return Path(os.environ.get("NPLM_EDU_RUNS", Path.home() / ".cache" / "nplm_edu" / "runs"))


# --------------------------------------------------------------------------- one row
def train_row(row: str, corpus, s: dict, run_dir: Path, force: bool, quiet: bool):
    """Train (or resume) one odd row in run_dir; returns (model with the best parameters, history)."""
    from .model import NPLM, NPLMConfig
    from .train import TrainConfig, train

    mcfg = NPLMConfig(V=corpus.V, seed=s["seed"], **ROWS[row])
    stamp_data = {"model": asdict(mcfg), **_table_part(s)}
    stamp, ckpt = run_dir / "row_config.json", run_dir / "checkpoint.npz"
    if ckpt.exists():
        old = json.loads(stamp.read_text()) if stamp.exists() else None
        if old != stamp_data and not (force or s["quick"]):
            raise UserError(f"{run_dir} holds a run of {row} with other settings: pass --force to train it "
                            f"again from scratch, or another --runs-dir")
        if old != stamp_data or force:
            shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(stamp, stamp_data)
    cfg = TrainConfig(epochs=s["epochs"], batch=s["batch"], lr=s["lr"], decay_rate=s["decay_rate"],
                      weight_decay=s["weight_decay"], seed=s["seed"], patience=s["patience"])
    model = NPLM(mcfg)
    resumed = ckpt.exists()
    if not quiet:
        print(f"== {row}: n {mcfg.n}, h {mcfg.h}, m {mcfg.m}, direct {mcfg.direct}, {model.num_params():,} "
              f"parameters; {'resuming' if resumed else 'training'} in {run_dir}", flush=True)
    history = train(model, corpus, cfg, out_dir=run_dir, resume=resumed, quiet=quiet)
    return model, history, resumed


def freq_bins(train_counts: np.ndarray, unk: int, targets: np.ndarray, logs: dict) -> list[dict]:
    """Aggregate log-probabilities of the test targets per frequency bin (no per-token data)."""
    c = train_counts[targets]
    masks = [("unk", targets == unk)]
    masks += [(name, (targets != unk) & (c >= lo) & ((c <= hi) if hi is not None else True))
              for name, lo, hi in FREQ_BINS]
    out = []
    for name, mask in masks:
        k = int(mask.sum())
        entry = {"bin": name, "tokens": k}
        entry.update({f"mean_log_prob_{m}": (round(float(v[mask].mean()), 5) if k else None) for m, v in logs.items()})
        entry["mlp_beats_trigram"] = round(float(np.mean(logs["mlp"][mask] > logs["trigram"][mask])), 4) if k else None
        out.append(entry)
    return out


def evaluate_row(model, tri, corpus, train_counts, others: dict | None = None) -> dict:
    """Perplexities of the network alone and mixed with the trigram, plus the frequency-bin table.
    ``others``: more n-gram models by name (of order at most the network's), each also mixed with the
    network by one EM weight and by EM weights per trigram bin (``mix["<name>_em"]``, ``mix["<name>_per_bin"]``)."""
    from .mixture import Mixture, batched_log_prob, em_weight, mixed_log_prob

    def ppl(lp):
        return float(math.exp(-np.mean(lp)))

    n = model.order
    out = {"train": model.perplexity(*corpus.windows("train", n), batch=1024)}
    (vc, vt), (tc, tt) = corpus.windows("valid", n), corpus.windows("test", n)
    mix = Mixture(model, tri, 0.5)
    lv, lt = mix.component_log_probs(vc, vt), mix.component_log_probs(tc, tt)  # (log P_mlp, log P_trigram)
    out["valid"], out["test"] = ppl(lv[0]), ppl(lt[0])
    qv, qt = tri.bins(vc[:, -2:]), tri.bins(tc[:, -2:])

    def fitted(ov, ot):
        """The network mixed with another model (its log-probs on valid, test): one EM weight, and EM
        weights per trigram context bin, both fitted on validation."""
        w, ws = float(em_weight(lv[0], ov)[0]), em_weight(lv[0], ov, qv, tri.n_bins)
        return ({"weight": w, "valid": ppl(mixed_log_prob(lv[0], ov, w)), "test": ppl(mixed_log_prob(lt[0], ot, w))},
                {"weights": [round(float(x), 5) for x in ws], "valid": ppl(mixed_log_prob(lv[0], ov, ws[qv])),
                 "test": ppl(mixed_log_prob(lt[0], ot, ws[qt]))})

    em, per_bin = fitted(lv[1], lt[1])
    out["mix"] = {"0.5": {"weight": 0.5, "valid": ppl(mixed_log_prob(*lv, 0.5)), "test": ppl(mixed_log_prob(*lt, 0.5))},
                  "em": em, "per_bin": per_bin}
    for name, lm in (others or {}).items():
        if lm.order > n:
            raise UserError(f"cannot mix the n = {n} network with the order-{lm.order} model {name}")
        ov, ot = batched_log_prob(lm, vc, vt), batched_log_prob(lm, tc, tt)  # (T,) log P_name
        em, per_bin = fitted(ov, ot)
        out["mix"][f"{name}_em"] = {**em, "alone_valid": ppl(ov), "alone_test": ppl(ot)}
        out["mix"][f"{name}_per_bin"] = per_bin
    logs = {"mlp": lt[0], "trigram": lt[1], "mix": mixed_log_prob(*lt, 0.5)}
    out["test_by_frequency"] = freq_bins(train_counts, corpus.vocab.unk, tt, logs)
    return out


def _r(x):
    return None if x is None else round(float(x), 3)


# --------------------------------------------------------------------------- the target
def run_table1(args) -> Path:
    """Train and evaluate the requested rows, writing each into the JSON as soon as it is done."""
    rows = parse_rows(args.rows)
    corpus = table_corpus(args)
    s = settings_of(args, corpus)
    out = Path(args.out) if args.out else RESULTS / ("table1_quick.json" if args.quick else "table1.json")
    runs = runs_root(args) / out.stem
    doc = read_doc(out)
    if doc is not None and doc.get("settings") != _table_part(s):
        if not args.force:
            raise UserError(f"{out} was made with other settings ({_diff(doc.get('settings'), _table_part(s))}): "
                            f"pass --force to start the table again, or another --out")
        doc = None
    tokens = s["corpus"]["tokens"]
    full_brown = (corpus.name == "brown" and not args.quick and args.min_count == 4
                  and (tokens["train"], tokens["valid"]) == (800_000, 200_000))  # the paper's setting
    doc = doc or {"rows": {}}
    doc.update(settings=_table_part(s), corpus=corpus.name, V=corpus.V, tokens=s["corpus"]["tokens"],
               quick=bool(args.quick), note=(
                   "perplexity over every token of each split (valid/test contexts reach into the previous "
                   "split); mix = the network mixed with the deleted-interpolation trigram: weight 0.5 (the "
                   "paper's), one EM weight fitted on validation, or one EM weight per trigram context bin; "
                   "test_by_frequency: test tokens binned by the target's training count, mean natural-log "
                   "probabilities; seconds are wall clock on a shared machine (noisy)"))
    tri = train_counts = None
    todo = [r for r in rows if args.force or _row_stale(doc["rows"].get(r), s)]
    for r in rows:
        if r not in todo and not args.quiet:
            print(f"{r}: already in {out} with these settings, skipped (--force retrains it)")
    for row in todo:
        model, history, resumed = train_row(row, corpus, s, runs / row, args.force, args.quiet)
        if tri is None:
            tri, train_counts = _fit_trigram(corpus, doc, full_brown)
        if not args.quiet:
            print(f"   {row}: scoring train, valid and test, mixing with the trigram", flush=True)
        t0 = time.perf_counter()
        ev = evaluate_row(model, tri, corpus, train_counts)
        t_eval = time.perf_counter() - t0
        epochs = history["epochs"]
        best = min(range(len(epochs)), key=lambda i: epochs[i].get("valid_ppl", math.inf)) + 1 if epochs else None
        paper = PAPER[row] if full_brown else (None, None, None)
        stamp = {"command": command_line(), "command_explicit": explicit_command(row, s, args),
                 "commit": git_commit(), "package_modified_since_commit": package_modified(),
                 "machine": machine(), "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        doc["rows"][row] = {
            "row": row, **ROWS[row], "mix": False, "model": asdict(model.config),
            "train_settings": {k: s[k] for k in TABLE_KEYS + ("epochs", "patience")},
            "epochs_run": len(epochs), "best_epoch": best, "updates": history["updates"],
            "early_stopped": len(epochs) < s["epochs"], "resumed": resumed,
            "train": _r(ev["train"]), "valid": _r(ev["valid"]), "test": _r(ev["test"]),
            "paper": dict(zip(("train", "valid", "test"), paper)),
            "mixtures": {k: {kk: (_r(vv) if kk != "weights" else vv) for kk, vv in v.items()}
                         for k, v in ev["mix"].items()},
            "test_by_frequency": ev["test_by_frequency"],
            "history": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in e.items()} for e in epochs],
            "seconds_training": round(sum(e["seconds"] for e in epochs), 2), "seconds_evaluation": round(t_eval, 2),
            **stamp}
        even = next(k for k, v in MIXED.items() if v == row)
        doc["rows"][even] = {"row": even, **ROWS[row], "mix": True, "network": row, "mix_weight": 0.5,
                             "valid": _r(ev["mix"]["0.5"]["valid"]), "test": _r(ev["mix"]["0.5"]["test"]),
                             "paper": dict(zip(("valid", "test"), PAPER[even][1:] if full_brown else (None, None))),
                             **stamp}
        doc.update(command=stamp["command"], commit=stamp["commit"], updated=stamp["finished"])
        doc = merge_write(out, doc, (row, even))
        if not args.quiet:
            print(f"   {row}: valid {ev['valid']:.1f}, test {ev['test']:.1f}; {even} (mix 0.5): "
                  f"test {ev['mix']['0.5']['test']:.1f}; written to {out}", flush=True)
    if args.save_features if args.save_features is not None else not args.quick:
        save_features(read_doc(out) or doc, runs, corpus, out.with_name(out.stem + "_features.npz"), args.quiet)
    print_table(read_doc(out) or doc, kn5_test(corpus, full_brown))
    print(f"wrote {out}")
    return out


def vocab_fingerprint(vocab) -> str:
    """A short hash of the word list: features saved on one machine match a vocabulary on another."""
    import hashlib

    return hashlib.sha256("\n".join(vocab.words).encode("utf-8")).hexdigest()[:16]


def save_features(doc: dict, runs: Path, corpus, path: Path, quiet: bool = False) -> Path | None:
    """Save C, the word features of the table's best network (lowest validation perplexity among
    the trained rows whose checkpoint is in ``runs``), as float16 next to the table.

    The embeddings chapter reads its nearest neighbours from this file. It holds numbers only, one
    row per word id, and the fingerprint of the vocabulary they belong to; the words themselves
    come from the reader's own copy of the corpus."""
    from .train import model_from_checkpoint

    done = [r for r in ROWS if r in doc["rows"] and (runs / r / "checkpoint.npz").exists()]
    if not done:
        return None
    row = min(done, key=lambda r: doc["rows"][r]["valid"])
    entry = doc["rows"][row]
    if path.exists():
        with np.load(path, allow_pickle=False) as old:
            if str(old["row"]) == row and str(old["finished"]) == entry["finished"]:
                return path  # up to date
    model = model_from_checkpoint(runs / row / "checkpoint.npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, C=model.params["C"].astype(np.float16), row=row, valid=entry["valid"],
                        test=entry["test"], finished=entry["finished"], V=corpus.V,
                        vocab_sha=vocab_fingerprint(corpus.vocab), corpus=corpus.name)
    os.replace(tmp, path)
    if not quiet:
        print(f"word features of {row} (valid {entry['valid']:.1f}) written to {path}", flush=True)
    return path


def _row_stale(entry: dict | None, s: dict) -> bool:
    if entry is None:
        return True
    t = entry.get("train_settings", {})
    return t.get("epochs") != s["epochs"] or t.get("patience") != s["patience"]


def _diff(old: dict | None, new: dict) -> str:
    if not old:
        return "none recorded"
    keys = sorted(set(old) | set(new), key=str)
    return ", ".join(f"{k} {old.get(k)} -> {new.get(k)}" for k in keys if old.get(k) != new.get(k))


def _fit_trigram(corpus, doc, full_brown: bool):
    """The deleted-interpolation trigram (section 4.1), fitted once per run; its perplexities go in doc."""
    from .ngram import InterpolatedTrigram

    tri = InterpolatedTrigram(corpus.V, verbose=False).fit(corpus.train, valid=corpus.windows("valid", 3), iterations=5)
    doc["trigram"] = {s: _r(tri.perplexity(*corpus.windows(s, 3))) for s in ("train", "valid", "test")}
    paper = (31, 352, 336) if full_brown else (None, None, None)  # Table 1's "Del. Int." row
    doc["trigram"]["paper"] = dict(zip(("train", "valid", "test"), paper))
    return tri, np.bincount(corpus.train, minlength=corpus.V)


def kn5_test(corpus, full_brown: bool) -> float | None:
    """Our modified Kneser-Ney 5-gram's test perplexity from ngrams.json (full Brown only)."""
    path = RESULTS / "ngrams.json"
    if not full_brown or not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
        if doc.get("corpus") != corpus.name or doc.get("V") != corpus.V:
            return None
        return next(r["test"] for r in doc["rows"] if r["model"] == "kn" and r["order"] == 5)
    except (ValueError, KeyError, StopIteration, TypeError):
        return None


def print_table(doc: dict, kn5: float | None) -> None:
    """Ours beside the paper's; the last column is our test perplexity over our KN 5-gram's."""
    def f(x):
        return f"{x:7.1f}" if isinstance(x, (int, float)) else f"{'-':>7}"

    def g(x):  # the paper's numbers are integers
        return f"{x:5.0f}" if isinstance(x, (int, float)) else f"{'-':>5}"

    print(f"\nTable 1 ({doc['corpus']}, |V| = {doc['V']:,})" + ("  [--quick slice: not comparable to the paper]"
                                                               if doc.get("quick") else ""))
    print(f"{'row':6} {'n':>2} {'h':>4} {'m':>3} {'direct':>6} {'mix':>4} {'epochs':>6} {'train':>7} {'valid':>7} "
          f"{'test':>7} | {'paper:':>7} {'train':>5} {'valid':>5} {'test':>5} | {'test/KN5':>8}")
    for name in ORDER:
        r = doc["rows"].get(name)
        if r is None:
            continue
        p = r["paper"]
        ratio = f"{r['test'] / kn5:8.3f}" if kn5 and r.get("test") else f"{'-':>8}"
        print(f"{name:6} {r['n']:>2} {r['h']:>4} {r['m']:>3} {'yes' if r['direct'] else 'no':>6} "
              f"{'yes' if r['mix'] else 'no':>4} {r.get('epochs_run', ''):>6} {f(r.get('train'))} {f(r['valid'])} "
              f"{f(r['test'])} | {'':7} {g(p.get('train'))} {g(p['valid'])} {g(p['test'])} | {ratio}")
    if "trigram" in doc:
        t = doc["trigram"]
        p = t.get("paper", {})
        ratio = f"{t['test'] / kn5:8.3f}" if kn5 else f"{'-':>8}"
        print(f"{'DelInt':6} {3:>2} {'':>4} {'':>3} {'':>6} {'':>4} {'':>6} {f(t['train'])} {f(t['valid'])} "
              f"{f(t['test'])} | {'':7} {g(p.get('train'))} {g(p.get('valid'))} {g(p.get('test'))} | {ratio}")
    if kn5:
        print(f"(our KN 5-gram test perplexity, from data/results/ngrams.json: {kn5:.1f}; paper 321)")


def add_args(p) -> None:
    """The table1 options of ``reproduce`` (the corpus options come from ``reproduce``)."""
    from .train import TrainConfig

    d = TrainConfig()
    p.add_argument("--rows", default=None, help="table1: trained rows to run, e.g. MLP1,MLP9 (default all: "
                                                "MLP1,MLP3,MLP5,MLP7,MLP9; each brings its mixed even row); "
                                                "minibatch: the one network to train (default MLP9)")
    p.add_argument("--quick", action="store_true", help="table1: same pipeline on a slice (30k/10k/10k tokens, "
                                                        f"{QUICK_EPOCHS} epochs) in minutes, into table1_quick.json")
    p.add_argument("--epochs", type=int, default=None, help=f"table1, minibatch: at most this many epochs (default "
                                                            f"{EPOCHS}; {QUICK_EPOCHS} with --quick; minibatch 4)")
    p.add_argument("--batch", type=int, default=BATCH, help=f"table1: minibatch size K (default {BATCH})")
    p.add_argument("--lr", type=float, default=LR, help=f"table1: initial learning rate eps_0 (default {LR})")
    p.add_argument("--decay-rate", type=float, default=DECAY_RATE,
                   help=f"table1: r in eps_0 / (1 + r t), t the number of updates (default {DECAY_RATE:g})")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay,
                   help="table1: weight decay on C, H, U, W (default 1e-4, the paper's for Brown)")
    p.add_argument("--patience", type=int, default=d.patience,
                   help=f"table1: stop after this many epochs without a better validation perplexity "
                        f"(default {d.patience})")
    p.add_argument("--seed", type=int, default=0, help="table1: initialisation and shuffling seed (default 0)")
    p.add_argument("--runs-dir", default=None, help="table1: where rows checkpoint (default $NPLM_EDU_RUNS or "
                                                    "~/.cache/nplm_edu/runs)")
    p.add_argument("--force", action="store_true", help="table1: retrain the requested rows from scratch")
    p.add_argument("--save-features", action=argparse.BooleanOptionalAction, default=None,
                   help="table1: write the best network's word features C to <out>_features.npz (default: "
                        "yes, but not with --quick)")
