"""Command-line options made from configuration dataclasses: one source of truth for every default.

:func:`add_options` gives a parser one ``--field-name`` per field of a dataclass, typed from the
field's annotation and defaulting to the value in a given instance (so a subcommand can offer its
own defaults, e.g. ``reproduce table1``'s settings); :func:`from_options` builds the dataclass back
from the parsed namespace. The library never sees argparse.
"""

from __future__ import annotations

import argparse
import dataclasses
import re

from ..errors import flag
from ..models.nplm import DTYPES
from ..training.config import OPTIMIZERS

# fields that take one of a fixed set of values, whichever dataclass they belong to: argparse refuses others
CHOICES = {"optimizer": OPTIMIZERS, "dtype": DTYPES}


def _kind(annotation: str) -> str:
    a = str(annotation).replace(" ", "")
    for k in ("bool", "int", "float", "str"):
        if a in (k, f"{k}|None", f"None|{k}"):
            return k
    if a in ("float|int|None", "int|float|None"):
        return "number"
    raise TypeError(f"no command-line type for {annotation!r}")


def _number(text: str):
    """'800000' -> 800000 (a count), '0.8' -> 0.8 (a fraction)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


def add_options(parser, defaults, skip=(), help: dict | None = None, prefix: str = "") -> None:
    """One option per field of the dataclass instance ``defaults`` (except ``skip``).

    Its help is ``help[field]`` followed by "(default <value>)", unless the text already says what the
    default is (it contains "(default") or the default is None or "" (the text must then say what
    leaving the option out means: "(default: all)", ...)."""
    help = help or {}
    for f in dataclasses.fields(defaults):
        if f.name in skip:
            continue
        kind, value = _kind(f.type), getattr(defaults, f.name)
        option = flag(prefix + f.name)  # the one mapping from a setting to its option (errors.flag)
        text = help.get(f.name, "")
        shown = text if "(default" in text or value is None or value == "" else f"{text} (default {value})".strip()
        if kind == "bool":
            parser.add_argument(option, dest=f.name, action=argparse.BooleanOptionalAction, default=value, help=shown)
        else:
            typ = {"int": int, "float": float, "str": str, "number": _number}[kind]
            parser.add_argument(option, dest=f.name, type=typ, default=value, help=shown, choices=CHOICES.get(f.name))


def description(doc: str, paragraphs: int | None = None) -> str:
    """A module docstring (its first ``paragraphs``) as a subcommand's --help description: no reST
    markup (double backquotes, roles such as ``:func:`~a.b``` -> b, "::"), and without the leading
    "python -m nplm_edu ...:" in backquotes that repeats the usage line.

    >>> description("``python -m nplm_edu x``: fits :func:`~a.b.fit` and writes ``out.json``.")
    'Fits fit and writes out.json.'
    """
    text = "\n\n".join(doc.strip().split("\n\n")[:paragraphs])
    text = re.sub(r"^``python -m nplm_edu[^`]*``:\s*", "", text)
    text = re.sub(r":[a-z]+:`~[\w.]*?(\w+)`", r"\1", text)  # :func:`~a.b.c` -> c
    text = re.sub(r":[a-z]+:`([^`<]*?)\s*(<[^`]*>)?`", r"\1", text)  # :mod:`a.b` -> a.b, :ref:`text <x>` -> text
    text = text.replace("``", "").replace("::", ":")
    return text[:1].upper() + text[1:]


def from_options(cls, args, **override):
    """An instance of ``cls`` from the fields of a parsed namespace (fields absent from it keep their defaults)."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    values.update(override)
    return cls(**values)
