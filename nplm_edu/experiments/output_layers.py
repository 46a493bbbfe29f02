"""``python -m nplm_edu reproduce output-layers``: the output layer solved fourteen ways, compared by one protocol.

The paper's section 5 proposes a tree-structured output and importance sampling to get around the
|V|-wide softmax (about 99.3% of MLP9's multiply-adds on Brown), and an energy-minimization network
that reads the candidate word's features instead of output weights; later work added the class-factored
softmax, NCE, the differentiated and the adaptive softmax and LightRNN's word table
(:mod:`~nplm_edu.experiments.output_methods`).
This command trains MLP9 of Table 1 (n 5, h 100, m 30, no direct connections) with each output layer
under the comparison protocol (:mod:`~nplm_edu.experiments.protocol`): on the comparison slice of
Brown (the first 200,000 training tokens, the first 50,000 validation tokens, the whole test split,
the paper's vocabulary |V| = 17,907), with the minibatch, schedule and weight decay of this
package's Table 1 runs (K = 128, r = 1e-4, the paper's weight decay 1e-4) and one BLAS thread, each
method's learning rate is chosen on validation from the grid 0.3, 1, 3 (after 2 epochs, seed 0), then seeds 0, 1, 2 train to early stopping
(patience 3, at most 40 epochs) and the test set is scored once per seed. The results file holds:

* per seed (``runs``): the history of every epoch (validation perplexity, wall ``seconds`` and
  ``cpu_seconds``, the seconds spent in updates), validation and test perplexity of the best
  parameters, whether the run stopped early or reached the epoch cap, the per-update speed
  (training examples per CPU second of updates) and its ratio to the full softmax's mean; for
  lightrnn, each epoch's reassignment (perplexities before and after) and rows of the learned table;
* per method (``summary``): mean ± standard deviation over the seeds (each seed's value kept), and
  the time to quality: the wall and CPU seconds (whole epochs, validation included) to come within
  5% and 1% of the reference, the mean over the seeds of the full softmax's best validation
  perplexity, or "never" with the best reached (recomputed whenever a row is merged, so whichever
  process finishes last writes them against every full-softmax seed there); the layer's description
  (each row's too: output rows read per example, classes, tree depth, bands, samples), so that a page can
  show what each layer costs without building it;
* the protocol's settings, the grid and its validation perplexities, the slice, the layers' settings.

Two processes (one core each) fill one file, each with its own methods::

    python -m nplm_edu reproduce output-layers --methods full,nce          # one process
    python -m nplm_edu reproduce output-layers --methods class-exchange,is  # another, the same file
    python -m nplm_edu reproduce output-layers --quick   # a tiny slice, minutes: runs/results/output_layers_quick.json
    python -m nplm_edu reproduce output-layers --describe-only  # trains nothing: writes the layers' descriptions

Every run (method, learning rate, seed) trains in its own folder ``<runs-dir>/<out stem>/<method>/``;
the same command run again resumes where the runs stand, and a seed already in the file is not
trained again. Split the methods between processes, not one method's seeds: a method's grid runs
have one writer at a time (a second process is refused in one line). The energy network (``energy``)
and the classes of a file (``class-file``) run only when named: the energy network's epoch costs
about 75 times the full softmax's.

Compute plan (MLP9 on the comparison slice, one thread, the twelve methods besides lightrnn, energy, class-file),
from epochs timed under a heavy load (niced beside other work, so these CPU seconds run high, up to
about twice an unloaded run's): one epoch of the full softmax took
66.8 CPU seconds (59.9 of them in updates, the rest the exact validation perplexity over 50,000
words), of the class-frequency softmax 11.4 (10.8 in updates). From 100 updates and 5,000 validation
windows of each, timed alike: the differentiated softmax about 75 s an epoch (its softmax still runs
over all |V| words), the adaptive softmax 16, is-ess 16 (about 280 samples a batch early in
training; up to about 70 s if every batch took the 2,000 cap); scaled from the 3-epoch Brown run:
class-exchange 10, tree-huffman 5, tree-cluster 5, is, is-adaptive, is-target and nce about 10 each
(their exact validation costs what the full softmax's does): about 240 CPU seconds an epoch of all
twelve. A method costs 3 grid values x 2 epochs = 6 epochs (the chosen value's 2 are its first seed's
start), then each seed to early stopping: about 18 epochs if a run stops near epoch 15 (15 + patience
3), so 6 + 16 + 18 + 18 = 58 epochs, x 240 s = 13,900 s = 3.9 CPU hours for the table; with every
seed at the 40-epoch cap 6 + 38 + 40 + 40 = 124 epochs, 8.3 hours. The energy network of section 5
(``energy``, run only when named) is not in that sum: from 8 updates and 1,024 validation windows timed
alike (niced, load about 10 on the 2 cores), an epoch costs about 5,100 CPU seconds (2.9 a batch of 128,
4,500 an epoch; 12.5 ms a validation window, 630), about 75 times the full softmax's, so 58 epochs
would take about 82 CPU hours (176 at the cap).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np

from ..analysis.comparison import HEAD, comparison_rows
from ..analysis.quality import mean_std, times_to_quality
from ..data.corpus import CorpusSpec
from ..errors import UserError
from ..models.nplm import NPLMConfig
from ..models.lightrnn_table import table_rows
from ..training.checkpoint import TrainingDiverged
from ..training.trainer import TrainConfig
from .output_methods import (ADAPTIVE_DIV, BANDS, DIFF_WIDTHS, ESS_MIN, K_MAX, METHODS, LightRNNBackend,
                             TimedBackend, build_model, parse_methods, sampled_extra)
from .protocol import (COMPARISON_SLICE, PROTOCOL, Method, Protocol, choose_lr, comparison_data, header_settings,
                       is_scored, parse_seeds, run_seeds, scored, write_rows)
from .skeleton import read_results, results_file, runs_for
from .table1 import QUICK_SPLIT, ROWS

TARGET = "output-layers"
REFERENCE = "full"  # time to quality is measured against this method's best validation perplexity
NETWORK = ROWS["MLP9"]
TRAIN = TrainConfig(batch=128, decay_rate=1e-4, weight_decay=1e-4, threads=1)  # Table 1's; lr, seed, epochs,
# patience come from the protocol
QUICK_PROTOCOL = Protocol(lrs=PROTOCOL.lrs, grid_epochs=1, patience=1, max_epochs=3, seeds=PROTOCOL.seeds)
ROW_WORDS = 8  # LightRNN's learned table in a results file: each row shown by its 8 most frequent words
CLOCK = "trainer's seconds and cpu_seconds of whole epochs (updates and the validation perplexity)"


@dataclass
class OutputLayersOptions:
    """``methods`` (e.g. "full,nce"; None: all but energy and class-file), ``seeds`` (e.g. "0,1"; None: the
    protocol's), ``n_classes`` (None: round(sqrt|V|)), ``k_is`` and ``k_nce`` (samples per batch; is-ess's
    block), ``class_file`` (adds the class-file method), ``quick``, ``runs_dir``, ``force``; ``describe_only``:
    nothing trained, the file's layer descriptions written (:func:`describe_layers`)."""

    methods: str | None = None
    seeds: str | None = None
    n_classes: int | None = None
    k_is: int = 100
    k_nce: int = 25
    class_file: str | None = None
    quick: bool = False
    runs_dir: str | None = None
    force: bool = False
    describe_only: bool = False


