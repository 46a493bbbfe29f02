"""One exception for bad input, so the command line can say what went wrong in one line.

Everything a user can get wrong (a missing corpus, a bad path, a hyperparameter out of range)
raises :class:`UserError`; ``python -m nplm_edu`` prints ``error: <message>`` on stderr and exits
with status 2, never a traceback.
"""


class UserError(Exception):
    """Bad input from the user: printed as one line by the command line, exit status 2."""


def check_seed(seed, what: str = "seed") -> None:
    """A seed for ``numpy.random.default_rng``: a whole number >= 0, else one clear :class:`UserError`
    (numpy's own error would come as a traceback from deep inside)."""
    import numbers

    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise UserError(f"{what} must be a whole number >= 0, got {seed!r}")
