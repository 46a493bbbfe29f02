"""``python -m nplm_edu reproduce output-layers``: the output layer solved five ways, measured on Brown.

The paper's section 5 proposes a tree-structured output and importance sampling to get around the
|V|-wide softmax (about 99.3% of MLP9's multiply-adds on Brown); later work added the class-factored
softmax and NCE (Goodman 2001; Mnih & Teh 2012). This command trains MLP9 of Table 1 (n 5, h 100, m 30, no
direct connections) on Brown (the paper's split, |V| = 17,907) once per output layer
(:mod:`nplm_edu.experiments.output_methods`), from the same seed, with the same batch, schedule
(Table 1's: K = 128, lr 1.0, r = 1e-4, weight decay 1e-4) and number of epochs, the full softmax
included in the same command, and reports for each:

* training examples per second (updates only, validation excluded) and its ratio to the full
  softmax's in the same file (same machine and threads: see each row's provenance);
* exact validation and test perplexity (every layer is a normalized model; the sampled objectives
  are evaluated with the full softmax over their U and b) and the ratio to the full softmax's;
* examples per second of the exact test-set evaluation, and its ratio to the full softmax's;
* for importance sampling and NCE: log Z over the test set and the self-normalized perplexity.

Separately (``energy`` in the JSON), the energy-minimization network of section 5 and the paper's
network with the same n, m, h, trained alike on a slice of Brown with its own vocabulary
(:func:`~nplm_edu.experiments.output_methods.energy_slice`): the energy network pays |V| h tanh per
example, too slow for all of Brown on two cores.

    python -m nplm_edu reproduce output-layers                         # Brown: data/results/output_layers.json
    python -m nplm_edu reproduce output-layers --methods full,nce       # some methods (the others stay in the file)
    python -m nplm_edu reproduce output-layers --quick  # a slice, minutes: runs/results/output_layers_quick.json

Each method trains in ``<runs-dir>/<out stem>/<method>/`` through the one trainer and checkpoints
there; rerunning the command resumes inside the method and skips methods already in the file with
the same settings (``--force`` starts the file again).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..data.corpus import CorpusSpec
from ..errors import UserError
from ..models.energy import EnergyConfig, EnergyNPLM
from ..models.nplm import NPLMConfig
from ..numerics.fused import FusedNPLM
from ..training.trainer import TrainConfig, TrainingDiverged, train
from .common import provenance
from .skeleton import merge_results, read_results, results_file, rounded_history, run_folder, runs_for
from .output_methods import METHODS, TimedBackend, build_model, energy_slice, evaluate, parse_methods
from .table1 import ROWS, TRAIN as TABLE1_TRAIN, table_corpus

NETWORK = ROWS["MLP9"]
TRAIN = replace(TABLE1_TRAIN, epochs=3)
TRAIN_OPTIONS = ("epochs", "batch", "lr", "decay_rate", "weight_decay", "patience", "seed")
QUICK_EPOCHS = 2
ENERGY_SLICE = (50_000, 10_000, 10_000)  # train / valid / test tokens for the energy network
QUICK_ENERGY_SLICE = (3_000, 1_000, 1_000)


@dataclass
class OutputLayersOptions:
    """``methods`` (e.g. "full,nce"; None: all), ``n_classes`` (None: round(sqrt|V|)), ``k_is`` and
    ``k_nce`` (samples per batch), ``class_file`` (adds the class-file method), ``energy`` (also the
    energy network on a slice), ``quick``, ``runs_dir``, ``force``."""

    methods: str | None = None
    n_classes: int | None = None
    k_is: int = 100
    k_nce: int = 25
    class_file: str | None = None
    energy: bool = True
    quick: bool = False
    runs_dir: str | None = None
    force: bool = False


def settings_of(cfg: TrainConfig, opts: OutputLayersOptions, corpus, epochs: int) -> dict:
    """Everything that decides the numbers, shared by every row of one file."""
    return {"corpus": corpus.name, "V": corpus.V, "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid", "test")},
            "network": dict(NETWORK), "batch": cfg.batch, "lr": cfg.lr, "decay_rate": cfg.decay_rate,
            "weight_decay": cfg.weight_decay, "seed": cfg.seed, "epochs": epochs, "patience": cfg.patience,
            "n_classes": opts.n_classes, "k_is": opts.k_is, "k_nce": opts.k_nce, "quick": bool(opts.quick)}


def read_doc(path: Path) -> dict | None:
    return read_results(path, "output-layers")


def train_and_measure(name: str, model, desc: dict, corpus, cfg: TrainConfig, folder: Path, stamp: dict,
                      force: bool, quiet: bool) -> dict:
    """Train (or resume) one model in ``folder`` through the one trainer (timing the updates), evaluate it
    exactly: its row."""
    started = time.monotonic()
    # a run of other settings is started afresh: the results file's settings were checked already
    with run_folder(folder, stamp, force, fresh_ok=True, what=name) as resume:
        if not quiet:
            print(f"== {name}: {model.num_params():,} parameters; {'resuming' if resume else 'training'} in "
                  f"{folder}", flush=True)
        history = train(model, corpus, cfg, out_dir=folder, resume=resume, quiet=quiet,
                        backend=TimedBackend(model, cfg))
    epochs = history["epochs"]
    timed = [e for e in epochs if not e.get("timing_partial")] or epochs  # epochs timed from start to end
    t_train = sum(e.get("train_seconds", 0.0) for e in timed)
    t_cpu = sum(e.get("train_cpu_seconds", 0.0) for e in timed)
    examples = len(timed) * (len(corpus.train) - model.order + 1)
    ev = evaluate(model, corpus)
    row = {"method": name, "layer": desc, "epochs": len(epochs), "best_epoch": history["best_epoch"],
           "train_examples_per_s": examples / t_train if t_train else None, "train_seconds": round(t_train, 1),
           "train_examples_per_cpu_s": examples / t_cpu if t_cpu else None, "train_cpu_seconds": round(t_cpu, 1),
           **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in ev.items()},
           "num_params": model.num_params(), "resumed": resume,
           "history": rounded_history(epochs)}
    row.update(provenance(started))
    if not quiet:
        print(f"   {name}: {row['train_examples_per_s'] or 0:,.0f} examples/s in training, valid {row['valid_ppl']:.1f}, "
              f"test {row['test_ppl']:.1f}, evaluation {row['eval_examples_per_s']:,.0f} examples/s", flush=True)
    return row


def with_ratios(rows: list[dict]) -> list[dict]:
    """The ratios of every row to the full softmax's row: speedup_vs_full (training examples/s),
    eval_speedup_vs_full, the same in CPU seconds (``*_cpu``), and ppl_ratio_vs_full (test)."""
    full = next((r for r in rows if r["method"] == "full"), None)

    def ratio(r, key, digits=2):
        ok = full is not None and full.get(key) and r.get(key)
        return round(r[key] / full[key], digits) if ok else None

    for r in rows:
        r["speedup_vs_full"] = ratio(r, "train_examples_per_s")
        r["speedup_vs_full_cpu"] = ratio(r, "train_examples_per_cpu_s")
        r["eval_speedup_vs_full"] = ratio(r, "eval_examples_per_s")
        r["eval_speedup_vs_full_cpu"] = ratio(r, "eval_examples_per_cpu_s")
        r["ppl_ratio_vs_full"] = ratio(r, "test_ppl", 4)
    return rows


def run_energy(corpus, cfg: TrainConfig, root: Path, quick: bool, force: bool, quiet: bool) -> dict:
    """The energy network and the paper's network (same n, m, h) on a slice of the corpus with its own vocabulary."""
    sizes = QUICK_ENERGY_SLICE if quick else ENERGY_SLICE
    small = energy_slice(corpus, sizes)
    rows = []
    for name in ("full", "energy"):
        net = dict(n=NETWORK["n"], m=NETWORK["m"], h=NETWORK["h"], seed=cfg.seed)
        model = FusedNPLM(NPLMConfig(V=small.V, direct=False, **net)) if name == "full" else EnergyNPLM(
            EnergyConfig(V=small.V, **net))
        stamp = {"method": name, "corpus": small.name, "V": small.V, "train": asdict(cfg)}
        rows.append(train_and_measure(name, model, {"cost_per_example": small.V}, small, cfg, root / "energy" / name,
                                      stamp, force, quiet))
    return {"corpus": small.name, "V": small.V, "tokens": dict(zip(("train", "valid", "test"), sizes)),
            "note": "the slice's own vocabulary: words seen fewer than 4 times in the slice are <unk>",
            "rows": with_ratios(rows)}


