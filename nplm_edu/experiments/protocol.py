"""One comparison protocol for every neural comparison after 2003: the learning rate chosen on validation
from a grid fixed in advance, the chosen setting trained to early stopping over several seeds, the test
set scored once per seed, and the time each run took to reach a quality.

A *method* is a :class:`Method`: a name and a callable ``build(lr, seed)`` returning ``(model, config)``
or ``(model, config, backend)`` (a :class:`~nplm_edu.training.trainer.TrainConfig`, and a training
backend when the serial one is not the method's). The protocol sets the config's ``lr``, ``seed``,
``epochs`` and ``patience``; everything else (batch, schedule, regularization) is the method's. Then::

    choice = choose_lr(method, corpus, PROTOCOL, root)                  # the grid, on validation only
    rows = run_seeds(method, corpus, PROTOCOL, choice, root, out=out, target="output-layers", doc=head)
    summary(rows)                                                         # mean ± std over the seeds

Each run (one learning rate, one seed) trains in its own folder ``<root>/<method>/lr<lr>-seed<seed>``
through :func:`~nplm_edu.experiments.skeleton.run_folder`: a killed run resumes where its checkpoint
stands, and the grid's run of the first seed is the start of that seed's long run when the grid
chooses its rate (the schedule does not depend on the epoch count). Rows are keyed by method and seed
(``"full/seed1"``) and merged under the results file's lock, so two processes filling one file (say
seeds 0 and 1 in one, seed 2 in the other) keep every row; the protocol's settings, the grid's
validation perplexities and the summaries are written beside them. A target's header holds settings,
which every process filling the file must share (a file of other settings is set aside), and
descriptions (``DESCRIPTIONS``: what each row is), which are merged, never compared.

Compute plan. ``output_layers.json``: 3.9 CPU hours (8.3 with every seed at the 40-epoch cap), planned
in :mod:`~nplm_edu.experiments.output_layers`. The recurrent table (``recurrent.json``): 11.4 CPU
hours (24 with every seed at the cap), planned in :mod:`~nplm_edu.experiments.recurrent`.
``central_claim.json``: 2,256 s wall for all its networks, three seeds each already, trained to early
stopping; a 3-value grid of 2 epochs a network makes it at most about 5 times that, 3.1 hours. Total
about 3.9 + 11.4 + 3.1 = 18 CPU hours (8.3 + 24 + 3.1 = 35 with every run at its cap): about 9 hours
(18 at the caps) on two cores.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, is_dataclass, replace
from pathlib import Path
from typing import Callable

from ..analysis.quality import mean_std
from ..analysis.recurrent_table import is_scored
from ..data.corpus import CorpusSpec
from ..errors import UserError
from ..training.checkpoint import TrainingDiverged, load_checkpoint, set_params
from ..training.trainer import train
from .run_record import adopted, recorded_session, run_provenance, stamped
from .skeleton import merge_results, read_results, rounded_history, run_folder
from .table1 import table_corpus

@dataclass(frozen=True)
class Protocol:
    """The protocol's settings, fixed before any run: the learning-rate grid (the same for every method
    of a table), the grid's budget (``grid_epochs``: the validation perplexity after that many epochs
    decides), Table 1's patience (epochs without a lower validation perplexity before a run stops),
    ``max_epochs`` (a run that reaches it is reported as such) and the seeds of the chosen setting."""

    lrs: tuple = (0.3, 1.0, 3.0)
    grid_epochs: int = 2
    patience: int = 3
    max_epochs: int = 30
    seeds: tuple = (0, 1, 2)

    def validate(self) -> None:
        _check_list(self.lrs, "lrs", "the learning-rate grid", lambda v: _number(v) and math.isfinite(v) and v > 0,
                    "finite numbers > 0")
        for name in ("grid_epochs", "patience", "max_epochs"):
            v = getattr(self, name)
            if not _whole(v) or v < 1:
                raise UserError(f"{name} must be a whole number >= 1, got {v!r}", setting=name)
        if self.grid_epochs >= self.max_epochs:
            raise UserError(f"grid_epochs ({self.grid_epochs}) must be below max_epochs ({self.max_epochs}): the "
                            "grid is a short budget", setting="grid_epochs")
        _check_list(self.seeds, "seeds", "the seeds of the chosen setting", lambda v: _whole(v) and v >= 0,
                    "whole numbers >= 0")

    def record(self) -> dict:
        """The settings as a results file states them."""
        return {**asdict(self), "lrs": list(self.lrs), "seeds": list(self.seeds),
                "lr_choice": f"lowest validation perplexity after {self.grid_epochs} epochs, seed {self.seeds[0]}",
                "std": "sample standard deviation over the seeds (ddof 1)"}


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_list(values, setting: str, what: str, ok, rule: str) -> None:
    """At least 3 different values, each passing ``ok`` (said as ``rule``)."""
    values = tuple(values)
    if len(values) < 3 or len(set(values)) != len(values):
        raise UserError(f"{setting} ({what}) needs at least 3 different values, got {values}", setting=setting)
    if not all(ok(v) for v in values):
        raise UserError(f"{setting} ({what}) must be {rule}, got {values}", setting=setting)


PROTOCOL = Protocol(max_epochs=40)
# The recurrent table's grid (the NPLM control, the Elman network, the LSTM, the GRU alike): their loss
# is the mean per token with the gradient norm clipped, where rates of 5 to 20 are usual, so the grid
# spans 1 to 30 in steps of about 3; a value that diverges is never chosen.
RECURRENT_PROTOCOL = replace(PROTOCOL, lrs=(1.0, 3.0, 10.0, 30.0))

# The comparisons of chapters 10 and 11 train on the first 200,000 tokens of the paper's training split,
# stop early on the first 50,000 of its validation split, and score the whole test split once, with the
# paper's vocabulary (|V| = 17,907 on Brown). Every row is shrunk the same way so that every method gets
# its grid, three seeds and early stopping within the compute of two cores (see the plan above).
COMPARISON_SLICE = (200_000, 50_000, None)


def comparison_corpus(corpus, sizes=COMPARISON_SLICE):
    """The corpus the comparisons train, validate and test on: the first ``sizes`` tokens of each split."""
    return corpus.head(sizes, "comparison")


def comparison_data(spec: CorpusSpec, quick: bool, quick_slice: tuple | None = None):
    """The corpus a comparison target reads: the comparison slice of ``spec``'s corpus; with ``quick``,
    Table 1's quick slice instead (the synthetic corpus if Brown is absent), cut to the first
    ``quick_slice`` = (train, valid, test) tokens when given."""
    if not quick:
        return comparison_corpus(spec.load())
    corpus = table_corpus(spec, True)
    return corpus if quick_slice is None else corpus.head(quick_slice, "quick-comparison")


def parse_seeds(text: str | None, protocol: Protocol) -> tuple:
    """'2,0' -> (0, 2): some of the protocol's seeds, sorted, each once; None or "": all of them."""
    if text is None or not str(text).strip():
        return tuple(protocol.seeds)
    try:
        seeds = tuple(sorted({int(t) for t in str(text).split(",") if t.strip()}))
    except ValueError:
        seeds = ()
    if not seeds or any(s not in protocol.seeds for s in seeds):
        raise UserError(f"seeds must be some of the protocol's seeds {','.join(map(str, protocol.seeds))} "
                        f"(comma-separated), got {text!r}", setting="seeds")
    return seeds