def check_options(opts: OutputLayersOptions) -> None:
    """What can be wrong with the options alone, said before the corpus is read and anything trains."""
    if opts.class_file is not None and not Path(opts.class_file).is_file():
        raise UserError(f"class_file names no file: no class file at {opts.class_file}", setting="class_file")
    for name in ("k_is", "k_nce"):
        k = getattr(opts, name)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UserError(f"{name} (the number of samples k) must be a whole number >= 1, got {k!r}", setting=name)


def header(corpus, opts: OutputLayersOptions) -> dict:
    """Everything besides the protocol that decides the numbers: every process filling the file must agree."""
    sizes = QUICK_SPLIT if opts.quick else COMPARISON_SLICE
    return {"corpus": corpus.name, "V": corpus.V,
            "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid", "test")},
            "slice": dict(zip(("train", "valid", "test"), sizes)),
            "examples_per_epoch": int(len(corpus.windows("train", NETWORK["n"])[1])), "network": dict(NETWORK),
            "train": {k: getattr(TRAIN, k) for k in ("batch", "decay_rate", "weight_decay", "threads")},
            "layers": {"n_classes": opts.n_classes, "k_is": opts.k_is, "k_nce": opts.k_nce, "class_file": opts.class_file,
                       "bands": list(BANDS), "differentiated_widths": list(DIFF_WIDTHS), "adaptive_div": ADAPTIVE_DIV,
                       "ess_min": ESS_MIN, "k_max": K_MAX},
            "reference_method": REFERENCE, "clock": CLOCK, "quick": bool(opts.quick)}


def check_file(out: Path, doc: dict, protocol: Protocol, force: bool) -> None:
    """Refuse, before any work, a results file of the protocol made with other settings (its rows would be
    replaced) unless ``force``; a file from before the protocol (no settings of one) is replaced."""
    disk = read_results(out, TARGET)
    if disk is None or "protocol" not in disk:
        if disk is not None:
            print(f"note: {out} was written before the comparison protocol: it is replaced", flush=True)
        return
    settings = header_settings(doc)
    same = disk["protocol"] == protocol.record() and all(disk.get(k) == v for k, v in settings.items())
    if not same and not force:
        raise UserError(f"{out} was made with other settings: `force` starts it again, or another `out`")


