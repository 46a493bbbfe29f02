"""``python -m nplm_edu reproduce TARGET``: rerun the experiments behind the book's tables.

Each target is a function in :data:`TARGETS` that runs its experiments, writes one JSON file under
``data/results/`` and returns its path; a new table is one more entry in the dict (``table1`` for
the neural rows live in :mod:`nplm_edu.table1`). Every file records the command that produced it and
the git commit of the code (``"uncommitted"`` outside a git checkout or before the first commit).

    python -m nplm_edu reproduce ngrams             # every n-gram row of Table 1, on Brown (a few minutes)
    python -m nplm_edu reproduce table1             # the neural rows MLP1-MLP10 on Brown (hours, resumable)
    python -m nplm_edu reproduce table1 --quick     # the same pipeline on a slice (minutes)
    python -m nplm_edu reproduce minibatch          # K = 1 against minibatches on a Brown slice (about an hour)
    python -m nplm_edu reproduce beyond             # beyond the paper: a larger network, longer, mixed by EM (about an hour)
    python -m nplm_edu reproduce beyond --quick     # the same pipeline on a slice (seconds)
"""

from __future__ import annotations

import json
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from .errors import UserError

RESULTS = Path("data/results")

# the n-gram rows of Table 1 (section 4.1): (model, n, classes) -> the paper's (valid, test) perplexity
PAPER_NGRAMS = {
    ("interp", 3, None): (352, 336),
    ("kn", 3, None): (334, 323),
    ("kn", 4, None): (332, 321),
    ("kn", 5, None): (332, 321),
    ("class", 3, 150): (348, 334),
    ("class", 3, 200): (354, 340),
    ("class", 3, 500): (326, 312),
    ("class", 3, 1000): (335, 319),
    ("class", 3, 2000): (343, 326),
    ("class", 4, 500): (327, 312),
    ("class", 5, 500): (327, 312),
}


def git_commit() -> str:
    """Short hash of HEAD, or "uncommitted" if there is none."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "uncommitted"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "uncommitted"


def package_modified() -> bool | None:
    """Whether the package's files differ from that commit (uncommitted changes), None if unknown."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", "."], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


def command_line() -> str:
    """The command as a reader would type it."""
    argv = sys.argv[1:] if sys.argv and sys.argv[0].endswith(("__main__.py", "nplm-edu")) else None
    return "python -m nplm_edu " + (shlex.join(argv) if argv else "reproduce")


def ngram_rows(classes: list[int] | None = None) -> list[tuple[str, int, int | None]]:
    """Table 1's n-gram rows; ``classes`` replaces the class counts (e.g. for a small corpus)."""
    rows = list(PAPER_NGRAMS)
    if classes is not None:
        rows = [r for r in rows if r[0] != "class"] + [("class", 3, c) for c in classes]
        rows += [("class", n, classes[0]) for n in (4, 5)]
    return rows


def run_ngrams(args) -> Path:
    """Fit every n-gram row of Table 1 and write ngrams.json (model, order, classes, perplexities,
    seconds, the paper's numbers beside ours)."""
    from .corpus import corpus_from_args
    from .ngram import build_model, evaluate
    from .ngram.classes import exchange_classes

    corpus = corpus_from_args(args)
    clusters: dict[int, tuple] = {}  # c -> (labels, history, seconds): one clustering per c, shared by n
    rows = []
    for name, n, c in ngram_rows(args.classes):
        label = f"{name} n={n}" + (f" c={c}" if c else "")
        if not args.quiet:
            print(f"== {label}", flush=True)
        model = build_model(name, n, corpus.V, c, args.passes, None, quiet=True if name == "interp" else args.quiet)
        labels, extra = None, 0.0
        if name == "class":
            if c not in clusters:
                t0 = time.perf_counter()
                lab, hist = exchange_classes(corpus.train, corpus.V, c, args.passes, None, not args.quiet)
                clusters[c] = (lab, hist, time.perf_counter() - t0)
            labels, model.history, extra = clusters[c]
        res = evaluate(model, corpus, name, class_labels=labels)
        res["seconds"] = round(res["seconds"] + extra, 3)
        if name == "class":
            res["cluster_seconds"] = round(extra, 3)
            res["exchange_objective"] = [round(x, 1) for x in model.history]
        if name == "interp":
            res["em_valid_log_likelihood"] = [round(x, 1) for x in model.em_history]
        paper = PAPER_NGRAMS.get((name, n, c)) if corpus.name == "brown" else None  # Brown only
        res["paper_valid"], res["paper_test"] = paper if paper else (None, None)
        rows.append(res)
        if not args.quiet:
            print(f"   valid {res['valid']}  test {res['test']}  ({res['seconds']:.1f} s)", flush=True)
    out = Path(args.out) if args.out else RESULTS / "ngrams.json"
    doc = {
        "command": command_line(),
        "commit": git_commit(),
        "package_modified_since_commit": package_modified(),
        "corpus": corpus.name,
        "V": corpus.V,
        "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid", "test")},
        "exchange_passes": args.passes,
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
        "note": "perplexity over every token of each split; seconds = fit + scoring train, valid and test "
                "(+ clustering for class rows), wall clock on a shared 2-core machine",
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out}")
    return out


def run_table1(args) -> Path:
    """The neural rows of Table 1: see :mod:`nplm_edu.table1`."""
    from .table1 import run_table1 as run

    return run(args)


def run_minibatch(args) -> Path:
    """K = 1 against minibatches on one Table 1 network: see :mod:`nplm_edu.minibatch`."""
    from .minibatch import run_minibatch as run

    return run(args)


def run_beyond(args) -> Path:
    """Beyond the paper: a larger network trained longer, mixed by EM weights: see :mod:`nplm_edu.beyond`."""
    from .beyond import run_beyond as run

    return run(args)


TARGETS = {"ngrams": run_ngrams, "table1": run_table1, "minibatch": run_minibatch, "beyond": run_beyond}


def _cmd_reproduce(args) -> int:
    if args.target not in TARGETS:
        raise UserError(f"unknown target {args.target!r}: use one of {', '.join(TARGETS)}")
    TARGETS[args.target](args)
    return 0


def _class_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--classes takes comma-separated integers, got {text!r}") from None
    if not out:
        raise UserError("--classes needs at least one number")
    return out


def add_cli(subparsers) -> None:
    from .corpus import add_corpus_args

    p = subparsers.add_parser("reproduce", help="rerun the experiments behind a table, write data/results/*.json",
                              description="Rerun the experiments behind one of the book's tables and write "
                                          "its JSON file (with the command and the git commit).")
    p.add_argument("target", help=f"what to reproduce: {', '.join(TARGETS)}")
    add_corpus_args(p)
    p.set_defaults(corpus="brown")
    p.add_argument("--out", default=None, help="output file (default data/results/<target>.json)")
    p.add_argument("--classes", type=_class_list, default=None,
                   help="ngrams: class counts instead of the paper's 150,200,500,1000,2000 (the first is "
                        "also used for orders 4 and 5)")
    p.add_argument("--passes", type=int, default=3, help="ngrams: exchange-algorithm passes (default 3)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    from .table1 import add_args

    add_args(p)
    from .beyond import add_args as add_beyond_args

    add_beyond_args(p)  # after table1's: it re-marks the defaults of the options they share
    p.set_defaults(func=_cmd_reproduce)
