"""data/locks.py: one writer at a time, a second refused naming the first, a dead holder's lock taken over."""

import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from nplm_edu.data.locks import lock_path, one_writer
from nplm_edu.errors import UserError


def test_a_second_writer_is_refused_naming_the_first(tmp_path):
    target = tmp_path / "run"
    with one_writer(target):
        holder = json.loads(lock_path(target).read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(UserError, match=f"being written by process {os.getpid()} on {socket.gethostname()}"):
            with one_writer(target):
                pass
    assert not lock_path(target).exists()  # released: the lock file is gone
    with one_writer(target):  # and the next writer gets it at once
        pass


def test_a_waiting_writer_gets_the_lock_when_the_first_is_done(tmp_path):
    target = tmp_path / "r.json"
    entered, done = threading.Event(), threading.Event()

    def first():
        with one_writer(target):
            entered.set()
            time.sleep(0.3)
            done.set()  # the first writer's last step before it releases the lock

    t = threading.Thread(target=first)
    t.start()
    entered.wait()
    with one_writer(target, wait=10):
        # entered only once the first was done (not "its thread has ended": under load a thread may
        # still be finishing after it released the lock, and that failed the test now and then)
        assert done.is_set()
    t.join()


def test_a_lock_left_by_a_killed_process_is_taken_over_with_a_line(tmp_path, capsys):
    target = tmp_path / "run"
    code = ("import sys, time; from nplm_edu.data.locks import one_writer\n"
            f"with one_writer({str(target)!r}):\n    print('in', flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "in"
    with pytest.raises(UserError, match=f"process {p.pid}"):  # alive: refused
        with one_writer(target):
            pass
    p.kill()
    p.wait()
    p.stdout.close()
    assert lock_path(target).exists()  # kill -9: no cleanup ran, the record stays
    with one_writer(target):
        pass
    assert f"took over the lock of {target} left by process {p.pid}" in capsys.readouterr().out