def run_output_layers(cfg: TrainConfig = TRAIN, opts: OutputLayersOptions | None = None,
                      spec: CorpusSpec | None = None, out=None, quiet: bool = False) -> Path:
    """Train and evaluate every requested method, writing each row into the JSON as soon as it is done."""
    opts = opts or OutputLayersOptions()
    spec = spec or CorpusSpec(corpus="brown")
    methods = parse_methods(opts.methods, opts.class_file)
    check_options(opts)
    cfg = replace(cfg, epochs=min(cfg.epochs, QUICK_EPOCHS) if opts.quick else cfg.epochs)
    cfg.validate()
    out = results_file(out, "output-layers", opts.quick)  # checked before any work
    corpus = table_corpus(spec, opts.quick)
    settings = settings_of(cfg, opts, corpus, cfg.epochs)
    root = runs_for(opts.runs_dir, out)
    started = time.monotonic()
    doc = read_doc(out)
    if doc is not None and doc.get("settings") != settings:
        if not opts.force:
            raise UserError(f"{out} was made with other settings: pass --force to start it again, or another --out")
        doc = None
    doc = finish(doc or {"rows": []}, {r["method"]: r for r in (doc or {}).get("rows", [])}, settings, corpus)
    net = NPLMConfig(V=corpus.V, seed=cfg.seed, **NETWORK)
    todo = to_train(methods, doc, opts.force, out, quiet)
    # every model built (class file read, samples and classes checked) before the first one trains
    models = {name: build_model(name, corpus, net, opts, cache=root, quiet=quiet) for name in todo}
    ran = bool(models) or opts.energy and ("energy" not in doc or opts.force)
    for name, (model, desc) in models.items():
        stamp = {"method": name, "settings": settings, "layer": desc, "class_file": opts.class_file}
        try:
            row = train_and_measure(name, model, desc, corpus, cfg, root / name, stamp, opts.force, quiet)
        except TrainingDiverged as e:  # one method failing does not stop the others
            print(f"   {name}: {e}", flush=True)
            row = {"method": name, "layer": desc, "diverged": str(e), **provenance(time.monotonic())}
        doc = merge_rows(out, doc, {name: row}, settings, corpus, started)
    if opts.energy and ("energy" not in doc or opts.force):
        doc["energy"] = run_energy(corpus, cfg, root, opts.quick, opts.force, quiet)
        doc = merge_rows(out, doc, {}, settings, corpus, started)
    print_table(doc)
    print(f"wrote {out}" if ran else f"nothing to train: {out} left as it was")
    return out