def make_method(name: str, corpus, opts: OutputLayersOptions, cache: Path, quiet: bool) -> Method:
    """The method ``name`` for the protocol: MLP9 with its output layer, Table 1's settings, timed updates."""
    _, desc = build_model(name, corpus, NPLMConfig(V=corpus.V, **NETWORK), opts, cache, quiet)  # checked now

    def build(lr: float, seed: int):
        model, _ = build_model(name, corpus, NPLMConfig(V=corpus.V, seed=seed, **NETWORK), opts, cache, True)
        cfg = replace(TRAIN, lr=lr, seed=seed)
        return model, cfg, (LightRNNBackend if name == "lightrnn" else TimedBackend)(model, cfg)

    return Method(name, build, stamp={"layer": desc, "class_file": opts.class_file},
                  extra=learned_table if name == "lightrnn" else sampled_extra)


def learned_table(model, corpus) -> dict:
    """LightRNN's learned table in a few rows: those of the 5 most frequent words, each shown by its
    ``ROW_WORDS`` most frequent words (a seed row's field, measured with its test perplexity)."""
    return {"table_rows": table_rows(model, corpus.vocab.words, show=ROW_WORDS, frequent_first=True)}


def run_method(method: Method, corpus, protocol: Protocol, seeds: tuple, root: Path, out: Path, doc: dict,
               force: bool, quiet: bool, started: float, finished=None) -> list[dict]:
    """The grid, then the chosen rate's seeds, each row merged into ``out`` as soon as it is done (``finished``:
    :func:`finish` with the layers' descriptions); a method whose seed diverges is reported and the others go on."""
    try:
        choice = choose_lr(method, corpus, protocol, root, force, quiet)
        grid = ", ".join(f"{lr:g}: {'diverged' if v is None else f'{v:.1f}'}" for lr, v in choice["grid"].items())
        print(f"{method.name}: lr {choice['lr']:g} chosen on validation ({grid})", flush=True)
        rows = run_seeds(method, corpus, protocol, choice, root, out=out, target=TARGET, doc=doc, seeds=seeds,
                         force=force, quiet=quiet, finish=finished or finish, started=started)
        for r in rows:
            scores = f", valid {r['valid_ppl']:.1f}, test {r['test_ppl']:.1f}" if is_scored(r) else ""
            print(f"{r['run']}: {r['epochs']} epochs{scores}"
                  + (f", diverged: {r['diverged']}" if r.get("diverged") else ""), flush=True)
        return rows
    except TrainingDiverged as e:
        print(f"{method.name}: {e}", flush=True)
        return []


def run_output_layers(opts: OutputLayersOptions | None = None, spec: CorpusSpec | None = None, out=None,
                      quiet: bool = False) -> Path:
    """Every requested method by the protocol, each seed's row merged into the results file when done."""
    started = time.monotonic()
    opts = opts or OutputLayersOptions()
    spec = spec or CorpusSpec(corpus="brown")
    if opts.describe_only:
        describe_layers(opts, spec, out, quiet)
        return results_file(out, TARGET, opts.quick)
    names = parse_methods(opts.methods, opts.class_file)
    check_options(opts)
    protocol = QUICK_PROTOCOL if opts.quick else PROTOCOL
    seeds = parse_seeds(opts.seeds, protocol)
    out = results_file(out, TARGET, opts.quick)  # checked before any work
    corpus = comparison_data(spec, opts.quick)
    doc = header(corpus, opts)
    check_file(out, doc, protocol, opts.force)
    root = runs_for(opts.runs_dir, out)
    methods = [make_method(name, corpus, opts, root, quiet) for name in names]  # every layer built before training
    finished = partial(finish, layers={m.name: m.stamp["layer"] for m in methods})  # each layer described
    for method in methods:
        run_method(method, corpus, protocol, seeds, root, out, doc, opts.force, quiet, started, finished)
    final = write_rows(out, TARGET, doc, [], protocol, started, finish=finished)  # the summaries of every row there
    print_table(final)
    print(f"wrote {out}")
    return out


def finished_file(opts: OutputLayersOptions, spec: CorpusSpec | None, out):
    """(path, its contents or None, the slice, the header, the protocol) of a results file read to be
    completed without training; its settings checked against those its rows were trained with."""
    out = results_file(out, TARGET, opts.quick)
    corpus = comparison_data(spec or CorpusSpec(corpus="brown"), opts.quick)
    doc = header(corpus, opts)
    protocol = QUICK_PROTOCOL if opts.quick else PROTOCOL
    disk = read_results(out, TARGET)
    if disk is not None and "protocol" in disk:
        check_file(out, doc, protocol, force=False)
    return out, disk, corpus, doc, protocol


