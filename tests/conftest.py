"""What `make test-unit` sets, set here too, so that plain `pytest` runs the same tests the same way
(no test skipped or changed by a variable only the Makefile sets):

- one BLAS thread: float32 sums can differ in their last bit with the number of threads, and the
  pinned training histories (test_nplm.py) were recorded with one. Setting OPENBLAS_NUM_THREADS here
  is too late for numpy, which a plugin may have imported already, so the thread count is also set
  through OpenBLAS's own function; the variables reach the subprocesses the tests start;
- NLTK_DATA, when it is not set, is ../shared/nltk_data if that folder exists (the project's machines)."""

import ctypes
import glob
import os
from pathlib import Path

import numpy as np
import pytest

# not a module of doctests: with --doctest-modules it would be imported as a second module named
# `conftest`, beside tests/browser/conftest.py, and fail the collection
collect_ignore = ["conftest.py"]

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

_SHARED_NLTK_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "nltk_data"
if "NLTK_DATA" not in os.environ and _SHARED_NLTK_DATA.is_dir():
    os.environ["NLTK_DATA"] = str(_SHARED_NLTK_DATA)


def _one_blas_thread() -> None:
    """Set numpy's OpenBLAS (inside its wheel, numpy.libs) to one thread; nothing if it is not there."""
    libdir = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libdir, "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads"):
            setter = getattr(lib, name, None)
            if setter is not None:
                setter.argtypes = [ctypes.c_int]
                setter(1)
                break


_one_blas_thread()


@pytest.fixture(scope="session")
def _brown_token_list():
    from nplm_edu.data.sources import brown_tokens

    return brown_tokens()


@pytest.fixture
def brown_read_once(monkeypatch, _brown_token_list):
    """The package's Brown reader (nplm_edu.data.sources.brown_tokens, about 5 s of NLTK parsing) made to
    return a copy of the tokens it read once for the whole session, wherever the package calls it."""
    from nplm_edu.data import corpus
    from nplm_edu.experiments import central_claim_brown

    def brown_tokens() -> list[str]:
        return list(_brown_token_list)

    for module in (corpus, central_claim_brown):
        monkeypatch.setattr(module, "brown_tokens", brown_tokens)
    return brown_tokens
