"""The central claim's networks under the comparison protocol (:mod:`.protocol`), and its results file.

Every network of ``reproduce central-claim`` is a :class:`~.protocol.Method` whose learning rate the
protocol's grid chooses on validation, trained to early stopping for each of the protocol's seeds. When a
seed's best parameters are scored on the test set (once), :class:`SplitScores` also scores what else the
experiment tests them on (the removed sentences, the new trigrams of Brown): ``extra(model)`` -> a dict,
kept in the seed's row. Rows that no network trains (the n-grams, the grammar) are rows too, with
``"seed": None``. Every row carries its ``"cell"`` (which table it belongs to) and its ``"model"``.

All rows go to one results file, merged under its lock (:func:`~.protocol.write_rows`): two processes
filling it (say the synthetic grammar in one, Brown in the other) keep every row. After each merge the file
is rebuilt from all its rows: the protocol's grid and summaries (:func:`~.protocol.with_summaries`), the
tables of mean ± std over the seeds (:func:`tables`) and what the rows cost (:func:`cost`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..analysis.quality import mean_std
from .protocol import (Method, Protocol, choose_lr, done_rows, run_dir, run_seeds, is_scored, window_ppl,
                       with_summaries, write_rows)

TARGET = "central-claim"


class SplitScores:
    """A method's ``score``: the perplexity of a split (:func:`~.protocol.window_ppl`) and, when the split is
    the test set, ``extra(model)`` too, kept in ``last`` with the CPU seconds it took."""

    def __init__(self, extra=None):
        self.extra, self.last = extra, {}

    def __call__(self, model, corpus, split: str) -> float:
        c0 = time.process_time()
        ppl = window_ppl(model, corpus, split)
        if split == "test":
            self.last = dict(self.extra(model)) if self.extra is not None else {}
            self.last["cpu_seconds_test"] = round(time.process_time() - c0, 2)
        return ppl


@dataclass
class Ctx:
    """Where and how a run writes: the results file ``out`` and its ``header`` (the same in every process
    that fills it), the ``protocol``, the run folders' ``root``, ``force``, ``quiet``, and ``started``."""

    out: Path
    header: dict
    protocol: Protocol
    root: Path
    force: bool = False
    quiet: bool = True
    started: float = 0.0

    def done(self) -> dict:
        return {} if self.force else done_rows(self.out, TARGET, self.header, self.protocol)

    def write(self, rows: list[dict]) -> dict:
        return write_rows(self.out, TARGET, self.header, rows, self.protocol, self.started, rebuild=rebuilt)


def train_seeds(method: Method, cell: str, model: str, corpus, ctx: Ctx) -> dict[int, dict]:
    """``method`` under the protocol: its rate chosen on validation (skipped when every seed's row is in the
    results file), each seed trained to early stopping, scored once and its row written as soon as it is
    done. Returns {seed: row}."""
    done = ctx.done()
    rows = {s: done[f"{method.name}/seed{s}"] for s in ctx.protocol.seeds if f"{method.name}/seed{s}" in done}
    if len(rows) == len(ctx.protocol.seeds):
        return rows
    choice = choose_lr(method, corpus, ctx.protocol, ctx.root, ctx.force, ctx.quiet)
    for seed in ctx.protocol.seeds:
        if seed in rows and rows[seed].get("lr") == choice["lr"]:
            continue
        [row] = run_seeds(method, corpus, ctx.protocol, choice, ctx.root, seeds=(seed,), force=ctx.force,
                          quiet=ctx.quiet)
        ok = is_scored(row)  # a seed diverged before its first validation was never scored
        row.update(method.score.last if ok else {}, cell=cell, model=model)
        if seed == ctx.protocol.seeds[0]:
            row["cpu_seconds_grid"] = grid_cpu_seconds(method, choice, ctx)
        rows[seed] = row
        ctx.write([row])
        if not ctx.quiet:
            result = f"test perplexity {row['test_ppl']:.3f}" if ok else "diverged before its first validation"
            print(f"   {method.name} seed {seed} (lr {choice['lr']:g}): {row['epochs']} epochs, {result}", flush=True)
    return rows


