"""The skeleton every ``reproduce`` target shares: a run folder, training or resuming in it, history rows,
and the merge into the results file, each under one writer at a time (:mod:`nplm_edu.data.locks`).

A target is then its settings, its evaluation and its table::

    with run_folder(root / "MLP1", stamp, force, quick) as resumed:      # prepared, locked
        history = train(model, corpus, cfg, out_dir=root / "MLP1", resume=resumed)
    merge_results(out, "table1", doc, {"MLP1": row}, started)           # row by row, under the lock
"""

from __future__ import annotations

import hashlib
import json
import shutil
from contextlib import contextmanager
from pathlib import Path

from ..data.files import atomic_write
from ..data.locks import one_writer
from ..errors import UserError
from .common import results_path, runs_root, write_json_atomic, write_results

MERGE_WAIT = 60.0  # seconds a results file's writer waits for another's merge (milliseconds, normally)


def rounded_history(epochs: list[dict], digits: int = 4) -> list[dict]:
    """A trainer's per-epoch rows for a results file: floats rounded to ``digits``."""
    return [{k: (round(v, digits) if isinstance(v, float) else v) for k, v in e.items()} for e in epochs]


# --------------------------------------------------------------------------- what a results file is
def results_kind(doc) -> str | None:
    """Which target wrote a results document: its ``target`` key, or for files written before that key,
    their shape; None for a document no ``reproduce`` target wrote."""
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("target"), str):
        return doc["target"]
    rows, runs = doc.get("rows"), doc.get("runs")
    shapes = (("lr-sweep", "lrs" in doc and isinstance(runs, list)),
              ("minibatch", isinstance(runs, dict)),
              ("ngrams", "exchange_passes" in doc and isinstance(rows, list)),
              ("recurrent", "kn5" in doc and isinstance(rows, list)),
              ("beyond", doc.get("row") == "beyond"),
              ("central-claim", "synthetic" in doc),
              ("table1", "settings" in doc and isinstance(rows, dict)),
              ("output-layers", "settings" in doc and isinstance(rows, list)),
              ("train", "history" in doc))
    return next((name for name, match in shapes if match), None)


def read_results(path, target: str) -> dict | None:
    """The results file at ``path`` written earlier by ``target`` (None if there is none); one line if it
    is not JSON, or is another target's (which a run would silently replace)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        why = getattr(e, "strerror", None) or "not readable JSON"
        raise UserError(f"{path} is not a {target} results file ({why}): move it away or give another `out`") from None
    kind = results_kind(doc)
    if kind != target:
        what = f"a {kind} results file" if kind else "not a results file of ours"
        raise UserError(f"{path} is {what}, not {target}'s: it would be replaced; give another `out`")
    return doc


def results_file(out, target: str, quick: bool = False) -> Path:
    """Where ``target`` writes (``out``, else its default file, :func:`~.common.results_path`), checked now,
    before any work: writable, and not another target's results file nor anything but JSON."""
    path = results_path(out, target.replace("-", "_"), quick)
    read_results(path, target)
    return path


def merge_results(out, target: str, doc: dict, rows: dict, started: float, same=("corpus", "V", "tokens", "quick"),
                  key: str | None = None, order=None, then=None, field: str = "rows", kept=None, merged=()) -> dict:
    """Write ``doc`` to ``out`` with ``rows`` ({name: row}) merged row by row into the rows already there:
    the file is re-read under its lock, so two processes filling one file keep both rows. Rows on disk
    are kept when the file's ``same`` keys equal ``doc``'s; else the file is of other settings: it is
    moved aside whole (:func:`set_aside`, said on the terminal) and ``out`` starts again.
    ``key``: the field naming a row when the file keeps its rows as a list (None: a dict of rows);
    ``order``: the rows' names in the order the file lists them (default: as they come); ``then``: a
    function of the merged document returning what is written (e.g. ratios between rows); ``field``: the
    key of the rows in the file; ``kept``: a function (row, the file's document) -> row applied to each row
    read from the file (e.g. giving a row of older code the file's provenance before it is replaced);
    ``merged``: keys of ``doc`` that describe rather than decide (never in ``same``), each merged entry by
    entry with the file's when its rows are kept (:func:`merge_descriptions`)."""
    out = Path(out)
    with one_writer(out, wait=MERGE_WAIT):
        disk = read_results(out, target)
        kept_rows, kept_doc = {}, {}
        changed = [k for k in same if disk is not None and disk.get(k) != doc.get(k)]
        if disk is not None and not changed:
            kept_rows, kept_doc = rows_on_disk(disk, field, key, kept), disk
        elif disk is not None:
            print(f"{out} holds rows of other settings ({', '.join(changed)}): moved to {set_aside(out)}")
        kept_rows.update(rows)
        names = [n for n in (order or []) if n in kept_rows] + [n for n in kept_rows if n not in (order or [])]
        listed = {n: kept_rows[n] for n in names}
        final = {**merge_descriptions(doc, kept_doc, merged, field), "target": target,
                 field: listed if key is None else list(listed.values())}  # rows last: easier to read
        final = then(final) if then else final
        return write_results(out, final, started)


