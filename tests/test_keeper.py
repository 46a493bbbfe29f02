"""The checkpoint keeper on its own: what it saves at an epoch's end and inside one, what it falls back
on after a divergence, what its one line says, and what resume_state refuses."""

import json
from dataclasses import asdict

import numpy as np
import pytest

from nplm_edu.errors import UserError
from nplm_edu.training.checkpoint import TrainingDiverged, TrainState, epoch_copy, load_checkpoint
from nplm_edu.training.keeper import CheckpointKeeper, resume_state

PARAMS = {"C": np.ones((3, 2), np.float32)}
META = {"kind": "nplm", "model": {}, "train": {}}


def keeper(tmp_path, state=None, resumed=False):
    state = state or TrainState(rng_state=np.random.default_rng(0).bit_generator.state)
    return CheckpointKeeper(tmp_path, state, {"epochs": state.history}, resumed=resumed)


def save(k, epoch, batch, step, value=1.0):
    k.state.epoch, k.state.batch_in_epoch, k.state.step = epoch, batch, step
    k.save({"C": np.full((3, 2), value, np.float32)}, dict(META, state=asdict(k.state)), None, {})


def test_nothing_written_without_a_folder(tmp_path):
    k = CheckpointKeeper(None, TrainState(), {"epochs": []})
    save(k, 1, 0, 5)
    k.write_history()
    assert k.kept() is None and k.fall_back() is None and list(tmp_path.iterdir()) == []
    assert str(k.stopped(saved_now=True)) == ""


def test_a_validated_checkpoint_waits_aside_while_one_inside_the_next_epoch_holds_the_file(tmp_path):
    k = keeper(tmp_path)
    assert k.kept() == "no checkpoint was written yet"
    save(k, 1, 0, 10, value=1.0)  # the end of epoch 1: validated
    assert not epoch_copy(k.path).exists()
    save(k, 1, 4, 14, value=2.0)  # inside epoch 2
    assert epoch_copy(k.path).exists() and k.kept().startswith("the checkpoint at update 14, in epoch 2 is kept")
    error = k.diverged("the training loss became nan")  # falls back on the end of epoch 1
    assert isinstance(error, TrainingDiverged) and "the last validated checkpoint, at the end of epoch 1" in str(error)
    assert not epoch_copy(k.path).exists() and load_checkpoint(k.path)[1]["C"][0, 0] == 1.0
    assert json.loads((tmp_path / "history.json").read_text()) == {"epochs": []}


def test_a_checkpoint_inside_the_first_epoch_is_removed_on_divergence(tmp_path):
    k = keeper(tmp_path)
    save(k, 0, 3, 3)
    assert k.path.exists()
    assert "no epoch was validated yet: the checkpoint saved inside it is removed" in str(k.diverged("x"))
    assert not k.path.exists()


def test_a_failed_write_names_the_file_and_what_is_kept(tmp_path, monkeypatch):
    import nplm_edu.training.keeper as keeper_mod

    k = keeper(tmp_path)
    save(k, 1, 0, 10)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(keeper_mod, "save_checkpoint", full_disk)
    with pytest.raises(UserError) as info:
        save(k, 1, 5, 15)
    assert str(info.value) == (f"cannot write {k.path}: No space left on device (the checkpoint at the end of "
                               f"epoch 1 is kept in {k.path}; resume continues from there)")
    assert not epoch_copy(k.path).exists()  # the copy made for the failed write is gone


def test_parameters_that_stopped_being_finite_at_an_epoch_end_drop_that_epoch(tmp_path):
    k = keeper(tmp_path)
    k.state.history.append({"epoch": 1, "valid_ppl": 9.0})
    with pytest.raises(TrainingDiverged, match="the parameters stopped being finite"):
        save(k, 1, 0, 10, value=np.nan)
    assert k.state.epoch == 0 and k.state.history == [] and not k.path.exists()


def test_ctrl_c_says_where_the_run_was_saved(tmp_path):
    k = keeper(tmp_path)
    save(k, 0, 2, 2)
    assert str(k.stopped(saved_now=True)) == f"saved in {k.path}; resume continues from there"
    assert (tmp_path / "history.json").exists()


def test_resume_state_refuses_other_settings(tmp_path):
    from nplm_edu.models.nplm import NPLMConfig
    from nplm_edu.numerics.fused import FusedNPLM
    from nplm_edu.training.backends import SerialBackend
    from nplm_edu.training.trainer import TrainConfig, train

    rng = np.random.default_rng(0)
    ids = rng.integers(0, 9, 300)
    windows = ((np.lib.stride_tricks.sliding_window_view(ids, 3)[:, :2], ids[2:]), None)
    cfg = TrainConfig(epochs=1, batch=50, lr=0.1)
    model = FusedNPLM(NPLMConfig(V=9, n=3, m=2, h=3))
    train(model, windows, cfg, out_dir=tmp_path, quiet=True)
    other = TrainConfig(epochs=1, batch=40, lr=0.1)
    with pytest.raises(UserError, match="cannot resume with batch=40: the checkpoint used 50"):
        resume_state(tmp_path / "checkpoint.npz", model, other, ("x",), SerialBackend(model, other), 10)
    with pytest.raises(UserError, match="was trained on other data"):
        resume_state(tmp_path / "checkpoint.npz", model, cfg, ("x",), SerialBackend(model, cfg), 10)
