"""Which command, at which commit, made each file of ``data/results/``: ``python -m nplm_edu results``.

Every results file carries the provenance keys of :func:`~nplm_edu.experiments.common.write_results`
(command, commit, whether the package differed from that commit, date), at its top level, in a
``provenance`` block (the scale benchmark), or per row when rows were trained by separate commands
(Table 1; a protocol's seed rows, ``runs``, each in a ``provenance`` block listing every commit that
trained it). A file deliberately kept from an earlier run says so in a ``kept`` key, with the reason.
This module reads them back: one :class:`Entry` per file, and the files whose provenance is missing
or unclean without such a reason. Files that are not JSON (a figure, saved word features) are
attributed to the JSON file whose name begins theirs (``scale.png`` to ``scale.json``).
:func:`runs_progress` does the same for training runs still under way (a table filled over several
days): how far each run in a runs folder has got.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError


@dataclass
class Entry:
    """The provenance of one results file (``path`` relative to the folder read)."""

    path: str
    command: str | None = None
    commands: list[str] = field(default_factory=list)  # every distinct command recorded in it (rows' too)
    commits: list[str] = field(default_factory=list)
    clean: bool | None = None  # False: the package differed from the commit; None: not recorded
    date: str | None = None
    kept: str | None = None  # why the file is kept from an earlier run, if it is
    made_with: str | None = None  # for a file that is not JSON: the JSON file it belongs to

    def problem(self) -> str | None:
        """Why this file cannot be traced to one clean commit (None if it can, or says why it is kept)."""
        if not self.path.endswith(".json"):
            return None if self.made_with else "not JSON, and no JSON file of the same name says how it was made"
        if self.kept:
            return None
        if not self.command:
            return "no command recorded"
        if not self.commits or "uncommitted" in self.commits:
            return "no commit recorded"
        if self.clean is not True:
            return "made by code that differed from its commit" if self.clean is False else "cleanliness not recorded"
        return None


def _text(value) -> str | None:
    """A recorded command, commit or date: a non-empty string, else None (another tool's odd types are not ours)."""
    return value if isinstance(value, str) and value else None


def _flags(node: dict) -> tuple[str | None, str | None, bool | None, str | None]:
    """(command, commit, package modified?, date) of one node: its own keys, else its ``provenance`` block's."""
    prov = node.get("provenance") if isinstance(node.get("provenance"), dict) else {}

    def get(*keys):
        return next((v for v in (src.get(k) for src in (node, prov) for k in keys) if v is not None), None)

    modified = get("package_modified_since_commit", "package_modified")
    return (_text(get("command")), _text(get("commit")), modified if isinstance(modified, bool) else None,
            _text(get("date")))


def _rows(doc: dict) -> list[dict]:
    rows, runs = doc.get("rows"), doc.get("runs")
    rows = list(rows.values()) if isinstance(rows, dict) else rows if isinstance(rows, list) else []
    return [r for r in rows + (runs if isinstance(runs, list) else []) if isinstance(r, dict)]


def _row_commits(row: dict) -> list[str]:
    """Every commit a row's ``provenance`` block says trained it (a run resumed under other code)."""
    prov = row.get("provenance")
    commits = prov.get("commits") if isinstance(prov, dict) else None
    return [c for c in commits if _text(c)] if isinstance(commits, list) else []


def entry_of(doc: dict, path: str) -> Entry:
    """Read the provenance of one results document (top level, ``provenance`` block, or rows)."""
    top = _flags(doc)
    row_flags = [f for f in map(_flags, _rows(doc)) if f[1]]
    nodes = ([top] if top[1] else []) + row_flags  # the nodes that record a commit
    modified = [f[2] for f in nodes]
    clean = False if any(modified) else None if not modified or None in modified else True
    commands = list(dict.fromkeys(c for c in [top[0]] + [f[0] for f in row_flags] if c))
    dates = [d for d in [top[3]] + [f[3] for f in row_flags] if d]
    return Entry(path=path, command=commands[0] if commands else None, commands=commands,
                 commits=sorted({f[1] for f in nodes} | {c for r in _rows(doc) for c in _row_commits(r)}), clean=clean, date=max(dates) if dates else None,
                 kept=_text(doc.get("kept")))


def inventory(folder) -> list[Entry]:
    """One entry per file under ``folder`` (recursively), sorted by path."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder of results")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    stems = {p.relative_to(folder).with_suffix("").as_posix() for p in files if p.suffix == ".json"}
    out = []
    for p in files:
        rel = p.relative_to(folder).as_posix()
        if p.suffix == ".json":
            try:
                doc = json.loads(p.read_text(encoding="utf-8"))
            except ValueError as e:
                raise UserError(f"{p} is not valid JSON ({e})") from None
            except RecursionError:
                raise UserError(f"{p} is nested too deeply to be a results file") from None
            out.append(entry_of(doc if isinstance(doc, dict) else {}, rel))
        else:
            stem = p.relative_to(folder).with_suffix("").as_posix()
            owner = max((s for s in stems if stem.startswith(s)), key=len, default=None)
            out.append(Entry(path=rel, made_with=f"{owner}.json" if owner else None))
    return out


def problems(entries: list[Entry]) -> list[str]:
    """"file: reason" for every file that cannot be traced to one clean commit and is not marked kept
    (a file that is not JSON and belongs to no JSON file counts as one)."""
    return [f"{e.path}: {e.problem()}" for e in entries if e.problem()]


def runs_progress(root) -> list[dict]:
    """Every training run under ``root`` (a folder holding ``history.json``, at any depth): its path,
    epochs done of at most how many, the best validation perplexity and its epoch, the epochs since
    then against the patience (early stopping), seconds trained, and when the history was last written.
    The best epoch is the trainer's own (``best_epoch`` and ``best_valid_ppl``, written after every epoch)."""
    out = []
    for hist in sorted(Path(root).rglob("history.json")):
        try:
            h = json.loads(hist.read_text(encoding="utf-8"))
            epochs, train, best = h["epochs"], h.get("train", {}), h.get("best_epoch")
            valid = h.get("best_valid_ppl")
            seconds = sum(float(e.get("seconds", 0.0)) for e in epochs)
            if (not isinstance(train, dict) or not isinstance(best, (int, type(None))) or isinstance(best, bool)
                    or not isinstance(valid, (int, float, type(None)))):
                raise TypeError
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            continue  # not a history this package wrote (another tool's, or damaged)
        out.append({"run": hist.parent.relative_to(root).as_posix(), "epochs": len(epochs),
                    "max_epochs": train.get("epochs"), "patience": train.get("patience"),
                    "best_epoch": best, "best_valid": valid,
                    "since_best": None if best is None else len(epochs) - best,
                    "seconds": seconds,
                    "updated": time.strftime("%Y-%m-%d %H:%M", time.gmtime(hist.stat().st_mtime))})
    return out
