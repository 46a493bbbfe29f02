"""``python -m nplm_edu results``: which command, at which commit, made each file of ``data/results/``."""

from __future__ import annotations

from ..errors import UserError
from ..experiments.common import RESULTS
from ..experiments.inventory import inventory, problems


def _handler(args) -> int:
    entries = inventory(args.dir)
    width = max(len(e.path) for e in entries) if entries else 10
    print(f"{'file':{width}}  {'commit':10} {'clean':5}  {'date':10}  command")
    for e in entries:
        if e.made_with is not None or not e.path.endswith(".json"):
            print(f"{e.path:{width}}  {'':10} {'':5}  {'':10}  (written with {e.made_with or '?'})")
            continue
        clean = {True: "yes", False: "NO", None: "?"}[e.clean]
        commits = ",".join(e.commits) or "?"
        print(f"{e.path:{width}}  {commits:10} {clean:5}  {(e.date or '?')[:10]:10}  {e.command or '?'}"
              + (f"  [kept: {e.kept}]" if e.kept else ""))
    if args.check:
        bad = problems(entries)
        if bad:
            raise UserError(f"{len(bad)} results file(s) cannot be traced to one clean commit: " + "; ".join(bad))
        print(f"all {len(entries)} files traced to a command and a clean commit, or kept with a reason")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("results", help="the command and commit behind each results file",
                              description="List the files of a results folder with the command, commit and date "
                                          "that made each one.")
    p.add_argument("--dir", default=str(RESULTS), help=f"the results folder (default {RESULTS})")
    p.add_argument("--check", action="store_true",
                   help="fail (exit 2) if a file has no command or commit, or was made by modified code, "
                        "unless it says why it is kept")
    p.set_defaults(func=_handler)
