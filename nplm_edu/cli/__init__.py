"""``python -m nplm_edu``: one command line for corpora, n-gram baselines, training and the results.

Each module that offers a subcommand defines ``add_cli(subparsers)``; this file only gathers them
and turns a :class:`~nplm_edu.errors.UserError` (or a missing file, or Ctrl-C) into one line on
stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys

from ..errors import UserError, one_line

# modules with a subcommand, in the order --help lists them
COMMANDS = ("corpus", "ngram", "train", "mix", "sample", "reproduce", "results")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m nplm_edu",
        description="Bengio et al. (2003), A Neural Probabilistic Language Model, reproduced in numpy.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"nplm_edu.cli.{name}").add_cli(sub)
    return parser


def _mpi_variable(names: tuple[str, ...], default: int) -> int:
    """The first of mpiexec's variables ``names`` set in the environment (MPICH's, then Open MPI's)."""
    for var in names:
        v = os.environ.get(var, "")
        if v.isdigit():
            return int(v)
    return default


def mpi_rank() -> int:
    """This process's rank when started by mpiexec, else 0."""
    return _mpi_variable(("PMI_RANK", "OMPI_COMM_WORLD_RANK"), 0)


def mpi_size() -> int:
    """How many processes mpiexec started for this command (1 when it did not)."""
    return _mpi_variable(("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"), 1)


def _parse(parser: argparse.ArgumentParser, argv, speak: bool) -> argparse.Namespace:
    """The parsed command line; argparse prints its own usage, errors and --help, which under mpiexec
    only rank 0 should: the other ranks parse with stdout and stderr muted (and exit as rank 0 does)."""
    if not (sys.argv[1:] if argv is None else argv):  # no command at all: the list of commands, not a usage error
        if speak:
            parser.print_help(sys.stderr)
            print(f"\n{parser.prog}: name a COMMAND; {parser.prog} COMMAND --help gives its options", file=sys.stderr)
        raise SystemExit(2)
    if speak:
        return parser.parse_args(argv)
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    speak = mpi_rank() == 0  # under mpiexec every rank meets the same bad input: rank 0 says it, once
    try:
        args = _parse(build_parser(), argv, speak)
        if mpi_size() > 1 and not (args.command == "train" and args.parallel == "output-block"):
            raise UserError(f"mpiexec started {mpi_size()} copies of this command, each of which would do all "
                            "of its work (into the same files): only train --parallel output-block shares one "
                            "run between processes; run anything else without mpiexec")
        return int(args.func(args) or 0)
    except (UserError, OSError, MemoryError, KeyboardInterrupt) as e:
        message, status = one_line(e)
        if speak:
            print(message, file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
