"""One exception for bad input, so the command line can say what went wrong in one line.

Everything a user can get wrong (a missing corpus, a bad path, a hyperparameter out of range)
raises :class:`UserError`; ``python -m nplm_edu`` prints ``error: <message>`` on stderr and exits
with status 2, never a traceback.

The library speaks of settings, the command line of its options: an error about one setting
carries its name in ``UserError.setting`` (a field of a configuration dataclass, e.g. ``"lr"`` or
``"min_count"``) and its message begins with that name (``lr must be ...``); :func:`one_line` says
the option a user types instead (``--lr must be ...``, :func:`flag`).
"""

import re
import typing

import math
import numbers
from dataclasses import fields


class UserError(Exception):
    """Bad input from the user: printed as one line by the command line, exit status 2, and as one
    line in a notebook too (IPython shows what ``_render_traceback_`` returns instead of a traceback).

    ``setting``: the name of the setting the message is about, which the message begins with (None
    when it is about no one setting).

    >>> e = UserError("min_count must be at least 1, got 0", setting="min_count")
    >>> str(e), one_line(e)[0]
    ('min_count must be at least 1, got 0', 'error: --min-count must be at least 1, got 0')
    """

    def __init__(self, message: str = "", setting: str | None = None):
        super().__init__(message)
        self.setting = setting

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


OUT_OF_MEMORY = "out of memory: try a smaller --batch, model or corpus"


def one_line(exc: BaseException) -> tuple[str, int] | None:
    """What the command line prints for an error a user can act on, and its exit status: bad input,
    a file (missing, unwritable, a folder where a file should be ...), memory, Ctrl-C; None for a
    bug, which keeps its traceback."""
    if isinstance(exc, UserError):
        return f"error: {with_flag(exc)}", 2
    if isinstance(exc, OSError):
        return f"error: {exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}", 2
    if isinstance(exc, MemoryError):
        return f"error: {OUT_OF_MEMORY}", 2
    if isinstance(exc, KeyboardInterrupt):
        return (f"interrupted ({exc})" if str(exc) else "interrupted"), 130  # with what the run keeps, if known
    return None


def flag(setting: str) -> str:
    """The command-line option of a setting: ``min_count`` -> ``--min-count``."""
    return "--" + setting.replace("_", "-")


def with_flag(exc: UserError) -> str:
    """The message, its setting (where it begins with one) and every setting it names in backquotes
    (the advice: "`force` starts it again") named as the option a user types.

    >>> with_flag(UserError("a.json holds other runs: `force` starts it again, or another `out`"))
    'a.json holds other runs: --force starts it again, or another --out'
    """
    message, setting = str(exc), exc.setting
    if setting and re.match(rf"{re.escape(setting)}\b", message):
        message = flag(setting) + message[len(setting):]
    return re.sub(r"`([a-z_]+)`", lambda m: flag(m.group(1)), message)


def check_seed(seed, what: str = "seed") -> None:
    """A seed for ``numpy.random.default_rng``: a whole number >= 0, else one clear :class:`UserError`
    (numpy's own error would come as a traceback from deep inside)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise UserError(f"{what} must be a whole number >= 0, got {seed!r}", setting=what)


def a_model(kind: str) -> str:
    """A model's kind with its article, as a sentence says it: 'nplm' -> 'an NPLM', 'rnn' -> 'an RNN',
    'lstm' -> 'an LSTM', 'nplm-tree-softmax' -> 'an NPLM-tree-softmax', 'energy' -> 'an energy'."""
    names = {"nplm": "NPLM", "rnn": "RNN", "lstm": "LSTM"}  # said letter by letter: N is "en", R "ar", L "el"
    head, _, rest = kind.partition("-")
    if head in names:
        return f"an {names[head]}{'-' + rest if rest else ''}"
    return f"{'an' if kind[:1].lower() in 'aeio' else 'a'} {kind}"


_CHECKED = {int: numbers.Integral, float: numbers.Real, str: str, bool: bool, dict: dict, list: list,
            type(None): type(None)}  # the declared types checked, and what a value of each may be


def mistyped_field(cls, values: dict):
    """(name, value, declared type) of the first field in ``values`` that is not of the type the
    dataclass ``cls`` declares for it (a string for a number, 1 for True, a NaN or an infinity), or
    None. Fields declared with other types are not checked.

    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class C:
    ...     n: int = 1
    ...     x: float = 0.5
    ...     on: bool | None = True
    >>> mistyped_field(C, {"n": "2"}), mistyped_field(C, {"x": float("nan")}), mistyped_field(C, {"on": 1})
    (('n', '2', 'int'), ('x', nan, 'float'), ('on', 1, 'bool | None'))
    >>> mistyped_field(C, {"n": 2, "x": 1, "on": None}) is None  # an int is a float too
    True
    """
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        kinds = typing.get_args(hints[f.name]) or (hints[f.name],)  # int | None -> (int, NoneType)
        if f.name not in values or not all(k in _CHECKED for k in kinds):
            continue
        v = values[f.name]
        ok = (isinstance(v, tuple(_CHECKED[k] for k in kinds)) and (not isinstance(v, bool) or bool in kinds)
              and (not isinstance(v, numbers.Real) or isinstance(v, numbers.Integral) or math.isfinite(v)))
        if not ok:
            return f.name, v, " | ".join("None" if k is type(None) else k.__name__ for k in kinds)
    return None


def check_field_types(config) -> None:
    """One clear :class:`UserError` naming the setting when a field of the dataclass ``config`` is not
    of its declared type (:func:`mistyped_field`): found before a run, not when its checkpoint is read."""
    bad = mistyped_field(type(config), {f.name: getattr(config, f.name) for f in fields(config)})
    if bad is not None:
        raise UserError(f"{bad[0]} must be {bad[2]}, got {bad[1]!r}", setting=bad[0])