def window_ppl(model, corpus, split: str) -> float:
    """The exact perplexity of a window model (the NPLM and its output layers) over every token of ``split``."""
    return float(model.perplexity(*corpus.windows(split, model.order)))


@dataclass
class Method:
    """A method under the protocol: ``build(lr, seed)`` -> (model, TrainConfig[, backend]);
    ``score(model, corpus, split)`` -> that split's perplexity (default :func:`window_ppl`);
    ``stamp``: what else decides its numbers (kept with each run, checked on resume); ``extra(model,
    corpus)`` -> more fields for each seed's row, measured once with the test perplexity (None: none)."""

    name: str
    build: Callable
    score: Callable = window_ppl
    stamp: dict = field(default_factory=dict)
    extra: Callable | None = None


def run_dir(root, name: str, lr: float, seed: int) -> Path:
    return Path(root) / name / f"lr{lr:g}-seed{seed}"


def train_run(method: Method, corpus, lr: float, seed: int, epochs: int, protocol: Protocol, root,
              force: bool = False, quiet: bool = True):
    """One run of ``method`` (rate ``lr``, ``seed``) trained, or resumed, to ``epochs`` epochs or early
    stopping in its run folder; returns (model, history). Validation only: the test set is not read."""
    built = method.build(lr, seed)
    model, cfg, backend = (*built, None) if len(built) == 2 else built
    cfg = replace(cfg, lr=lr, seed=seed, epochs=epochs, patience=protocol.patience)
    cfg.validate()
    net = getattr(model, "config", None)
    stamp = {"method": method.name, "lr": lr, "seed": seed, "corpus": getattr(corpus, "name", None),
             "V": model.V, "model": asdict(net) if is_dataclass(net) else None, "stamp": method.stamp,
             "train": {k: v for k, v in asdict(cfg).items() if k not in ("epochs", "patience")}}
    folder = run_dir(root, method.name, lr, seed)
    with run_folder(folder, stamp, force, what=f"{method.name} lr {lr:g} seed {seed}") as resumed:
        with recorded_session(folder, resumed):  # which code trained which epochs (run_record)
            history = train(model, corpus, cfg, out_dir=folder, resume=resumed, quiet=quiet, backend=backend)
    return model, history