def merge_descriptions(doc: dict, disk: dict, keys, field: str = "rows") -> dict:
    """``doc`` (without its rows' ``field``) with each of ``keys`` that is a dict in both merged entry by
    entry with ``disk``'s (the file's entries kept, ``doc``'s winning for its own): what other processes
    described stays described. A key ``doc`` lacks is taken from ``disk``."""
    out = {k: v for k, v in doc.items() if k != field}
    for k in keys:
        mine, theirs = doc.get(k), disk.get(k)
        if isinstance(mine, dict) and isinstance(theirs, dict):
            out[k] = {**theirs, **mine}
        elif mine is None and theirs is not None:
            out[k] = theirs
    return out


def set_aside(path: Path) -> Path:
    """Rename a results file out of the way, never over another: ``<name>.replaced-<k>.json``."""
    k = 1
    while (aside := path.with_name(f"{path.stem}.replaced-{k}{path.suffix}")).exists():
        k += 1
    path.rename(aside)
    return aside


def rows_on_disk(disk: dict, field: str, key: str | None, kept=None) -> dict:
    """{name: row} of the rows a results file holds under ``field`` (a dict, or a list named by ``key``),
    each passed through ``kept(row, disk)`` if given."""
    old = disk.get(field, {})
    rows = dict(old) if key is None else {r[key]: r for r in old if isinstance(r, dict) and key in r}
    return rows if kept is None else {name: kept(r, disk) if isinstance(r, dict) else r for name, r in rows.items()}


def write_whole(out, target: str, doc: dict, started: float) -> dict:
    """A results file a target writes whole (one run, one table): under its lock, refusing another
    target's file."""
    out = Path(out)
    with one_writer(out, wait=MERGE_WAIT):
        read_results(out, target)
        return write_results(out, {**doc, "target": target}, started)


# --------------------------------------------------------------------------- run folders
def runs_for(runs_dir: str | None, out) -> Path:
    """The folder holding a target's runs for the results file ``out``: ``<runs>/<out stem>``, unless that
    folder holds the runs of another results file of the same name (in another folder), when it is
    ``<runs>/<out stem>-<hash of the full path>``: two results files never share, or delete, each
    other's runs. The folder records whose runs it holds (``results_file.txt``)."""
    out = Path(out).resolve()
    root = runs_root(runs_dir)
    plain = root / out.stem
    owner = plain / "results_file.txt"
    try:
        mine = not owner.exists() or owner.read_text(encoding="utf-8").strip() == str(out)
    except OSError:
        mine = False
    folder = plain if mine else root / f"{out.stem}-{hashlib.sha256(str(out).encode('utf-8')).hexdigest()[:8]}"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "results_file.txt").exists():
        atomic_write(folder / "results_file.txt", lambda f: f.write(f"{out}\n"), binary=False)
    return folder


def _stamp_of(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return "unreadable"


@contextmanager
def run_folder(run_dir, stamp: dict, force: bool = False, fresh_ok: bool = False, what: str = "",
               name: str = "run_config.json"):
    """Inside, ``run_dir`` is ready for a run with the settings ``stamp`` (kept in its ``name`` file) and
    this process is its only writer; yields whether a checkpoint is there to resume. A checkpoint made
    with other settings (or beside an unreadable settings file) is refused in one line unless ``force``
    or ``fresh_ok`` (a quick run), which start afresh."""
    run_dir = Path(run_dir)
    with one_writer(run_dir, what=f" (training {what})" if what else " (a training run)"):
        stamp_path, ckpt = run_dir / name, run_dir / "checkpoint.npz"
        if ckpt.exists():
            old = _stamp_of(stamp_path) if stamp_path.exists() else None
            if old != stamp and not (force or fresh_ok):
                why = "an unreadable " + name if old == "unreadable" else "other settings"
                whose = f" ({what})" if what else ""
                raise UserError(f"{run_dir} holds a run with {why}{whose}: `force` trains from scratch, "
                                "or another `runs_dir`")
            if old != stamp or force:
                shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(stamp_path, stamp)
        yield ckpt.exists()


def check_not_over(outputs: dict, inputs: dict) -> None:
    """No output path may equal or lie inside an input: ``{flag: path}`` each (None: not given). One line
    naming both flags, before any work."""
    ins = {flag: Path(p).resolve() for flag, p in inputs.items() if p}
    for oflag, o in outputs.items():
        if not o:
            continue
        o = Path(o).resolve()
        for iflag, i in ins.items():
            if o == i or i in o.parents:
                where = "is" if o == i else "lies inside"
                raise UserError(f"{oflag} {o} {where} {iflag} {i}: no output may equal or lie inside an input; "
                                f"choose another {oflag}")
