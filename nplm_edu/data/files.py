"""Files written so that a crash never leaves half of one: the one atomic write of the package.

The content goes to a temporary file in the same folder, is flushed to disk (fsync), and only
then renamed over the target (a rename within a folder is atomic on POSIX): a reader sees the old
file or the new one, never a torn one. Checkpoints, results files and caches all use it.
"""

from __future__ import annotations

import errno
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path


def new_file_mode() -> int:
    """The permissions ``open()`` gives a new file now: 0o666 less the process's umask (which can
    only be read by setting it, and is set back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path, write, binary: bool = True) -> Path:
    """Call ``write(f)`` on a temporary file beside ``path``, fsync it, rename it to ``path``. The
    file gets the permissions of the one it replaces, or those of any new file (the temporary file
    is private to its owner until then).

    >>> import json, tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = atomic_write(Path(d) / "x.json", lambda f: f.write(json.dumps([1])), binary=False)
    ...     p.read_text()
    '[1]'
    """
    return atomic_writes({path: write}, binary)[0]


def atomic_writes(writes: dict, binary: bool = True) -> list[Path]:
    """:func:`atomic_write` for several files at once, ``{path: write}``: every file is written and
    flushed to disk, and every path checked, before the first rename, so an error or Ctrl-C while
    writing leaves every path as it was (and no temporary file): a reader finds all the new files
    or none (only a crash between two renames, microseconds apart, could leave a mix).

    >>> import tempfile
    >>> def fail(f): raise KeyboardInterrupt
    >>> with tempfile.TemporaryDirectory() as d:
    ...     try:
    ...         atomic_writes({Path(d, "a.txt"): lambda f: f.write("a"), Path(d, "b.txt"): fail}, binary=False)
    ...     except KeyboardInterrupt:
    ...         sorted(p.name for p in Path(d).iterdir())
    []
    """
    staged = []  # (temporary, path)
    try:
        for path, write in writes.items():
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
            staged.append((tmp, path))
            with os.fdopen(fd, "wb" if binary else "w") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            try:
                mode = path.stat().st_mode & 0o777  # the file it replaces (not its set-id bits)
            except FileNotFoundError:
                mode = new_file_mode()
            os.chmod(tmp, mode)
        for _, path in staged:  # the renames cannot fail half-way for want of a file's place
            if path.is_dir():
                raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise
    return [path for _, path in staged]


def remove_stale_temporaries(*paths, older_than: float | None = None) -> None:
    """Delete the temporary files ``<path>.<random>.tmp`` that :func:`atomic_write` leaves beside each
    of ``paths`` when its process is killed mid-write (a path's name may be a glob pattern). With
    ``older_than`` (seconds), only those unchanged for that long: where another process may be
    writing one now (a shared cache).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as t:
    ...     d = Path(t); _ = (d / "c.npz.k1ll3d.tmp").write_bytes(b"half"), (d / "notes.tmp").write_text("mine")
    ...     remove_stale_temporaries(d / "c.npz"); sorted(p.name for p in d.iterdir())
    ['notes.tmp']
    """
    now = time.time()
    for path in map(Path, paths):
        if not path.parent.is_dir():
            continue
        for tmp in path.parent.glob(path.name + ".*.tmp"):
            try:
                if older_than is None or now - tmp.stat().st_mtime > older_than:
                    tmp.unlink()
            except OSError:  # gone meanwhile, or not ours to remove
                pass


@contextmanager
def new_folder_removed_on_failure(folder):
    """Inside, an exception removes ``folder`` if it did not exist on entry and is still empty: a
    command that fails before writing anything leaves no folder of its making behind.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as t:
    ...     d = Path(t) / "out"
    ...     try:
    ...         with new_folder_removed_on_failure(d):
    ...             d.mkdir(); raise ValueError
    ...     except ValueError:
    ...         d.exists()
    False
    """
    new = not Path(folder).exists()
    try:
        yield
    except BaseException:
        if new:
            try:
                Path(folder).rmdir()  # only if still empty (under MPI another rank may have removed it)
            except OSError:
                pass
        raise