def choose_lr(method: Method, corpus, protocol: Protocol = PROTOCOL, root=None, force: bool = False,
              quiet: bool = True) -> dict:
    """Every grid value trained for ``protocol.grid_epochs`` epochs (the first seed); the choice is the
    lowest validation perplexity after them (a diverged value is never chosen). The test set is not read.
    Returns {"lr": choice, "grid": {lr: validation perplexity, or None if it diverged}, "provenance": {lr:
    the code that trained its grid epochs (:func:`~.run_record.run_provenance`)}}."""
    protocol.validate()
    grid = {}
    for lr in protocol.lrs:
        try:
            _, history = train_run(method, corpus, lr, protocol.seeds[0], protocol.grid_epochs, protocol, root,
                                   force, quiet)
            grid[lr] = history["epochs"][:protocol.grid_epochs][-1]["valid_ppl"]  # also once seed 0 went on
        except TrainingDiverged as e:
            if not quiet:
                print(f"{method.name}: lr {lr:g} diverged ({e})", flush=True)
            grid[lr] = None
    scored = {lr: v for lr, v in grid.items() if v is not None}
    if not scored:
        raise UserError(f"{method.name}: every learning rate of the grid {list(protocol.lrs)} diverged; "
                        "choose a grid of smaller lrs", setting="lrs")
    prov = {lr: run_provenance(run_dir(root, method.name, lr, protocol.seeds[0]), protocol.grid_epochs) for lr in grid}
    return {"lr": min(scored, key=scored.get), "grid": grid, "provenance": prov}


def row_head(method: Method, choice: dict, seed: int, provenance: dict | None) -> dict:
    """What every seed's row begins with: its name, the chosen rate, the grid, the code that trained them."""
    return {"run": f"{method.name}/seed{seed}", "method": method.name, "seed": seed, "lr": choice["lr"],
            "lr_grid": {f"{lr:g}": v for lr, v in choice["grid"].items()}, "provenance": provenance,
            "lr_grid_provenance": {f"{lr:g}": v for lr, v in choice.get("provenance", {}).items()}}


def seed_row(method: Method, model, history: dict, corpus, choice: dict, seed: int, protocol: Protocol,
             provenance: dict | None = None) -> dict:
    """The row of one seed: validation and test perplexity of the best parameters (test scored here,
    once), whether the run stopped early or reached ``max_epochs``, its history, and the code that trained
    it and its grid values (``provenance``: :func:`~.run_record.run_provenance` of its run folder)."""
    epochs = history["epochs"]
    return {**row_head(method, choice, seed, provenance), "valid_ppl": method.score(model, corpus, "valid"),
            "test_ppl": method.score(model, corpus, "test"), "epochs": len(epochs),
            "best_epoch": history.get("best_epoch"), "stopped_early": bool(history.get("stopped_early")),
            "diverged": history.get("diverged"),
            "reached_max_epochs": len(epochs) >= protocol.max_epochs and not history.get("stopped_early"),
            "wall_seconds_training": round(sum(e.get("seconds", 0.0) for e in epochs), 2),
            "cpu_seconds_training": round(sum(e.get("cpu_seconds", 0.0) for e in epochs), 2),
            **(method.extra(model, corpus) if method.extra is not None else {}), "history": rounded_history(epochs)}


