"""Which code trained each row of a protocol's results file: the commits each run folder trained under.

A results file's provenance block (:func:`~.common.provenance`) names the commit of the process that
wrote it last. A file filled over days, by processes at different commits, needs more: every run folder
of the protocol keeps a record, ``trained_under.json``, one entry per session that trained in it (the
commit, whether the package differed from it, the package's version, the first epoch the session
trained, the date), and every seed's row carries its folder's entries (:func:`row_provenance`), every
grid value those that trained its grid epochs. A killed session's entry stays (it may have trained some
batches); a session that found its run complete leaves none.

A row written before rows carried this (by older code) is given the provenance of the file it is read
from (:func:`provenance_of`), whose commit is the last writer's: that is the row's own, since the first
writer of this code to read the file afterwards writes it into the row.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from . import common
from .common import write_json_atomic

RECORD = "trained_under.json"
BEFORE = "trained before run folders recorded their commit"
FROM_FILE = "the results file's provenance (the row was written before rows recorded their commit)"


def code_state() -> dict:
    """The code running now: its commit, whether the package differs from it, the package's version."""
    return {"commit": common.git_commit(), "package_modified_since_commit": common.package_modified(),
            "nplm_edu": common.package_version()}


def sessions(folder) -> list[dict]:
    """The sessions recorded in a run folder, oldest first ([] if none is)."""
    try:
        return list(json.loads((Path(folder) / RECORD).read_text(encoding="utf-8"))["sessions"])
    except (OSError, ValueError, KeyError, TypeError):
        return []


def epochs_done(folder) -> int:
    """How many epochs the run in ``folder`` has validated (its ``history.json``; 0 without one)."""
    try:
        return len(json.loads((Path(folder) / "history.json").read_text(encoding="utf-8"))["epochs"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


@contextmanager
def recorded_session(folder, resumed: bool):
    """Inside, ``folder``'s record lists this session (:func:`code_state`, from the epoch after those
    done); a run resumed from before records existed is listed first as such. Left out again if the
    session ended without training an epoch (its run was complete); kept if it was interrupted."""
    folder = Path(folder)
    before = epochs_done(folder) if resumed else 0
    past = sessions(folder) if resumed else []
    if before and not past:
        past = [{"commit": None, "from_epoch": 1, "note": BEFORE}]
    entry = {**code_state(), "from_epoch": before + 1, "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_json_atomic(folder / RECORD, {"sessions": past + [entry]})
    yield
    if epochs_done(folder) == before:  # nothing trained: the run was already complete
        write_json_atomic(folder / RECORD, {"sessions": past})


def row_provenance(entries: list[dict]) -> dict:
    """What a row says of the code that trained it: the last session's commit, every commit in order (each
    once), whether any session's package differed from its commit (None if unknown), the versions."""
    commits = list(dict.fromkeys(e.get("commit") for e in entries))
    modified = [e.get("package_modified_since_commit") for e in entries if e.get("commit") is not None]
    clean = True if any(modified) else (None if None in modified or None in commits or not entries else False)
    return {"commit": entries[-1].get("commit") if entries else None, "commits": commits,
            "package_modified_since_commit": clean,
            "nplm_edu": list(dict.fromkeys(e["nplm_edu"] for e in entries if e.get("nplm_edu"))),
            "sessions": entries}


def run_provenance(folder, last_epoch: int | None = None) -> dict:
    """:func:`row_provenance` of a run folder's sessions (those that trained epochs up to ``last_epoch``)."""
    entries = [e for e in sessions(folder) if last_epoch is None or e.get("from_epoch", 1) <= last_epoch]
    return row_provenance(entries)


def provenance_of(row: dict, doc: dict) -> dict:
    """A row's own provenance, or, for a row written before rows had one, that of the file ``doc`` it was
    read from."""
    if isinstance(row.get("provenance"), dict):
        return row["provenance"]
    return {"commit": doc.get("commit"), "commits": [doc.get("commit")],
            "package_modified_since_commit": doc.get("package_modified_since_commit"), "nplm_edu": [],
            "source": FROM_FILE}


def adopted(row: dict, doc: dict) -> dict:
    """A row read from the results file ``doc``, with its provenance (and its grid values') written in."""
    if isinstance(row.get("provenance"), dict):
        return row
    prov = provenance_of(row, doc)
    grid = row.get("lr_grid_provenance") or ({lr: prov for lr in row["lr_grid"]} if "lr_grid" in row else None)
    return {**row, "provenance": prov, **({"lr_grid_provenance": grid} if grid is not None else {})}


def stamped(row: dict) -> dict:
    """A row written now with no provenance of its own (a count model's, say): the code running now."""
    return row if isinstance(row.get("provenance"), dict) else {**row, "provenance": row_provenance([code_state()])}