def describe_layers(opts: OutputLayersOptions | None = None, spec: CorpusSpec | None = None, out=None,
                    quiet: bool = True) -> dict:
    """The target's summary step alone: every method in the results file ``out`` is built again (its classes,
    tree or bands, from the training set; nothing is trained or scored) and the file is rewritten with each
    row's and each summary's layer description; every trained number stays as it is. For a file written
    before descriptions were kept (a rerun of the target does the same once its rows are all there)."""
    started = time.monotonic()
    opts = opts or OutputLayersOptions()
    out, disk, corpus, doc, protocol = finished_file(opts, spec, out)
    if disk is None or "protocol" not in disk:
        raise UserError(f"{out} holds no rows of the comparison protocol to describe")
    names = [m for m in METHODS if m in disk["summary"]]
    root = runs_for(opts.runs_dir, out)
    layers = {name: make_method(name, corpus, opts, root, quiet).stamp["layer"] for name in names}
    return write_rows(out, TARGET, doc, [], protocol, started, finish=partial(finish, layers=layers))


# --------------------------------------------------------------------------- across methods, in every merge
def update_speed(history: list[dict], per_epoch: int) -> float | None:
    """Training examples per CPU second spent in updates, over the epochs timed from start to end."""
    timed = [e for e in history if not e.get("timing_partial") and e.get("train_cpu_seconds")]
    cpu = sum(e["train_cpu_seconds"] for e in timed)
    return len(timed) * per_epoch / cpu if cpu else None


def with_speeds(runs: list[dict], per_epoch: int) -> None:
    """Each seed row's per-update speed and its ratio to the full softmax's mean speed (in place)."""
    for r in runs:
        r["examples_per_cpu_second"] = update_speed(r["history"], per_epoch)
    full = [r["examples_per_cpu_second"] for r in runs if r["method"] == REFERENCE and r["examples_per_cpu_second"]]
    base = float(np.mean(full)) if full else None
    for r in runs:
        r["speedup_vs_full"] = r["examples_per_cpu_second"] / base if base and r["examples_per_cpu_second"] else None


def in_order(doc: dict) -> dict:
    """The grid, summaries and rows in the table's order (``METHODS``), whichever process merged first."""
    order = {m: i for i, m in enumerate(METHODS)}

    def rank(m):
        return order.get(m, len(order)), m

    return {**doc, "grid": {m: doc["grid"][m] for m in sorted(doc["grid"], key=rank)},
            "summary": {m: doc["summary"][m] for m in sorted(doc["summary"], key=rank)},
            "runs": sorted(doc["runs"], key=lambda r: (rank(r["method"]), r["seed"]))}


def described(rows: list[dict], layer: dict | None) -> dict | None:
    """A method's layer description: ``layer`` given to each of its rows that has none (in place); the rows'."""
    for r in rows:
        if r.get("layer") is None and layer is not None:
            r["layer"] = layer
    return next((r["layer"] for r in rows if r.get("layer") is not None), None)


def finish(doc: dict, layers: dict | None = None) -> dict:
    """Each seed's per-update speed and its ratio to the full softmax's mean speed; per method the mean
    ± std of both, of the sampled layers' log Z and self-normalized perplexity, the time to come
    within 5% and 1% of the reference (None until a full-softmax row is in the file), and the layer's
    description (``layers``: {method: what :func:`~.output_methods.build_model` says of its layer}, given
    to each row that has none; the summary's is its rows')."""
    runs = doc["runs"]
    with_speeds(runs, doc["examples_per_epoch"])
    ref, times = times_to_quality(runs, REFERENCE, doc["protocol"]["seeds"])  # the full softmax's mean best
    for name, s in doc["summary"].items():
        rows = sorted((r for r in runs if r["method"] == name), key=lambda r: r["seed"])
        s["layer"] = described(rows, (layers or {}).get(name))
        ok = scored(rows)
        for key in ("examples_per_cpu_second", "speedup_vs_full", "test_log_Z_mean", "test_ppl_self_normalized"):
            if ok and all(r.get(key) is not None for r in ok):
                s[key] = mean_std(r[key] for r in ok)
        s["time_to_quality"] = times.get(name)
    return in_order({**doc, "reference": ref})


def print_table(doc: dict) -> None:
    """The chapter's table (``analysis.comparison.comparison_rows``) as text, one line per method."""
    print(f"\nOutput layers on {doc['corpus']} (|V| = {doc['V']:,}), MLP9, the comparison protocol"
          + ("  [--quick]" if doc.get("quick") else ""))
    lines = HEAD + comparison_rows(doc)
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEAD[0]))]
    for line in lines:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
