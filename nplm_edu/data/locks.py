"""One writer at a time: the advisory lock every run folder and results file is written under.

A lock is a hidden file beside what it guards (``.table1.json.lock`` for ``table1.json``, ``.train.lock``
for a run folder ``train``) holding the pid and host of the process that writes, locked with
``flock`` while it writes. A second writer is refused in one line naming the first (or, for a short
merge into a results file, waits a few seconds for it); the kernel drops the ``flock`` of a process
that dies, even by kill -9, so the next writer takes its place and says so.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from ..errors import UserError


def lock_path(path) -> Path:
    """Where the lock of ``path`` lives: a hidden file beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


def _holder(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        doc = json.loads(os.read(fd, 4096).decode("utf-8") or "{}")
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _describe(holder: dict) -> str:
    if not holder:
        return "another process"
    return f"process {holder.get('pid', '?')} on {holder.get('host', '?')}, since {holder.get('since', '?')} UTC"


def _try_lock(lock: Path) -> tuple[int | None, dict]:
    """(an open, locked descriptor of ``lock``, the previous holder's record) or (None, the holder now)."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            return None, holder
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:  # released (removed) by its holder between our open and our lock
            same = False
        if same:
            return fd, _holder(fd)
        os.close(fd)  # a file its holder removed on release: lock the new one


@contextmanager
def one_writer(path, what: str = "", wait: float = 0.0, quiet: bool = False):
    """Inside, this process is the only writer of ``path`` (a file or a folder). Another writer: refused
    with one :class:`UserError` naming it (after waiting up to ``wait`` seconds for it to finish). A lock
    left by a process that is gone is taken over, with one line saying so (unless ``quiet``)."""
    path = Path(path)
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait
    while True:
        fd, holder = _try_lock(lock)
        if fd is not None:
            break
        if time.monotonic() >= deadline:
            raise UserError(f"{path} is being written{what} by {_describe(holder)}: one writer at a time; wait "
                            f"for it to finish, or choose another path")
        time.sleep(0.05)
    try:
        if holder.get("pid") and not quiet:
            print(f"note: took over the lock of {path} left by {_describe(holder)}, which is no longer running",
                  flush=True)
        record = {"pid": os.getpid(), "host": socket.gethostname(),
                  "since": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode("utf-8"), 0)
        yield path
    finally:
        try:
            os.unlink(lock)  # removed while still locked: a waiting writer then locks a new file
        except OSError:
            pass
        os.close(fd)