def run_seeds(method: Method, corpus, protocol: Protocol, choice: dict, root, out=None, target: str | None = None,
              doc: dict | None = None, seeds=None, force: bool = False, quiet: bool = True,
              finish: Callable | None = None, started: float | None = None) -> list[dict]:
    """The chosen setting (``choice`` of :func:`choose_lr`) trained to early stopping (or ``max_epochs``)
    for every seed of the protocol (or ``seeds``, a subset: one process per subset), each a resumable run
    folder; test perplexity scored once per seed. With ``out``: a seed already in the results file is not
    trained or scored again, and each new row is merged into the file (``target``'s, with ``doc``'s
    header) as soon as it is done (``finish``: what the target adds to the merged file, as
    :func:`write_rows`; ``started``: time.monotonic() when the target began, for the file's wall seconds,
    default now). Returns the rows of these seeds; a seed that diverged before its first validation gets
    a row that says so (:func:`unscored_row`), kept like any other: a rerun does not train it again."""
    started = time.monotonic() if started is None else started
    protocol.validate()
    seeds = protocol.seeds if seeds is None else tuple(seeds)
    if any(s not in protocol.seeds for s in seeds):
        raise UserError(f"seeds {list(seeds)} are not all among the protocol's {list(protocol.seeds)}", setting="seeds")
    done = done_rows(out, target, doc or {}, protocol) if out is not None and not force else {}
    rows = []
    for seed in seeds:
        key = f"{method.name}/seed{seed}"
        if key in done and done[key].get("lr") == choice["lr"]:
            rows.append(done[key])
            continue
        folder = run_dir(root, method.name, choice["lr"], seed)
        try:
            model, history = seed_run(method, corpus, choice["lr"], seed, protocol, root, force, quiet)
            rows.append(seed_row(method, model, history, corpus, choice, seed, protocol, run_provenance(folder)))
        except TrainingDiverged as e:  # before any epoch was validated: a row that says so
            rows.append(unscored_row(method, choice, seed, run_provenance(folder), e))
        if out is not None:
            write_rows(out, target, doc or {}, rows[-1:], protocol, started, finish=finish)
    return rows


def unscored_row(method: Method, choice: dict, seed: int, provenance: dict, error: TrainingDiverged) -> dict:
    """A seed diverged before its first validation: no score, no epochs; counted by :func:`summary`, not averaged."""
    return {**row_head(method, choice, seed, provenance), "valid_ppl": None, "test_ppl": None, "epochs": 0,
            "best_epoch": None, "stopped_early": False, "diverged": str(error), "reached_max_epochs": False,
            "wall_seconds_training": 0.0, "cpu_seconds_training": 0.0, "history": []}


def seed_run(method: Method, corpus, lr: float, seed: int, protocol: Protocol, root, force: bool, quiet: bool):
    """One seed trained (or resumed) to early stopping or ``max_epochs`` at the chosen ``lr``; a run that
    diverged ends there (:func:`diverged_run`). Returns (model, history)."""
    try:
        return train_run(method, corpus, lr, seed, protocol.max_epochs, protocol, root, force, quiet)
    except TrainingDiverged as e:
        return diverged_run(method, lr, seed, root, e)


def diverged_run(method: Method, lr: float, seed: int, root, error: TrainingDiverged):
    """A seed's run that diverged at the chosen rate ends there, as an early stop would: (its model with
    the best parameters of the last validated checkpoint, its history with ``diverged``: the trainer's
    line). A run that diverged before any epoch was validated has nothing to score: ``error`` is raised."""
    folder = run_dir(root, method.name, lr, seed)
    if not (folder / "checkpoint.npz").exists() or not (folder / "history.json").exists():
        raise error
    built = method.build(lr, seed)
    _, params, best, _ = load_checkpoint(folder / "checkpoint.npz")
    set_params(built[0], best if best is not None else params)
    history = json.loads((folder / "history.json").read_text(encoding="utf-8"))
    return built[0], {**history, "stopped_early": False, "diverged": str(error)}


# --------------------------------------------------------------------------- the results file
# A header's keys that describe its rows rather than decide their numbers (what each row is, its parameter
# count, notes for a reader): never compared to tell whether a file's rows are of the same settings, and
# merged entry by entry with the file's (each process adds the rows it describes; another's are kept).
DESCRIPTIONS = ("descriptions", "rows", "parameters", "note")


