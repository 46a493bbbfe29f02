"""Files written so that a crash never leaves half of one: the one atomic write of the package.

The content goes to a temporary file in the same folder, is flushed to disk (fsync), and only
then renamed over the target (a rename within a folder is atomic on POSIX): a reader sees the old
file or the new one, never a torn one. Checkpoints, results files and caches all use it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _new_file_mode() -> int:
    """The permissions ``open()`` gives a new file here: 0o666 less the process's umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


NEW_FILE_MODE = _new_file_mode()  # read once, at import: changing the umask is process-wide


def atomic_write(path, write, binary: bool = True) -> Path:
    """Call ``write(f)`` on a temporary file beside ``path``, fsync it, rename it to ``path``. The
    file gets the permissions of the one it replaces, or those of any new file (the temporary file
    is private to its owner until then).

    >>> import json, tempfile as t
    >>> p = atomic_write(Path(t.mkdtemp()) / "x.json", lambda f: f.write(json.dumps([1])), binary=False)
    >>> p.read_text()
    '[1]'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else NEW_FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