def check_options(opts: OutputLayersOptions) -> None:
    """What can be wrong with the options alone, said before the corpus is read and anything trains."""
    if opts.class_file is not None and not Path(opts.class_file).is_file():
        raise UserError(f"class_file names no file: no class file at {opts.class_file}", setting="class_file")
    for name in ("k_is", "k_nce"):
        k = getattr(opts, name)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UserError(f"{name} (the number of samples k) must be a whole number >= 1, got {k!r}", setting=name)


def to_train(methods: list[str], doc: dict, force: bool, out: Path, quiet: bool) -> list[str]:
    """The requested methods not yet in the file with these settings (all with ``force``)."""
    done = {r["method"] for r in doc["rows"] if "diverged" not in r}
    for name in methods:
        if name in done and not force and not quiet:
            print(f"{name}: already in {out} with these settings, skipped (--force trains it again)")
    return [m for m in methods if force or m not in done]


def merge_rows(out: Path, doc: dict, rows: dict, settings: dict, corpus, started: float) -> dict:
    """Merge ``rows`` into the results file under its lock, the ratios to the full softmax recomputed there."""
    return merge_results(out, "output-layers", doc, rows, started, same=("settings",), key="method", order=METHODS,
                         then=lambda d: {**finish(d, {r["method"]: r for r in d["rows"]}, settings, corpus),
                                         "target": "output-layers"})


def finish(doc: dict, rows: dict, settings: dict, corpus) -> dict:
    ordered = with_ratios([rows[m] for m in METHODS if m in rows])  # the full softmax first
    return {**{k: v for k, v in doc.items() if k not in ("rows", "energy", "target")}, "settings": settings,
            "corpus": corpus.name, "V": corpus.V, "quick": settings["quick"],
            "note": ("train_examples_per_s: training examples over the wall-clock seconds spent in updates "
                     "(validation excluded), train_examples_per_cpu_s the same over this process's CPU seconds "
                     "(on a shared machine the fairer measure of one-thread speed); eval_examples_per_s: exact "
                     "test perplexity over every test token; ratios are against the full softmax's row of this "
                     "file; perplexities are exact for every method"),
            "rows": ordered, **({"energy": doc["energy"]} if "energy" in doc else {})}


def print_table(doc: dict) -> None:
    """One line per method: speed and perplexity beside the full softmax's."""
    print(f"\nOutput layers on {doc['corpus']} (|V| = {doc['V']:,}), MLP9, {doc['settings']['epochs']} epochs"
          + ("  [--quick slice]" if doc.get("quick") else ""))
    print(f"{'method':16} {'train ex/s':>10} {'x full':>7} {'x (cpu)':>7} {'eval ex/s':>10} {'x full':>7} "
          f"{'valid':>8} {'test':>8} {'/ full':>7}")
    energy = doc.get("energy", {}).get("rows", [])
    for r in doc["rows"] + energy:
        if "diverged" in r:
            print(f"{r['method']:16} diverged: {r['diverged']}")
            continue
        sp, cpu = (f"{r[k]:7.2f}" if r.get(k) else f"{'-':>7}" for k in ("speedup_vs_full", "speedup_vs_full_cpu"))
        name = r["method"] if r in doc["rows"] else f"{r['method']} (slice)"
        print(f"{name:16} {r['train_examples_per_s'] or 0:10,.0f} {sp} {cpu} {r['eval_examples_per_s']:10,.0f} "
              f"{r['eval_speedup_vs_full'] or 0:7.2f} {r['valid_ppl']:8.1f} {r['test_ppl']:8.1f} "
              f"{r['ppl_ratio_vs_full'] or 0:7.3f}")
    if energy:
        e = doc["energy"]
        print(f"(slice) = {e['corpus']}, its own vocabulary |V| = {e['V']:,}: the energy network against the paper's")
