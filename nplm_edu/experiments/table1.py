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
    python -m nplm_edu reproduce table1 --rows MLP9,MLP7 &  # two processes, one per core, fill one file
    python -m nplm_edu reproduce table1 --rows MLP1,MLP5
    python -m nplm_edu results --runs                      # how far each row has got
    python -m nplm_edu reproduce table1 --rows MLP7,MLP1   # some rows only (the others stay in the file)
    python -m nplm_edu reproduce table1 --quick            # same pipeline on a slice, minutes: runs/results/table1_quick.json
    python -m nplm_edu reproduce table1 --rows MLP1 --force   # retrain a row from scratch

Training: minibatch SGD (``train.train``) with validation after every epoch and early stopping, as in
the paper: a row stops after ``--patience`` epochs without a lower validation perplexity and keeps its
best parameters, or after ``--epochs``. These two were fixed before the runs of data/results/table1.json and
are the same for every row: patience 3, at most 30 epochs (the paper trained 10 to 20 epochs on Brown).
The other defaults are that table's too: K = 128 examples per update, eps_0 = 1.0 on the
minibatch's mean gradient, r = 1e-4 per update (6,250 updates per epoch on Brown, so the rate is 0.29
after 4 epochs, 0.14 after 10, 0.05 after 30), weight decay 1e-4 as in the paper. The paper's K = 1
would take about 19 minutes per epoch of MLP9 on one core (data/results/minibatch.json); ``reproduce minibatch`` shows what
minibatches change.

One more network is trained beside the table, for the paper's remark on direct connections (section
4.2: with them, training converged about twice as fast): ``MLP1-ND`` is MLP1 (n 5, h 50, m 60) without
direct connections, so MLP1 and MLP1-ND differ only in W. ``--rows MLP1-ND`` trains it; it has no mixed
row and is not part of the paper's table.

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
trigram and the 0.5 mix: aggregates only, never per-token values; and three samples of 30 words drawn
from the trained network (``analysis.sampling.seeded_samples``: sampling seeds 0, 1 and 2, each
continuing the first four words of the validation split), the only text the file holds. The
paper's numbers sit beside ours (full Brown only).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..analysis.evaluation import evaluate_row, fit_trigram, r3
from ..analysis.sampling import seeded_samples
from ..data.corpus import CorpusSpec
from ..data.files import atomic_write
from ..errors import UserError
from ..models.nplm import NPLMConfig
from ..numerics.fused import FusedNPLM
from ..training.checkpoint import model_from_checkpoint
from ..training.trainer import TrainConfig, train
from .common import is_full_brown, kn5_test, provenance
from .skeleton import merge_results, read_results, results_file, rounded_history, run_folder, runs_for

# Table 1 (Brown): the trained rows and the paper's (train, valid, test) perplexities
ROWS = {
    "MLP1": dict(n=5, h=50, m=60, direct=True),
    "MLP3": dict(n=5, h=0, m=60, direct=True),
    "MLP5": dict(n=5, h=50, m=30, direct=True),
    "MLP7": dict(n=3, h=50, m=30, direct=True),
    "MLP9": dict(n=5, h=100, m=30, direct=False),
}
# trained beside the table, not one of its rows: MLP1 without direct connections (the paper, section 4.2)
EXTRA = {"MLP1-ND": dict(n=5, h=50, m=60, direct=False)}
NETWORKS = {**ROWS, **EXTRA}
MIXED = {"MLP2": "MLP1", "MLP4": "MLP3", "MLP6": "MLP5", "MLP8": "MLP7", "MLP10": "MLP9"}
ORDER = ["MLP1", "MLP2", "MLP3", "MLP4", "MLP5", "MLP6", "MLP7", "MLP8", "MLP9", "MLP10"]  # the paper's table
LISTED = ORDER + list(EXTRA)  # the order of the rows in the results file
PAPER = {"MLP1": (182, 284, 268), "MLP2": (None, 275, 257), "MLP3": (201, 327, 310), "MLP4": (None, 286, 272),
         "MLP5": (209, 296, 279), "MLP6": (None, 273, 259), "MLP7": (210, 309, 293), "MLP8": (None, 284, 270),
         "MLP9": (175, 280, 276), "MLP10": (None, 265, 252)}
# the SGD settings of data/results/table1.json (the defaults of the command): minibatches of 128, a
# learning rate that decays over the run, early stopping with patience 3 and at most 30 epochs, fixed
# before the runs (see "Training" above and the results chapter)
TRAIN = TrainConfig(epochs=30, batch=128, lr=1.0, decay_rate=1e-4, weight_decay=1e-4, patience=3, seed=0)
TRAIN_OPTIONS = ("epochs", "batch", "lr", "decay_rate", "weight_decay", "patience", "seed")  # offered by the CLI
QUICK_SPLIT = (30_000, 10_000, 10_000)  # --quick: at most this many train / valid / test tokens
QUICK_EPOCHS = 3
TABLE_KEYS = ("batch", "lr", "decay_rate", "weight_decay", "seed")  # shared by every row of one file


