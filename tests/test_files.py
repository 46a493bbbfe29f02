"""data/files.py: the one atomic write of the package."""

import os
import stat

import pytest

from nplm_edu.data.files import atomic_write


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_file_gets_the_permissions_of_any_new_file(tmp_path):
    # the temporary file behind the write is private (0o600); the file it becomes must not be
    plain = tmp_path / "plain.txt"
    plain.write_text("x")  # what open() gives a new file under this process's umask
    made = atomic_write(tmp_path / "made.json", lambda f: f.write("{}"), binary=False)
    assert made.read_text() == "{}" and mode(made) == mode(plain)


@pytest.mark.parametrize("umask, want", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_a_new_file_follows_the_umask_of_the_moment(tmp_path, umask, want):
    old = os.umask(umask)
    try:
        made = atomic_write(tmp_path / "m.json", lambda f: f.write("{}"), binary=False)
    finally:
        os.umask(old)
    assert mode(made) == want  # 0o666 less the umask, as open() would give


def test_a_replaced_file_keeps_its_permissions(tmp_path):
    path = tmp_path / "kept.json"
    path.write_text("old")
    os.chmod(path, 0o640)
    atomic_write(path, lambda f: f.write("new"), binary=False)
    assert path.read_text() == "new" and mode(path) == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "c.npz"
    path.write_bytes(b"good")

    def fail(f):
        f.write(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, fail)
    assert path.read_bytes() == b"good" and sorted(p.name for p in tmp_path.iterdir()) == ["c.npz"]
