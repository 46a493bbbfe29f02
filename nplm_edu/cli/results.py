"""``python -m nplm_edu results``: which command, at which commit, made each file of ``data/results/``."""

from __future__ import annotations

import contextlib
import io
import shlex

from ..errors import UserError
from ..experiments.common import RESULTS, commit_date, runs_root
from ..experiments.inventory import inventory, problems, runs_progress


def _runs(folder) -> int:
    runs = runs_progress(folder)
    if not runs:
        print(f"no training runs under {folder}")
        return 0
    width = max(len(r["run"]) for r in runs)
    print(f"{'run':{width}}  {'epochs':>9}  {'best valid':>10} {'at':>4}  {'since best':>10}  {'hours':>6}  last written (UTC)")
    for r in runs:
        done = f"{r['epochs']}/{r['max_epochs'] or '?'}"
        stop = f"{r['since_best']}/{r['patience']}" if r["since_best"] is not None else "-"
        best = f"{r['best_valid']:10.2f} {r['best_epoch']:>4}" if r["best_valid"] is not None else f"{'-':>10} {'':>4}"
        print(f"{r['run']:{width}}  {done:>9}  {best}  {stop:>10}  {r['seconds'] / 3600:6.2f}  {r['updated']}")
    print("(a run stops when 'since best' reaches the patience, or at its last epoch)")
    return 0


def _commands(words: list[str]) -> list[list[str]]:
    """A shell line's words cut into its commands at ``&&``, ``||``, ``;`` and ``|``."""
    parts: list[list[str]] = [[]]
    for w in words:
        if w in ("&&", "||", ";", "|"):
            parts.append([])
        else:
            parts[-1].append(w)
    return [p for p in parts if p]


def stale_commands(entries) -> list[str]:
    """"file: command (why)" for every recorded ``python -m nplm_edu ...`` command (with or without an
    ``mpiexec`` before it) that today's command line would refuse: a file's command is how a reader
    reruns it. The benchmarks' commands are their scripts' own and are not read here."""
    from . import build_parser

    parser, bad = build_parser(), []
    for e in entries:
        for command in e.commands:
            try:
                lexer = shlex.shlex(command, posix=True, punctuation_chars=True)  # "--check;" -> "--check", ";"
                lexer.whitespace_split = True
                words = list(lexer)
            except ValueError as exc:  # an unbalanced quote
                bad.append(f"{e.path}: `{command}` (not a command line: {exc})")
                continue
            for part in _commands(words):
                at = next((i + 2 for i in range(len(part) - 1) if part[i:i + 2] == ["-m", "nplm_edu"]), None)
                if at is None:
                    continue
                said = io.StringIO()
                try:
                    with contextlib.redirect_stderr(said):
                        parser.parse_args(part[at:])
                except SystemExit:
                    why = (said.getvalue().strip().splitlines() or ["refused"])[-1]
                    bad.append(f"{e.path}: `{command}` ({why})")
    return bad


def _date(entry) -> str:
    """The day a file was written; for one that did not record it, the day of its commit (marked *)."""
    if entry.date:
        return entry.date[:10]
    days = sorted(filter(None, map(commit_date, entry.commits)))
    return days[-1] + "*" if days else "unrecorded"


def _handler(args) -> int:
    if args.runs is not None:
        return _runs(runs_root(args.runs or None))
    entries = inventory(args.dir)
    width = max(len(e.path) for e in entries) if entries else 10
    print(f"{'file':{width}}  {'commit':10} {'clean':5}  {'date':11} command   (date*: the commit's, the file recorded none)")
    for e in entries:
        if e.made_with is not None or not e.path.endswith(".json"):
            print(f"{e.path:{width}}  {'':10} {'':5}  {'':11} (written with {e.made_with or '?'})")
            continue
        clean = {True: "yes", False: "NO", None: "?"}[e.clean]
        commits = ",".join(e.commits) or "?"
        print(f"{e.path:{width}}  {commits:10} {clean:5}  {_date(e):11} {e.command or '?'}"
              + (f"  [kept: {e.kept}]" if e.kept else ""))
    if args.check:
        bad = problems(entries)
        if bad:
            raise UserError(f"{len(bad)} results file(s) cannot be traced to one clean commit: " + "; ".join(bad))
        stale = stale_commands(entries)
        if stale:
            raise UserError(f"{len(stale)} recorded command(s) no longer run as written: " + "; ".join(stale))
        print(f"all {len(entries)} files traced to a command and a clean commit, or kept with a reason; "
              "their commands parse")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("results", help="the command and commit behind each results file",
                              description="List the files of a results folder with the command, commit and date "
                                          "that made each one.")
    p.add_argument("--dir", default=str(RESULTS), help=f"the results folder (default {RESULTS})")
    p.add_argument("--check", action="store_true",
                   help="fail (exit 2) if a file has no command or commit, or was made by modified code, "
                        "unless it says why it is kept, or if a command it records no longer parses")
    p.add_argument("--runs", nargs="?", const="", default=None, metavar="DIR",
                   help="instead: how far the training runs under DIR have got (default $NPLM_EDU_RUNS or "
                        "~/.cache/nplm_edu/runs): epochs, best validation perplexity, early-stopping count")
    p.set_defaults(func=_handler)