@dataclass
class Table1Options:
    """What to run: ``rows`` (e.g. "MLP1,MLP9"; None: all), ``quick`` (a slice, 3 epochs, in minutes),
    ``runs_dir`` (where rows checkpoint), ``force`` (retrain from scratch), ``save_features`` (the best
    network's C for the embeddings chapter; never with ``quick``)."""

    rows: str | None = None
    quick: bool = False
    runs_dir: str | None = None
    force: bool = False
    save_features: bool = True


def single_row(text: str, target: str) -> str:
    """The one trained row a target runs (``reproduce minibatch``, ``lr-sweep``): one clear line otherwise."""
    rows = parse_rows(text, setting="row")
    if len(rows) != 1:
        raise UserError(f"row names the one network reproduce {target} trains, got {text}", setting="row")
    return rows[0]


def parse_rows(text: str | None, setting: str = "rows") -> list[str]:
    """'MLP7,mlp1' -> ['MLP1', 'MLP7'] (table order); all trained rows and MLP1-ND when None. ``setting``:
    the name errors give the setting (``row`` where one row is asked for)."""
    if text is None:
        return list(NETWORKS)
    names = [t.strip().upper() for t in text.split(",") if t.strip()]
    if not names:
        raise UserError(f"{setting} needs at least one row, e.g. MLP1,MLP9", setting=setting)
    for name in names:
        if name in MIXED:
            raise UserError(f"{setting} names {name}, which is {MIXED[name]} mixed with the trigram at weight 0.5: it "
                            f"is computed with {MIXED[name]}, so ask for {MIXED[name]}", setting=setting)
        if name not in NETWORKS:
            raise UserError(f"{setting} names an unknown row {name!r}: Table 1's trained rows are {', '.join(ROWS)} "
                            f"(the even rows come with them), and {', '.join(EXTRA)} beside them", setting=setting)
    return [r for r in NETWORKS if r in names]


def table_corpus(spec: CorpusSpec, quick: bool):
    """The corpus of the run; with ``quick`` a slice of it (the synthetic corpus if Brown is absent)."""
    try:
        corpus = spec.load()
    except UserError as e:
        if not (quick and spec.corpus == "brown"):
            raise
        print(f"note: {e}; the quick run uses the synthetic corpus instead", flush=True)
        corpus = replace(spec, corpus="synthetic").load()
    if not quick:
        return corpus
    return corpus.head(QUICK_SPLIT, "quick")


def settings_of(cfg: TrainConfig, spec: CorpusSpec, corpus, quick: bool) -> dict:
    """Everything that decides the numbers: corpus, SGD settings (TABLE_KEYS), epochs, patience."""
    epochs = min(cfg.epochs, QUICK_EPOCHS) if quick else cfg.epochs
    return {"corpus": {"name": corpus.name, "V": corpus.V, "min_count": spec.min_count,
                       "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid", "test")}},
            **{k: getattr(cfg, k) for k in TABLE_KEYS}, "epochs": epochs, "patience": cfg.patience,
            "quick": bool(quick)}


def _table_part(s: dict) -> dict:
    return {k: s[k] for k in ("corpus", "quick") + TABLE_KEYS}


def explicit_command(row: str, s: dict, spec: CorpusSpec) -> str:
    """A command that reproduces one row with every setting spelled out."""
    corpus = spec.corpus if not s["corpus"]["name"].startswith("synthetic") else "synthetic"
    cmd = (f"python -m nplm_edu reproduce table1 --rows {row} --corpus {corpus} --batch {s['batch']} "
           f"--lr {s['lr']} --decay-rate {s['decay_rate']} --weight-decay {s['weight_decay']} "
           f"--epochs {s['epochs']} --patience {s['patience']} --seed {s['seed']}")
    if corpus == "synthetic":
        cmd += f" --synthetic-tokens {spec.synthetic_tokens} --corpus-seed {spec.corpus_seed}"
    sizes = (("--train-size", spec.train_size), ("--valid-size", spec.valid_size), ("--test-size", spec.test_size))
    for opt, v in sizes:
        if v is not None:
            cmd += f" {opt} {v}"
    if spec.min_count != 4:
        cmd += f" --min-count {spec.min_count}"
    return cmd + (" --quick" if s["quick"] else "")


def read_doc(path: Path) -> dict | None:
    return read_results(path, "table1")