def grid_cpu_seconds(method: Method, choice: dict, ctx: Ctx) -> float:
    """The CPU seconds of the grid's runs not chosen (the chosen one is the first seed's start)."""
    total = 0.0
    for lr in ctx.protocol.lrs:
        history = run_dir(ctx.root, method.name, lr, ctx.protocol.seeds[0]) / "history.json"
        if lr != choice["lr"] and history.exists():
            total += sum(e.get("cpu_seconds", 0.0) for e in json.loads(history.read_text())["epochs"])
    return round(total, 2)


# --------------------------------------------------------------------------- the results file
def rebuilt(doc: dict) -> dict:
    """The file rebuilt from all its rows: the protocol's grid and summaries over the networks' rows, the
    tables of every cell and the cost, then the rows."""
    runs = doc["runs"]
    protocol_rows = [r for r in runs if "lr_grid" in r]
    out = with_summaries({**doc, "runs": protocol_rows}) if protocol_rows else dict(doc)
    return {**{k: v for k, v in out.items() if k != "runs"}, "tables": tables(runs), "cost": cost(runs),
            "runs": runs}


def tables(rows: list[dict]) -> dict:
    """{cell: {model: {key: mean ± std over the seeds, each seed's value kept}}} for every number a row
    keeps under ``"scores"`` (and its ``"gap"``); a row without a seed (a count model) is one value; a seed
    whose value is None (a group without tokens) is left out, and so is a seed that diverged before its
    first validation (no scores)."""
    rows = [r for r in rows if "diverged" not in r or is_scored(r)]
    by_cell: dict = {}
    for r in sorted(rows, key=lambda r: (r["cell"], r["model"], -1 if r["seed"] is None else r["seed"])):
        by_cell.setdefault(r["cell"], {}).setdefault(r["model"], []).append(r)
    out = {}
    for cell, models in by_cell.items():
        out[cell] = {}
        for model, rs in models.items():
            keys = list(rs[0].get("scores", {})) + (["gap"] if "gap" in rs[0] else [])
            values = {k: [r["scores"][k] if k in r.get("scores", {}) else r[k] for r in rs] for k in keys}
            entry = {k: mean_std(x for x in v if x is not None) for k, v in values.items()}  # None: no such token
            entry["seeds"] = [r["seed"] for r in rs]
            if rs[0].get("lr") is not None:
                entry["lr"] = rs[0]["lr"]
            out[cell][model] = entry
    return out


def cost(rows: list[dict]) -> dict:
    """What the rows cost, summed from each row's own seconds: training (the grid's runs included),
    scoring, and the count models; in CPU seconds and CPU hours."""
    train = sum(r.get("cpu_seconds_training", 0.0) + r.get("cpu_seconds_grid", 0.0) for r in rows)
    score = sum(r.get("cpu_seconds_test", 0.0) + r.get("cpu_seconds_counts", 0.0) for r in rows)
    return {"cpu_seconds_training": round(train, 1), "cpu_seconds_scoring": round(score, 1),
            "cpu_hours": round((train + score) / 3600, 3),
            "note": "per row: the training epochs (validation included) of the chosen rate and of the grid's other "
                    "rates, test scoring, fitting and scoring the count models"}


def gap(heldout: float, ordinary: float) -> float:
    """The gap between the removed sentences and ordinary ones: the mean log-probability per token on the
    removed sentences minus that on ordinary test sentences (nats; 0 if a model finds them equally likely,
    negative if it finds the removed ones less likely). Equivalently log(ordinary_ppl / heldout_ppl)."""
    return float(heldout) - float(ordinary)


def rms(table) -> float:
    """Root mean square of a table's entries (float64)."""
    return float(np.sqrt(np.mean(np.square(np.asarray(table), dtype=np.float64))))
