"""Every model the package trains resumes bit for bit: a run interrupted at a random update and
resumed ends with the final parameters, best parameters and history of a run never interrupted,
byte for byte. Every model through the trainer's own interruption (as Ctrl-C); the NPLM, one cheap
output layer of each kind's family, a recurrent model and the Transformer through a real kill -9 of a subprocess
that checkpoints after every update (so an uninterrupted run also cannot depend on when its
checkpoints fall)."""

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import resume_models
from nplm_edu.training.checkpoint import load_checkpoint

SCRIPT = Path(resume_models.__file__)
ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
           PYTHONPATH=str(SCRIPT.parents[1]))
TIMES = ("seconds", "cpu_seconds", "train_seconds", "train_cpu_seconds", "valid_seconds", "updates_per_s", "timing_partial")


def same_run(history: dict) -> str:
    """The history as JSON, without the wall-clock times (which no two runs share)."""
    epochs = [{k: v for k, v in e.items() if k not in TIMES} for e in history["epochs"]]
    return json.dumps(dict(history, epochs=epochs), sort_keys=True)


def random_update(name: str, total: int) -> int:
    """An update strictly inside the run, drawn from the model's name (the same in every session)."""
    return int(np.random.default_rng(zlib.crc32(name.encode())).integers(1, total))


def assert_same_arrays(a: dict, b: dict, name: str) -> None:
    assert set(a) == set(b), name
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(), (name, k)


@pytest.mark.parametrize("name", resume_models.MODELS)
def test_interrupted_at_a_random_update_and_resumed_is_the_same_run(name, tmp_path):
    whole = resume_models.run(name, tmp_path / "whole")
    at = random_update(name, whole["history"]["updates"])
    with pytest.raises(KeyboardInterrupt, match="resume continues from there"):
        resume_models.run(name, tmp_path / "cut", stop_at=at)
    resumed = resume_models.run(name, tmp_path / "cut", resume=True)
    assert same_run(resumed["history"]) == same_run(whole["history"]), (name, at)
    assert_same_arrays(resumed["params"], whole["params"], name)
    for part in (1, 2):  # the checkpoints too: the last parameters and the best ones
        assert_same_arrays(load_checkpoint(tmp_path / "cut" / "checkpoint.npz")[part],
                           load_checkpoint(tmp_path / "whole" / "checkpoint.npz")[part], name)


def script(name, out, *args):
    return subprocess.run([sys.executable, str(SCRIPT), name, str(out), *map(str, args)], env=ENV,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", ["nplm-sgd", "class", "nce", "lstm", "transformer"])
def test_kill_9_at_a_random_update_and_resumed_is_the_same_run(name, tmp_path):
    done = script(name, tmp_path / "whole")
    assert done.returncode == 0, done.stderr
    history = json.loads((tmp_path / "whole" / "history.json").read_text())
    at = random_update(name + " kill", history["updates"])
    killed = script(name, tmp_path / "cut", at)
    assert killed.returncode == -9, killed.stderr  # SIGKILL: nothing of Python ran after it
    resumed = script(name, tmp_path / "cut", "resume")
    assert resumed.returncode == 0, resumed.stderr
    got = json.loads((tmp_path / "cut" / "history.json").read_text())
    assert same_run(got) == same_run(history), (name, at)
    a, b = load_checkpoint(tmp_path / "cut" / "checkpoint.npz"), load_checkpoint(tmp_path / "whole" / "checkpoint.npz")
    for part in (1, 2, 3):  # parameters, best parameters, optimizer and stream state
        assert_same_arrays(a[part], b[part], name)