# --------------------------------------------------------------------------- one row
def train_row(row: str, corpus, s: dict, run_dir: Path, force: bool, quiet: bool):
    """Train (or resume) one odd row in run_dir; returns (model with the best parameters, history)."""
    mcfg = NPLMConfig(V=corpus.V, seed=s["seed"], **NETWORKS[row])
    cfg = TrainConfig(epochs=s["epochs"], batch=s["batch"], lr=s["lr"], decay_rate=s["decay_rate"],
                      weight_decay=s["weight_decay"], seed=s["seed"], patience=s["patience"])
    model = FusedNPLM(mcfg)
    stamp = {"model": asdict(mcfg), **_table_part(s)}
    with run_folder(run_dir, stamp, force, s["quick"], what=row, name="row_config.json") as resumed:
        if not quiet:
            print(f"== {row}: n {mcfg.n}, h {mcfg.h}, m {mcfg.m}, direct {mcfg.direct}, {model.num_params():,} "
                  f"parameters; {'resuming' if resumed else 'training'} in {run_dir}", flush=True)
        history = train(model, corpus, cfg, out_dir=run_dir, resume=resumed, quiet=quiet)
    return model, history, resumed


def row_entries(row: str, model, history: dict, ev: dict, s: dict, full_brown: bool, stamp: dict, run: dict) -> dict:
    """The results file's rows for one trained network: its own and, for a row of the table, the mixed
    even row below it."""
    epochs = history["epochs"]
    paper = PAPER.get(row, (None, None, None)) if full_brown else (None, None, None)
    out = {row: {
        "row": row, **NETWORKS[row], "mix": False, "model": asdict(model.config),
        "train_settings": {k: s[k] for k in TABLE_KEYS + ("epochs", "patience")},
        "epochs_run": len(epochs), "best_epoch": history["best_epoch"], "updates": history["updates"],
        "early_stopped": len(epochs) < s["epochs"], "resumed": run["resumed"],
        "train": r3(ev["train"]), "valid": r3(ev["valid"]), "test": r3(ev["test"]),
        "paper": dict(zip(("train", "valid", "test"), paper)),
        "mixtures": {k: {kk: (r3(vv) if kk != "weights" else vv) for kk, vv in v.items()}
                     for k, v in ev["mix"].items()},
        "test_by_frequency": ev["test_by_frequency"], "history": rounded_history(epochs),
        "seconds_training": round(sum(e["seconds"] for e in epochs), 2),
        "seconds_evaluation": run["seconds_evaluation"], "samples": run["samples"], **stamp}}
    even = next((k for k, v in MIXED.items() if v == row), None)  # None: a network beside the table
    if even:
        out[even] = {"row": even, **ROWS[row], "mix": True, "network": row, "mix_weight": 0.5,
                     "valid": r3(ev["mix"]["0.5"]["valid"]), "test": r3(ev["mix"]["0.5"]["test"]),
                     "paper": dict(zip(("valid", "test"), PAPER[even][1:] if full_brown else (None, None))), **stamp}
    return out


NOTE = ("perplexity over every token of each split (valid/test contexts reach into the previous split); mix = the "
        "network mixed with the deleted-interpolation trigram: weight 0.5 (the paper's), one EM weight fitted on "
        "validation, or one EM weight per trigram context bin; test_by_frequency: test tokens binned by the "
        "target's training count, mean natural-log probabilities; seconds are wall clock on a shared machine "
        "(noisy)")


def start_doc(out: Path, s: dict, corpus, force: bool) -> dict:
    """The results file as it stands (refused if of other settings, unless ``force``), with this run's header."""
    doc = read_doc(out)
    if doc is not None and doc.get("settings") != _table_part(s):
        if not force:
            raise UserError(f"{out} was made with other settings ({_diff(doc.get('settings'), _table_part(s))}): "
                            f"`force` starts the table again, or another `out`")
        doc = None
    doc = doc or {"rows": {}}
    doc.update(settings=_table_part(s), corpus=corpus.name, V=corpus.V, tokens=s["corpus"]["tokens"],
               quick=bool(s["quick"]), note=NOTE)
    return doc