def header_settings(doc: dict) -> dict:
    """A header's settings: what makes two processes' rows comparable (every key but :data:`DESCRIPTIONS`)."""
    return {k: v for k, v in doc.items() if k not in DESCRIPTIONS}


def done_rows(out, target: str, doc: dict, protocol: Protocol) -> dict:
    """The rows already in the results file ``out`` made under this protocol and the settings of ``doc``'s
    header (:func:`header_settings`: the descriptions may differ); a row of older code gets the file's
    provenance (:func:`~.run_record.adopted`)."""
    disk = read_results(out, target)
    settings = header_settings(doc)
    if disk is None or disk.get("protocol") != protocol.record() or any(disk.get(k) != v for k, v in settings.items()):
        return {}
    return {r["run"]: adopted(r, disk) for r in disk.get("runs", []) if isinstance(r, dict) and "run" in r}


def with_summaries(doc: dict) -> dict:
    """The grid (each value with the code that trained it) and the summary of every method, rebuilt from
    its seed rows (whichever process wrote them)."""
    by_method: dict[str, list] = {}
    for r in doc["runs"]:
        by_method.setdefault(r["method"], []).append(r)
    grids = {m: {"lr_grid": rows[0]["lr_grid"], "chosen_lr": rows[0]["lr"],
                 "provenance": rows[0].get("lr_grid_provenance")} for m, rows in by_method.items()}
    return {**{k: v for k, v in doc.items() if k != "runs"}, "grid": grids,
            "summary": {m: summary(rows) for m, rows in by_method.items()}, "runs": doc["runs"]}


def write_rows(out, target: str, doc: dict, rows: list[dict], protocol: Protocol, started: float,
               finish: Callable | None = None, rebuild: Callable = with_summaries):
    """Merge seed rows into ``out`` under its lock, the protocol's settings written in the file's header
    (a file of other settings, :func:`header_settings`, is set aside; the descriptions are merged with the
    file's, :data:`DESCRIPTIONS`) and the file rebuilt from every row there (``rebuild``: the grid and
    summaries, :func:`with_summaries`); ``finish``: a function of that document returning what is written
    (what a target computes across methods, such as the time to reach a reference's quality: recomputed
    by whichever process merges last); ``started``: time.monotonic() when the writing target began. Each
    row keeps the code that trained it; a row of older code read from the file gets the file's
    (:func:`~.run_record.adopted`)."""
    header = {**doc, "protocol": protocol.record()}
    then = rebuild if finish is None else (lambda d: finish(rebuild(d)))
    return merge_results(out, target, header, {r["run"]: stamped(r) for r in rows}, started,
                         same=("protocol", *header_settings(doc)), key="run", then=then, field="runs", kept=adopted,
                         merged=DESCRIPTIONS)


# --------------------------------------------------------------------------- what the seeds show
def scored(rows) -> list[dict]:
    """The rows with scores (:func:`~nplm_edu.analysis.recurrent_table.is_scored`)."""
    return [r for r in rows if is_scored(r)]


ALSO_SUMMED = ("mix_test_ppl", "test_reset_ppl")  # summarized too when every seed's row has them


def summary(rows: list[dict]) -> dict:
    """Validation and test perplexity over the scored seeds: mean ± std and each seed's value (also of
    ``ALSO_SUMMED`` when the rows have them); how many runs stopped early, reached the epoch cap or
    diverged, and which seeds diverged before any validation (no score)."""
    rows = sorted(rows, key=lambda r: r["seed"])
    ok = scored(rows)
    more = {k: mean_std(r[k] for r in ok) for k in ALSO_SUMMED if ok and all(r.get(k) is not None for r in ok)}
    return {"seeds": [r["seed"] for r in rows], "lr": rows[0]["lr"] if rows else None,
            "valid_ppl": mean_std(r["valid_ppl"] for r in ok), "test_ppl": mean_std(r["test_ppl"] for r in ok),
            **more,
            "epochs": [r["epochs"] for r in rows], "stopped_early": sum(bool(r["stopped_early"]) for r in rows),
            "reached_max_epochs": sum(bool(r["reached_max_epochs"]) for r in rows),
            "diverged": sum(bool(r.get("diverged")) for r in rows),
            "diverged_unscored": [r["seed"] for r in rows if not is_scored(r)]}
