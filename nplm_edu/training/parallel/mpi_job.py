"""How an MPI job of the output-block trainer starts and how it ends on an error, leaving nothing behind.

MPICH keeps one shared-memory file per node, ``/dev/shm/mpich_shm_<job>_<node>``, that it deletes in
``MPI_Finalize`` only: a job that ends with ``MPI_Abort`` (or a rank killed) leaves it in /dev/shm.
Every rank has it mapped once ``MPI_Init`` has returned everywhere, and MPICH never opens it by name
again, so :func:`world` deletes the name at once (after a barrier): the memory lives on for the job
and the kernel frees it when the last rank exits, however the job ends.

:func:`abort_on_error` decides how an error ends the job. When every rank fails at the same point
(bad input checked everywhere, a divergence seen in an allreduced loss, Ctrl-C agreed on by the
trainer, the same allocation too large for every rank), the ranks agree on it over a separate
communicator, and all leave normally (MPI finalized at exit) with rank 0's status, rank 0 saying the
one line. Only when a rank fails alone, with the others waiting in a collective for it, does it
``MPI_Abort`` the job, which would otherwise hang.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ...errors import one_line

AGREE_SECONDS = 5.0  # how long a failing rank waits for the others to fail at the same point too


def world():
    """MPI.COMM_WORLD if this process was started by mpiexec with more than one rank, else None.
    MPICH's shared-memory file is unlinked at once (see the module's docstring)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_size() == 1:
        return None
    comm.Barrier()  # every rank of the node has mapped the file
    unlink_shared_memory_files()
    return comm


SELF_MAPS = "/proc/self/maps"  # Linux: the files this process maps, one per line


def unlink_shared_memory_files(maps: str | None = None) -> list[str]:
    """Delete the names of the MPICH shared-memory files this process maps (its own job's, so no
    other job's; ``maps``: the list of mappings to read, this process's by default); returns them.
    The mappings stay valid. Another rank of the node may have deleted a name first, which is no error."""
    try:
        lines = Path(maps or SELF_MAPS).read_text().splitlines()
    except OSError:
        return []
    paths = sorted({ln.split()[-1] for ln in lines if ln.split()[-1].startswith("/dev/shm/mpich_shm_")})
    for p in paths:
        Path(p).unlink(missing_ok=True)
    return paths


def exit_status(exc: BaseException) -> int:
    """The command line's exit status for an error (:func:`~nplm_edu.errors.one_line`'s; 1 for a bug)."""
    if isinstance(exc, SystemExit):
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
    said = one_line(exc)
    return said[1] if said else 1


def agree(comm, value: int, seconds: float = AGREE_SECONDS) -> int | None:
    """Rank 0's ``value`` if every rank of ``comm`` calls this within ``seconds``, else None.
    Non-blocking underneath, so a rank whose peers never come can give up."""
    from mpi4py import MPI

    send = np.array([value if comm.Get_rank() == 0 else 0], dtype=np.int64)
    recv = np.zeros(1, dtype=np.int64)
    request = comm.Iallreduce(send, recv, op=MPI.SUM)
    deadline = time.monotonic() + seconds
    while not request.Test():
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)
    return int(recv[0])


@contextmanager
def abort_on_error(comm):
    """Run the body on every rank of ``comm`` (None: serially, a no-op); if a rank raises, end the job.

    If every rank raises within ``AGREE_SECONDS`` (they met the same error), rank 0 raises its
    error as it is (the command line says it in one line) and the other ranks leave quietly with the
    same status: no Abort, nothing left behind. If one rank fails alone, it says why on stderr (bad
    input, Ctrl-C and memory in one line, anything else with its traceback) and calls ``MPI_Abort``."""
    if comm is None:
        yield
        return
    side = comm.Dup()  # the agreement must not meet a collective another rank is waiting in
    try:
        yield
    except BaseException as exc:  # noqa: BLE001 -- any error on one rank must end every rank
        code = exit_status(exc)
        if code == 0:
            side.Free()
            raise
        status = agree(side, code)
        if status is None:
            _abort_alone(comm, exc, code)
        side.Free()
        if comm.Get_rank() == 0:
            raise
        raise SystemExit(status) from None
    side.Free()


def _abort_alone(comm, exc: BaseException, code: int) -> None:
    """Say once on stderr why this rank failed alone, and MPI_Abort the job."""
    rank, said = comm.Get_rank(), one_line(exc)  # bad input, a file (a full disk on rank 0), memory, Ctrl-C
    if said is None:
        msg = f"[rank {rank}] {type(exc).__name__}: {exc}\n" + traceback.format_exc()
    elif isinstance(exc, KeyboardInterrupt):
        msg = f"{said[0]}\n" if str(exc) else "interrupted (the last checkpoint is the end of the last finished epoch)\n"
    else:
        msg = f"{said[0]} (rank {rank})\n"
    sys.stderr.flush()
    os.write(2, msg.encode(errors="replace"))  # one write: mpiexec forwards it before the job is torn down
    time.sleep(0.5)
    comm.Abort(code)
    os._exit(code)  # Abort may return on a rank the job is already tearing down: never carry on
