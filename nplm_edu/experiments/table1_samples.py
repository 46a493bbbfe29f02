"""Samples for a Table 1 row trained before its rows kept samples: taken from a rerun of the same command.

``reproduce table1`` draws three seeded samples from each network it trains and keeps them in the
row (:func:`~nplm_edu.analysis.sampling.seeded_samples`). A row written before that has none; its
network's parameters may be gone. Rerunning the row's explicit command into another results file
trains the same network again; :func:`adopt_samples` then copies the rerun's samples into the
original row, with where they come from::

    python -m nplm_edu reproduce table1 --rows MLP9 ... --out /elsewhere/table1.json --runs-dir /elsewhere/runs
    python -c "from nplm_edu.experiments.table1_samples import adopt_samples; \\
               adopt_samples('data/results/table1.json', '/elsewhere/table1.json', 'MLP9')"

If every epoch of the rerun has the original's numbers (updates, learning rate, training and validation
perplexity), the rerun trained the same network, and the samples are marked ``"same_network": true``.
Otherwise they are the samples of another network trained by the same command: marked false, with the
rerun's own validation and test perplexity and the largest relative difference between the two
histories, so that whoever shows them can say which network wrote them.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..data.locks import one_writer
from ..errors import UserError
from .common import write_json_atomic
from .skeleton import MERGE_WAIT

COMPARED = ("epoch", "updates", "lr", "train_ppl", "valid_ppl")  # what "the same training" means, epoch by epoch


def history_difference(a: list[dict], b: list[dict]) -> float:
    """The largest relative difference between two runs' per-epoch numbers (:data:`COMPARED`); 0.0 when
    they are identical, inf when they ran a different number of epochs."""
    if len(a) != len(b):
        return float("inf")
    worst = 0.0
    for x, y in zip(a, b):
        for k in COMPARED:
            u, v = float(x[k]), float(y[k])
            worst = max(worst, abs(u - v) / max(abs(u), abs(v), 1e-300))
    return worst


def rerun_samples(row: dict, rerun: dict) -> dict:
    """The rerun row's samples, with their provenance and whether they are ``row``'s network's."""
    if "samples" not in rerun:
        raise UserError("the rerun's row holds no samples: rerun it with a version of reproduce table1 that draws them")
    if rerun.get("command_explicit") != row.get("command_explicit"):
        raise UserError(f"the rerun ran another command ({rerun.get('command_explicit')}) than the row "
                        f"({row.get('command_explicit')})")
    diff = history_difference(row["history"], rerun["history"])
    out = {**rerun["samples"], "same_network": diff == 0.0,
           "drawn_by": {k: rerun.get(k) for k in ("command_explicit", "commit", "date")}}
    if diff:
        out["rerun"] = {"valid": rerun["valid"], "test": rerun["test"], "epochs_run": rerun["epochs_run"],
                        "history_largest_relative_difference": diff}
    return out


def adopt_samples(path, rerun_path, row: str) -> dict:
    """Write into the results file at ``path`` the samples of ``row`` from the rerun's results file
    (:func:`rerun_samples`); returns them."""
    path = Path(path)
    rerun = json.loads(Path(rerun_path).read_text(encoding="utf-8"))
    with one_writer(path, wait=MERGE_WAIT):  # as a run filling the file would
        doc = json.loads(path.read_text(encoding="utf-8"))
        if row not in doc["rows"] or row not in rerun["rows"]:
            raise UserError(f"{row} must be a row of both {path} and {rerun_path}")
        samples = rerun_samples(doc["rows"][row], rerun["rows"][row])
        doc["rows"][row]["samples"] = samples
        write_json_atomic(path, doc)
    return samples
