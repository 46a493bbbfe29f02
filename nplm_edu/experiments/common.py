"""What every ``reproduce`` target shares: where results go, how they are written, where runs live.

Every file in ``data/results/`` is written by :func:`write_results` (through the skeleton of
:mod:`~nplm_edu.experiments.skeleton`, under the file's lock): atomically (a temporary file
in the same folder, fsync, rename, so a crash never leaves half a file) and with one
:func:`provenance` block of the same keys everywhere: the exact command, the commit, whether the
package differed from that commit, the machine, the Python, numpy and BLAS versions and BLAS thread
count, the wall time and the date.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
import tomllib
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np

from ..data.corpus import BROWN_SPLIT
from ..data.files import atomic_write
from ..errors import UserError
from ..numerics.blas import blas_info
from ..training.checkpoint import check_writable

RESULTS = Path("data/results")  # the full runs of the reproduce targets: the committed results
SCRATCH = Path("runs/results")  # quick runs: beside the runs, never over a committed file (runs/ is not in git)
PACKAGE = Path(__file__).resolve().parents[1]


def git_commit() -> str:
    """Short hash of HEAD, or "uncommitted" if there is none."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=PACKAGE,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "uncommitted"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "uncommitted"


def commit_date(commit: str) -> str | None:
    """The day (YYYY-MM-DD) ``commit`` was made, from this repository's history; None if git cannot tell."""
    try:
        out = subprocess.run(["git", "show", "-s", "--format=%cs", commit, "--"], capture_output=True, text=True,
                             cwd=PACKAGE, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    day = out.stdout.strip()
    return day if out.returncode == 0 and len(day) == 10 else None


def package_modified() -> bool | None:
    """Whether the package's files differ from that commit (uncommitted changes), None if unknown."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", "."], capture_output=True, text=True,
                             cwd=PACKAGE, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def package_version() -> str | None:
    """The package's version: the checkout's ``pyproject.toml`` (the tree whose commit is recorded), else
    the installed distribution's; None if neither says."""
    try:
        return tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        return metadata.version("nplm-edu")
    except metadata.PackageNotFoundError:
        return None


def command_line(argv: list[str] | None = None) -> str:
    """The command as a reader would type it (``argv``: sys.argv), quoted so that a shell reads it back.

    >>> command_line(["/x/nplm_edu/__main__.py", "train", "--out", "my runs"])
    "python -m nplm_edu train --out 'my runs'"
    >>> command_line(["benchmarks/bench_scale.py", "--sizes", "1e6"])
    'python benchmarks/bench_scale.py --sizes 1e6'
    """
    argv = sys.argv if argv is None else argv
    if argv and argv[0].endswith(("__main__.py", "nplm-edu")):
        return "python -m nplm_edu " + (shlex.join(argv[1:]) if argv[1:] else "reproduce")
    if argv and argv[0].endswith(".py"):  # a script, such as a benchmark
        return "python " + shlex.join(argv)
    return "python -m nplm_edu reproduce"  # a library call (a notebook, a test)


def machine() -> str:
    """CPU model, cores and operating system."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"


def provenance(started: float, command: str | None = None) -> dict:
    """The keys every results file carries (``started``: time.monotonic() when the run began)."""
    blas = blas_info()
    return {"command": command or command_line(), "commit": git_commit(),
            "package_modified_since_commit": package_modified(), "machine": machine(),
            "python": platform.python_version(), "numpy": np.__version__, "blas": blas["name"],
            "blas_threads": blas["threads"], "wall_seconds": round(time.monotonic() - started, 1),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def write_json_atomic(path, doc) -> Path:
    """Write ``doc`` as JSON to ``path`` atomically (:func:`nplm_edu.data.files.atomic_write`)."""
    return atomic_write(path, lambda f: f.write(json.dumps(doc, indent=1) + "\n"), binary=False)


def write_results(path, doc: dict, started: float, command: str | None = None) -> dict:
    """A results file: ``doc`` and the provenance block's keys beside its own, written atomically; returns
    what it wrote."""
    doc = {**doc, **provenance(started, command)}
    write_json_atomic(path, doc)
    return doc


def check_output_path(path, option: str = "--out") -> Path:
    """Fail now, not after hours of training, if a results file cannot be written at ``path`` (given
    by the command-line ``option``, which the message names)."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path} is a folder: {option} takes a file path")
    check_writable(path.parent)
    return path


def default_results(name: str, quick: bool = False) -> Path:
    """Where a target writes unless told: data/results/<name>.json, or runs/results/<name>_quick.json for a
    quick run (a scratch folder: only the full targets write data/results/)."""
    return SCRATCH / f"{name}_quick.json" if quick else RESULTS / f"{name}.json"


def results_path(out, name: str, quick: bool = False) -> Path:
    """Where a target writes: ``out`` if given, else :func:`default_results`, checked for writing now
    (:func:`check_output_path`)."""
    return check_output_path(Path(out) if out else default_results(name, quick))


def runs_root(runs_dir: str | None) -> Path:
    """Where training runs checkpoint: ``runs_dir``, else ``$NPLM_EDU_RUNS`` or ``~/.cache/nplm_edu/runs``."""
    if runs_dir:
        return Path(runs_dir).expanduser()
    return Path(os.environ.get("NPLM_EDU_RUNS", Path.home() / ".cache" / "nplm_edu" / "runs"))


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


def is_full_brown(corpus, min_count: int) -> bool:
    """The paper's setting: all of Brown, 800,000 / 200,000 / rest, words seen 3 times or fewer as <unk>."""
    return (corpus.name == "brown" and min_count == 4
            and (len(corpus.train), len(corpus.valid)) == BROWN_SPLIT)

