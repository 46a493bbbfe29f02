"""One exception for bad input, so the command line can say what went wrong in one line.

Everything a user can get wrong (a missing corpus, a bad path, a hyperparameter out of range)
raises :class:`UserError`; ``python -m nplm_edu`` prints ``error: <message>`` on stderr and exits
with status 2, never a traceback.
"""


class UserError(Exception):
    """Bad input from the user: printed as one line by the command line, exit status 2."""