# --------------------------------------------------------------------------- the target
def run_table1(cfg: TrainConfig = TRAIN, opts: Table1Options | None = None, spec: CorpusSpec | None = None,
               out=None, quiet: bool = False) -> Path:
    """Train and evaluate the requested rows, writing each into the JSON as soon as it is done."""
    opts = opts or Table1Options()
    spec = spec or CorpusSpec(corpus="brown")
    rows = parse_rows(opts.rows)
    cfg.validate()
    out = results_file(out, "table1", opts.quick)  # checked before any work
    corpus = table_corpus(spec, opts.quick)
    s = settings_of(cfg, spec, corpus, opts.quick)
    runs = runs_for(opts.runs_dir, out)
    doc = start_doc(out, s, corpus, opts.force)
    full_brown = not opts.quick and is_full_brown(corpus, spec.min_count)  # the paper's setting
    tri = train_counts = None
    todo = [r for r in rows if opts.force or _row_stale(doc["rows"].get(r), s)]
    for r in rows:
        if r not in todo and not quiet:
            print(f"{r}: already in {out} with these settings, skipped")
    for row in todo:
        started = time.monotonic()
        model, history, resumed = train_row(row, corpus, s, runs / row, opts.force, quiet)
        if tri is None:
            tri, train_counts = fit_trigram(corpus, doc, full_brown)
        if not quiet:
            print(f"   {row}: scoring train, valid and test, mixing with the trigram", flush=True)
        t0 = time.perf_counter()
        ev = evaluate_row(model, tri, corpus, train_counts)
        stamp = {**provenance(started), "command_explicit": explicit_command(row, s, spec)}
        run = {"resumed": resumed, "seconds_evaluation": round(time.perf_counter() - t0, 2),
               "samples": seeded_samples(model, corpus)}
        new = row_entries(row, model, history, ev, s, full_brown, stamp, run)
        doc = merge_results(out, "table1", doc, new, started, same=("settings",), order=LISTED)
        if not quiet:
            print(f"   {row}: valid {ev['valid']:.1f}, test {ev['test']:.1f}; mixed at 0.5 with the trigram"
                  f"{f' ({list(new)[1]})' if len(new) > 1 else ''}: test {ev['mix']['0.5']['test']:.1f}; written to "
                  f"{out}", flush=True)
    if opts.save_features and not opts.quick:
        save_features(read_doc(out) or doc, runs, corpus, out.with_name(out.stem + "_features.npz"), quiet)
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
    done = [r for r in ROWS if r in doc["rows"] and (runs / r / "checkpoint.npz").exists()]  # the table's rows
    if not done:
        return None
    row = min(done, key=lambda r: doc["rows"][r]["valid"])
    entry = doc["rows"][row]
    if path.exists():
        with np.load(path, allow_pickle=False) as old:
            if str(old["row"]) == row and str(old["finished"]) == str(entry.get("date", entry.get("finished"))):
                return path  # up to date
    model = model_from_checkpoint(runs / row / "checkpoint.npz")
    atomic_write(path, lambda f: np.savez_compressed(
        f, C=model.params["C"].astype(np.float16), row=row, valid=entry["valid"], test=entry["test"],
        finished=str(entry.get("date", entry.get("finished"))), V=corpus.V, vocab_sha=vocab_fingerprint(corpus.vocab),
        corpus=corpus.name))
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


def print_table(doc: dict, kn5: float | None) -> None:
    """Ours beside the paper's; the last column is our test perplexity over our KN 5-gram's."""
    def f(x):
        return f"{x:7.1f}" if isinstance(x, (int, float)) else f"{'-':>7}"

    def g(x):  # the paper's numbers are integers
        return f"{x:5.0f}" if isinstance(x, (int, float)) else f"{'-':>5}"

    print(f"\nTable 1 ({doc['corpus']}, |V| = {doc['V']:,})" + ("  [--quick slice: not comparable to the paper]"
                                                               if doc.get("quick") else ""))
    print(f"{'row':7} {'n':>2} {'h':>4} {'m':>3} {'direct':>6} {'mix':>4} {'epochs':>6} {'train':>7} {'valid':>7} "
          f"{'test':>7} | {'paper:':>7} {'train':>5} {'valid':>5} {'test':>5} | {'test/KN5':>8}")
    for name in LISTED:
        r = doc["rows"].get(name)
        if r is None:
            continue
        p = r["paper"]
        ratio = f"{r['test'] / kn5:8.3f}" if kn5 and r.get("test") else f"{'-':>8}"
        print(f"{name:7} {r['n']:>2} {r['h']:>4} {r['m']:>3} {'yes' if r['direct'] else 'no':>6} "
              f"{'yes' if r['mix'] else 'no':>4} {r.get('epochs_run', ''):>6} {f(r.get('train'))} {f(r['valid'])} "
              f"{f(r['test'])} | {'':7} {g(p.get('train'))} {g(p['valid'])} {g(p['test'])} | {ratio}")
    if "trigram" in doc:
        t = doc["trigram"]
        p = t.get("paper", {})
        ratio = f"{t['test'] / kn5:8.3f}" if kn5 else f"{'-':>8}"
        print(f"{'DelInt':7} {3:>2} {'':>4} {'':>3} {'':>6} {'':>4} {'':>6} {f(t['train'])} {f(t['valid'])} "
              f"{f(t['test'])} | {'':7} {g(p.get('train'))} {g(p.get('valid'))} {g(p.get('test'))} | {ratio}")
    if kn5:
        print(f"(our KN 5-gram test perplexity, from data/results/ngrams.json: {kn5:.1f}; paper 321)")
