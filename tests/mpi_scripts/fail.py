"""Run under mpiexec -n M: rank 1 raises in the middle of output-block training.

Usage: fail.py {abort|plain}. "abort": the training loop runs inside abort_on_error (what the
command line does); "plain": no handler, for ``python -m mpi4py fail.py plain``, whose runner
aborts the job on an unhandled exception. Either way the job must end (no rank left waiting in an
Allreduce) with rank 1's error on stderr.
"""
import sys
from contextlib import nullcontext

import numpy as np

from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.training.parallel.mpi_job import abort_on_error, world
from nplm_edu.training.parallel.output_block import OutputBlockSGD

MESSAGE = "rank 1 failed on purpose at update 3"


def main(mode):
    comm = world()
    guard = abort_on_error(comm) if mode == "abort" else nullcontext()
    with guard:
        cfg = NPLMConfig(V=23, n=3, m=4, h=5, dtype="float64", seed=0)
        tr = OutputBlockSGD(NPLM(cfg).params, lr=0.1, batch_size=2, comm=comm)
        rng = np.random.default_rng(0)
        for t in range(1000):
            if t == 3 and tr.rank == 1:
                raise RuntimeError(MESSAGE)
            tr.step(rng.integers(0, 23, size=(2, 2)), rng.integers(0, 23, size=2), 0.1)
    print("finished without the error: the test should not get here", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
