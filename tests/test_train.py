"""The one trainer (serial backend): the update rule, determinism, resume == uninterrupted (also after
SIGINT, SIGTERM, SIGKILL), checkpoints and their guards, divergence, the CLI."""

import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from nplm_edu.cli import main
from nplm_edu.errors import UserError, one_line
from nplm_edu.models.nplm import NPLMConfig
from nplm_edu.numerics.fused import FusedNPLM
from nplm_edu.training.checkpoint import FORMAT, TrainState, load_checkpoint, model_from_checkpoint, save_checkpoint
from nplm_edu.training.optim import learning_rate, sgd_step
from nplm_edu.training.batches import epoch_order
from nplm_edu.training.trainer import TrainConfig, TrainingDiverged, train


def data(V=20, n=3, N=600, seed=0):
    """A small corpus with structure: w_t = (w_{t-1} + 1) mod V 80% of the time."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, V, N + 200)
    for i in range(2, len(ids)):
        if rng.random() < 0.8:
            ids[i] = (ids[i - 1] + 1) % V
    from numpy.lib.stride_tricks import sliding_window_view
    w = sliding_window_view(ids, n)
    return (w[:N, :-1], w[:N, -1]), (w[N:, :-1], w[N:, -1])


def new_model(V=20, n=3, direct=True, h=8):
    return FusedNPLM(NPLMConfig(V=V, n=n, m=4, h=h, direct=direct, seed=1))


def test_learning_rate_and_sgd_step_rule():
    assert learning_rate(1e-3, 1e-8, 0) == 1e-3  # t = 0: eps_0
    assert np.isclose(learning_rate(0.1, 0.5, 2), 0.05)  # 0.1 / (1 + 0.5 * 2)
    assert np.isclose(learning_rate(0.1, 0.5, 2, lr_decay=0.5, epoch=3), 0.05 * 0.125)  # times 0.5^3
    P = {k: np.array([1.0]) for k in ("C", "H", "U", "W", "b", "d")}
    G = {k: np.array([2.0]) for k in P}
    sgd_step(P, G, 0.1, 0.5, decayed=("C", "H", "U", "W"))
    for k in ("C", "H", "U", "W"):
        assert np.isclose(P[k][0], 1 - 0.1 * (2 + 0.5 * 1))  # 0.75: decayed
    for k in ("b", "d"):
        assert np.isclose(P[k][0], 1 - 0.1 * 2)  # 0.8: biases never decayed


def test_epoch_order_from_the_seed():
    a = epoch_order(50, np.random.default_rng(3))
    b = epoch_order(50, np.random.default_rng(3))
    assert np.array_equal(a, b) and sorted(a) == list(range(50))


def test_training_learns_and_keeps_best():
    model = new_model()
    start = model.perplexity(*data()[1])
    hist = train(model, data(), TrainConfig(epochs=6, batch=16, lr=0.5, patience=10), quiet=True)
    ppl = [e["valid_ppl"] for e in hist["epochs"]]
    assert len(ppl) == 6 and min(ppl) < 0.5 * start  # the rule is learnable: far below the start (~20)
    assert np.isclose(model.perplexity(*data()[1]), min(ppl))  # the best parameters are kept
    assert hist["epochs"][-1]["updates"] == 6 * 38  # ceil(600 / 16) updates per epoch


def test_batch_one_is_pure_sgd():
    model = new_model()
    hist = train(model, data(), TrainConfig(epochs=1, batch=1, lr=0.05, examples_per_epoch=300), quiet=True)
    assert hist["updates"] == 300 and np.isfinite(hist["epochs"][0]["valid_ppl"])


def run(tmp_path, name, epochs, resume=False, callback=None, minutes=10.0, direct=True):
    model = new_model(direct=direct)
    cfg = TrainConfig(epochs=epochs, batch=32, lr=0.3, weight_decay=1e-3, decay_rate=1e-3, seed=5,
                      patience=10, checkpoint_every_minutes=minutes)
    hist = train(model, data(), cfg, out_dir=tmp_path / name, resume=resume, callback=callback,
                 callback_every=1, quiet=True)
    return model, hist


@pytest.mark.parametrize("direct", [True, False])
def test_resume_after_an_epoch_equals_uninterrupted(tmp_path, direct):
    full, hist = run(tmp_path, "full", 3, direct=direct)
    run(tmp_path, "part", 1, direct=direct)
    resumed, hist2 = run(tmp_path, "part", 3, resume=True, direct=direct)
    for k in full.params:
        assert np.array_equal(full.params[k], resumed.params[k]), k
    assert [e["valid_ppl"] for e in hist["epochs"]] == [e["valid_ppl"] for e in hist2["epochs"]]
    saved = json.loads((tmp_path / "part" / "history.json").read_text())
    assert [e["epoch"] for e in saved["epochs"]] == [1, 2, 3]


def test_resume_after_interruption_mid_epoch(tmp_path):
    full, _ = run(tmp_path, "full", 2)

    def stop(step, model):
        if step == 25:  # epoch 2, batch 6 of 19
            raise KeyboardInterrupt

    cut = tmp_path / "cut" / "checkpoint.npz"
    with pytest.raises(KeyboardInterrupt, match=f"^saved in {re.escape(str(cut))}; resume continues from there$"):
        run(tmp_path, "cut", 2, callback=stop, minutes=0.0)  # minutes=0: checkpoint after every update
    state = load_checkpoint(tmp_path / "cut" / "checkpoint.npz")[0]["state"]
    assert (state["step"], state["epoch"], state["batch_in_epoch"]) == (25, 1, 6)
    resumed, _ = run(tmp_path, "cut", 2, resume=True)
    for k in full.params:
        assert np.array_equal(full.params[k], resumed.params[k]), k


def test_resume_refuses_other_hyperparameters(tmp_path):
    run(tmp_path, "a", 1)
    with pytest.raises(UserError, match="lr"):
        train(new_model(), data(), TrainConfig(epochs=2, batch=32, lr=0.1, seed=5, weight_decay=1e-3,
                                               decay_rate=1e-3), out_dir=tmp_path / "a", resume=True, quiet=True)


def test_checkpoint_files(tmp_path):
    model, _ = run(tmp_path, "a", 1)
    path = tmp_path / "a" / "checkpoint.npz"
    with np.load(path, allow_pickle=False) as z:  # plain arrays and one JSON string
        assert "param/C" in z.files and "meta" in z.files
    loaded = model_from_checkpoint(path)
    assert loaded.config == model.config
    # files that are not checkpoints, each named for what it is
    np.savez(tmp_path / "foreign.npz", x=np.arange(3))
    np.savez(tmp_path / "pickled.npz", meta=np.array([{"format": "x"}], dtype=object))
    np.save(tmp_path / "array.npy", np.arange(3))
    (tmp_path / "obj.pkl").write_bytes(pickle.dumps({"format": FORMAT}))
    (tmp_path / "cut.npz").write_bytes(path.read_bytes()[:-200])
    (tmp_path / "head.npz").write_bytes(path.read_bytes()[:200])
    (tmp_path / "text.npz").write_bytes(b"the run to resume")
    (tmp_path / "empty.npz").write_bytes(b"")
    (tmp_path / "folder.npz").mkdir()
    for name, says in [("foreign.npz", "no meta entry"), ("pickled.npz", "an archive holding pickled objects"),
                       ("array.npy", "a single numpy array"), ("obj.pkl", "a Python pickle, not loaded"),
                       ("cut.npz", "a damaged zip archive"), ("head.npz", "a damaged zip archive"),
                       ("text.npz", "not a zip archive"), ("empty.npz", "an empty file"),
                       ("folder.npz", "directory")]:
        with pytest.raises(UserError, match="not a readable") as e:
            load_checkpoint(tmp_path / name)
        assert says in str(e.value), (name, str(e.value))
    with pytest.raises(UserError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing.npz")
    assert not list((tmp_path / "a").glob("*.tmp"))  # atomic writes leave no temp files


def test_nan_stops_and_keeps_last_good_checkpoint(tmp_path):
    def poison(step, model):
        if step == 30:
            model.params["b"][0] = np.nan

    # minutes=0: a checkpoint is due right after every update, so save_checkpoint's guard fires after the
    # poisoning one; the run falls back on the last checkpoint validated at an epoch's end, not on the
    # checkpoint of update 29, which no validation ever saw
    with pytest.raises(TrainingDiverged, match=r"^the parameters stopped being finite at update 30 of epoch 2 \(the "
                                               r"last validated checkpoint, at the end of epoch 1, is kept in .*"
                                               r"checkpoint.npz\); try a smaller learning rate$"):
        run(tmp_path, "poisoned", 3, callback=poison, minutes=0.0)
    meta, params, _, _ = load_checkpoint(tmp_path / "poisoned" / "checkpoint.npz")
    assert (meta["state"]["epoch"], meta["state"]["batch_in_epoch"]) == (1, 0)
    assert meta["state"]["history"][-1]["valid_ppl"] < 20 and all(np.all(np.isfinite(p)) for p in params.values())
    assert sorted(p.name for p in (tmp_path / "poisoned").iterdir()) == ["checkpoint.npz", "history.json"]


def test_nonfinite_loss_stops_training_and_keeps_the_epoch_checkpoint(tmp_path, monkeypatch):
    """A learning rate that explodes in epoch 2 (update 25 of 38) makes the parameters overflow and the
    training loss explode (non-finite, or far above the uniform model's log |V|): train() stops at that
    update with its message (the loss check, not the checkpoint guard: with the default 10-minute
    interval no checkpoint is due mid-epoch), and the checkpoint of the end of epoch 1 is left intact:
    it loads, finite, equal to a 1-epoch run's."""
    explode_from(monkeypatch, 25)
    model = new_model()
    losses = []
    update = model.sgd_update

    def recording(*args):
        losses.append(update(*args))
        return losses[-1]

    model.sgd_update = recording
    cfg = TrainConfig(epochs=3, batch=32, lr=0.3, weight_decay=1e-3, decay_rate=1e-3, seed=5, patience=10)
    assert cfg.checkpoint_every_minutes == 10.0  # the default: checkpoints at the end of each epoch only
    out = tmp_path / "blowup"
    with pytest.raises(TrainingDiverged) as info, np.errstate(over="ignore", invalid="ignore"):
        train(model, data(), cfg, out_dir=out, quiet=True)  # (numpy's overflow warnings are expected)
    msg = str(info.value)
    bad = len(losses) - 1  # the index of the update whose loss exploded (the last attempted): update bad + 1
    limit = 10 * np.log(20) + 10  # far above log |V| = 3.0, the uniform model's loss
    assert bad > 25 and all(np.asarray(losses[:bad]) <= limit) and not losses[bad] <= limit
    assert msg == (f"the training loss became {losses[bad]:.4g} at update {bad + 1} of epoch 2 (the last validated "
                   f"checkpoint, at the end of epoch 1, is kept in {out / 'checkpoint.npz'}); try a smaller "
                   "learning rate")  # not 'resume continues from there': resumed, the run diverges again
    assert bad < 2 * 19  # stopped inside epoch 2: no further update, no epoch-2 validation or checkpoint
    saved = json.loads((out / "history.json").read_text())
    assert [e["epoch"] for e in saved["epochs"]] == [1]
    meta, params, best, _ = load_checkpoint(out / "checkpoint.npz")
    state = meta["state"]
    assert (state["step"], state["epoch"], state["batch_in_epoch"]) == (19, 1, 0)  # the end of epoch 1
    assert all(np.all(np.isfinite(p)) for p in list(params.values()) + list(best.values()))
    monkeypatch.undo()
    one_epoch, _ = run(tmp_path, "one-epoch", 1)
    for k in one_epoch.params:
        assert np.array_equal(params[k], one_epoch.params[k]), k
    assert model_from_checkpoint(out / "checkpoint.npz").perplexity(*data()[1]) < 20  # usable: below uniform


def test_the_one_line_names_the_checkpoint_this_run_falls_back_on(tmp_path):
    """Ctrl-C where nothing is saved inside an epoch (hogwild, MPI: a backend that saves at epoch
    ends only) names the checkpoint kept and where it stands; a fresh start over an earlier run's
    checkpoint (what --force does) says none of its own was written, though that file is still there."""
    from nplm_edu.training.backends import SerialBackend

    class Uninterruptible(SerialBackend):  # Ctrl-C arrives as KeyboardInterrupt, as under hogwild
        saves_inside_epochs = flags_signals = False

    cfg = TrainConfig(epochs=3, batch=32, lr=0.3, seed=5)  # 19 updates per epoch
    model = new_model()
    backend, calls = Uninterruptible(model, cfg), []
    update = backend.update

    def interrupted_in_epoch_2(*args):
        calls.append(1)
        if len(calls) == 25:
            raise KeyboardInterrupt
        return update(*args)

    backend.update = interrupted_in_epoch_2
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt) as info:
        train(model, data(), cfg, out_dir=out, quiet=True, backend=backend)
    assert str(info.value) == (f"the checkpoint at the end of epoch 1 is kept in {out / 'checkpoint.npz'}; "
                               "resume continues from there")
    assert load_checkpoint(out / "checkpoint.npz")[0]["state"]["step"] == 19

    def ctrl_c(step, _model):  # from a callback, on a backend that saves nothing inside an epoch: stops at once
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt, match="the checkpoint at the end of epoch 1 is kept in"):
        train(model, data(), cfg, out_dir=out, resume=True, quiet=True, backend=Uninterruptible(model, cfg),
              callback=ctrl_c, callback_every=1)
    with pytest.raises(TrainingDiverged, match=r"at update 2 of epoch 1 \(no checkpoint was written yet\)"), \
            np.errstate(over="ignore", invalid="ignore"):
        train(new_model(), data(), TrainConfig(epochs=1, batch=32, lr=1e30), out_dir=out, quiet=True)
    assert load_checkpoint(out / "checkpoint.npz")[0]["state"]["step"] == 19  # the earlier run's, untouched


def test_a_ctrl_c_from_the_callback_stops_output_blocks_at_the_next_agreement(tmp_path):
    """Under output blocks nothing is saved inside an epoch; a callback's KeyboardInterrupt (as Ctrl-C
    in a notebook) stops the ranks at their next agreement, 16 updates in, not never."""
    from nplm_edu.training.parallel.output_block import OutputBlockBackend

    model, cfg = new_model(), TrainConfig(epochs=3, batch=32, lr=0.3, seed=5)  # 19 updates per epoch
    backend, steps = OutputBlockBackend(model, cfg), []

    def ctrl_c_at_3(step, _model):
        steps.append(step)
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt, match=r"^no checkpoint was written yet$"):
        train(model, data(), cfg, out_dir=tmp_path / "run", callback=ctrl_c_at_3, callback_every=1, quiet=True,
              backend=backend)
    assert steps[-1] == backend.STOP_CHECK_EVERY - 1  # agreed after update 16, before its callback


def test_divergence_before_any_checkpoint_says_so(tmp_path):
    with pytest.raises(TrainingDiverged, match=r"at update 2 of epoch 1 \(no checkpoint was written yet\); try a "
                                               "smaller learning rate"), np.errstate(over="ignore", invalid="ignore"):
        train(new_model(), data(), TrainConfig(epochs=1, batch=32, lr=1e30), out_dir=tmp_path / "early", quiet=True)
    assert not (tmp_path / "early" / "checkpoint.npz").exists()

def test_callback_every(tmp_path):
    seen = []
    train(new_model(), data(), TrainConfig(epochs=1, batch=100), callback=lambda s, m: seen.append(s),
          callback_every=2, quiet=True)
    assert seen == [2, 4, 6]  # 6 updates of 100 examples


@pytest.mark.parametrize("bad", [dict(batch=0), dict(lr=-1.0), dict(lr=0.0), dict(epochs=0),
                                 dict(weight_decay=-1e-4), dict(decay_rate=float("nan")), dict(patience=0)])
def test_bad_train_config(bad):
    with pytest.raises(UserError):
        train(new_model(), data(), TrainConfig(**bad), quiet=True)


def test_cli_trains_and_reports_bad_input(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--corpus", "synthetic", "--n", "3", "--h", "8", "--m", "5", "--epochs", "2",
                 "--batch", "64", "--lr", "0.3", "--out", str(out), "--quiet"])
    assert code == 0
    hist = json.loads((out / "history.json").read_text())
    assert len(hist["epochs"]) == 2 and hist["epochs"][-1]["valid_ppl"] < 47  # below uniform over |V| = 47
    assert zipfile.is_zipfile(out / "checkpoint.npz")
    for args in (["--m", "0"], ["--n", "1"], ["--lr", "-1"], ["--batch", "0"], ["--h", "0", "--no-direct"],
                 ["--weight-decay", "-1"], ["--epochs", "0"]):
        capsys.readouterr()
        assert main(["train", "--out", str(tmp_path / "x"), "--quiet"] + args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), err


def test_cli_does_not_overwrite_a_checkpoint_without_resume_or_force(tmp_path, capsys):
    # running the same command again after an interruption must not start over silently: the
    # checkpoint of the finished epochs would be overwritten by epoch 1 of a new run
    out = tmp_path / "run"
    args = ["train", "--corpus", "synthetic", "--synthetic-tokens", "3000", "--n", "3", "--h", "8", "--m", "5",
            "--epochs", "1", "--batch", "64", "--out", str(out), "--quiet"]
    assert main(args) == 0
    before = (out / "checkpoint.npz").read_bytes()
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already holds a checkpoint" in err[0] and "--resume" in err[0], err
    assert (out / "checkpoint.npz").read_bytes() == before  # untouched
    assert main(args + ["--force", "--seed", "7"]) == 0  # --force starts over: another seed, another checkpoint
    assert (out / "checkpoint.npz").read_bytes() != before


def test_checkpoint_refuses_nonfinite(tmp_path):
    model = new_model()
    model.params["C"][0, 0] = np.inf
    with pytest.raises(TrainingDiverged):
        save_checkpoint(tmp_path / "c.npz", model.params, {}, None)


def test_max_updates_then_resume_continues(tmp_path):
    full, _ = run(tmp_path, "full", 2)
    model = new_model()
    cfg = TrainConfig(epochs=2, batch=32, lr=0.3, weight_decay=1e-3, decay_rate=1e-3, seed=5, patience=10,
                      max_updates=7)
    hist = train(model, data(), cfg, out_dir=tmp_path / "lim", quiet=True)
    assert hist["updates"] == 7 and hist["epochs"] == []
    cfg.max_updates = None
    resumed = new_model()
    train(resumed, data(), cfg, out_dir=tmp_path / "lim", resume=True, quiet=True)
    for k in full.params:
        assert np.array_equal(full.params[k], resumed.params[k]), k


@pytest.mark.parametrize("mode", ["serial", "hogwild", "output-block"])
def test_resume_without_a_checkpoint_is_one_clear_error(tmp_path, mode):
    """resume with no checkpoint to resume: one UserError naming the file, whatever the backend
    (output-block at M = 1, without MPI), and nothing trained or written."""
    from nplm_edu.training.parallel.hogwild import HogwildBackend
    from nplm_edu.training.parallel.output_block import OutputBlockBackend

    model, cfg = new_model(), TrainConfig(epochs=1, batch=32)
    backend = (None if mode == "serial" else HogwildBackend(model, cfg, data()[0], workers=2) if mode == "hogwild"
               else OutputBlockBackend(model, cfg))
    out = tmp_path / "run"
    with pytest.raises(UserError, match=f"^no checkpoint at {re.escape(str(out / 'checkpoint.npz'))}$"):
        train(model, data(), cfg, out_dir=out, resume=True, backend=backend, quiet=True)
    assert not (out / "checkpoint.npz").exists() and not (out / "history.json").exists()
    with pytest.raises(UserError, match="resume needs an output folder"):
        train(model, data(), cfg, resume=True, backend=backend, quiet=True)


def test_resume_refuses_a_checkpoint_of_another_corpus(tmp_path, capsys):
    """The synthetic corpus with another --corpus-seed has the same |V| = 47 (so the same model) but other
    text: resuming on it is refused in one line, and the checkpoint is left as it was."""
    args = ["train", "--corpus", "synthetic", "--n", "3", "--h", "8", "--m", "5", "--batch", "64", "--out",
            str(tmp_path), "--quiet"]
    assert main([*args, "--epochs", "1"]) == 0
    before = (tmp_path / "checkpoint.npz").read_bytes()
    capsys.readouterr()
    assert main([*args, "--epochs", "2", "--resume", "--corpus-seed", "9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {tmp_path / 'checkpoint.npz'} was trained on other data"), err
    assert (tmp_path / "checkpoint.npz").read_bytes() == before
    assert err[0].endswith("or start afresh instead of resuming")  # the way it names is open:
    assert main([*args, "--epochs", "1", "--force", "--corpus-seed", "9"]) == 0
    assert (tmp_path / "checkpoint.npz").read_bytes() != before


def test_stale_temporaries_are_removed_at_the_start(tmp_path):
    """A process killed while writing leaves checkpoint.npz.<random>.tmp behind: the next run removes it
    before its first update, and leaves other files alone."""
    out = tmp_path / "run"
    out.mkdir()
    stale, other = out / "checkpoint.npz.k1ll3d.tmp", out / "notes.tmp"
    stale.write_bytes(b"half a checkpoint")
    other.write_text("mine")
    seen = []
    train(new_model(), data(), TrainConfig(epochs=1, batch=100), out_dir=out, quiet=True, callback_every=1,
          callback=lambda step, model: seen.append(stale.exists()))
    assert seen and not any(seen) and other.read_text() == "mine"


def test_unwritable_out_fails_before_training(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["train", "--corpus", "synthetic", "--epochs", "50", "--out", str(afile / "run")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: cannot write to {afile / 'run'}"), err
    assert err[0].endswith(f"{afile} is a file, not a folder")  # not the system's "File exists"
    assert "epoch" not in captured.out and afile.read_text() == "x"  # not one epoch trained


@pytest.mark.parametrize("argv, says", [
    (["train", "--results", "{folder}"], "{folder} is a folder: --results takes a file path"),
    (["train", "--results", "{afile}/r.json"], "cannot write to {afile}: {afile} is a file, not a folder"),
    (["mix", "{ckpt}", "--json", "{afile}/m.json"], "cannot write to {afile}: {afile} is a file, not a folder"),
    (["mix", "{ckpt}", "--json", "{folder}"], "{folder} is a folder: --json takes a file path"),
    (["ngram", "--json", "{afile}/n.json"], "cannot write to {afile}: {afile} is a file, not a folder"),
])
def test_output_files_are_checked_before_any_work(tmp_path, capsys, argv, says):
    """--results, mix's and ngram's --json: an unwritable path is one line naming the option, before any
    training, fitting or scoring (the checkpoint given to mix does not even exist: it is never read)."""
    names = {"folder": tmp_path / "adir", "afile": tmp_path / "afile", "ckpt": tmp_path / "none.npz"}
    names["folder"].mkdir()
    names["afile"].write_text("x")
    argv = [a.format(**names) for a in argv] + ["--corpus", "synthetic", "--epochs", "50"] * (argv[0] == "train")
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == "error: " + says.format(**names) and "epoch" not in captured.out


@pytest.mark.parametrize("change, says", [
    (lambda m: m.pop("model"), "meta field 'model' is missing or not a dict"),
    (lambda m: m.update(train=[1, 2]), "meta field 'train' is missing or not a dict"),
    (lambda m: m.update(kind=3), "meta field 'kind' is missing or not a str"),
    (lambda m: m["state"].update(step="many"), "state field 'step'"),
    (lambda m: m["state"].update(history="x"), "state field 'history'"),
    (lambda m: m["state"].update(rng_state={"seed": 1}), "PCG64"),
    (lambda m: m["state"].update(surprise=1), "unknown state fields ['surprise']"),
    (lambda m: m["state"].update(best_valid=float("nan")), "state field 'best_valid' is nan, not float | None"),
    (lambda m: m["train"].update(tie="yes"), "training field 'tie' is 'yes', not bool"),
    (lambda m: m.update(integer="C"), "meta field 'integer' is 'C', not a list of names"),
    (lambda m: m.update(integer=["C"]), "array 'param/C' is not integers (float32)"),
])
def test_checkpoint_with_a_bad_meta_is_one_clear_error(tmp_path, capsys, change, says):
    """This version's format tag, but a meta with a field missing or of the wrong type: one clear line from
    `train --resume` and from `mix`, not a traceback from deep inside the trainer."""
    def spoil(arrays):
        meta = json.loads(str(arrays["meta"]))
        change(meta)
        arrays["meta"] = np.array(json.dumps(meta))

    assert_refused_in_one_line(tmp_path, capsys, spoil, says)


@pytest.mark.parametrize("name, change", [
    ("param/C", lambda a: a.astype(str)),  # strings: the copy into the model raised a ValueError traceback
    ("param/C", lambda a: a.astype(np.int8)),  # whole numbers: silently cast before
    ("best/U", lambda a: np.full_like(a, np.nan)),  # not finite: save_checkpoint never writes one
])
def test_checkpoint_with_bad_parameter_arrays_is_one_clear_error(tmp_path, capsys, name, change):
    """A checkpoint whose meta is fine but whose parameters are not finite floating-point numbers."""
    def spoil(arrays):
        arrays[name] = change(arrays[name])

    assert_refused_in_one_line(tmp_path, capsys, spoil, f"array '{name}' is not finite floating-point numbers")


@pytest.mark.parametrize("field, value", [("V", -3), ("h", "many"), ("surprise", 1), ("direct", "yes"), ("V", 20.0)])
def test_mix_names_the_checkpoint_whose_model_configuration_is_bad(tmp_path, capsys, field, value):
    """`mix` builds the network from the checkpoint's configuration: a bad one is one line naming the
    file (|V| = -3 was reported without it, a string for h in Python's words alone)."""
    run(tmp_path, "good", 1)
    with np.load(tmp_path / "good" / "checkpoint.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))
    meta["model"][field] = value
    bad = tmp_path / "bad.npz"
    np.savez(bad, **dict(arrays, meta=np.array(json.dumps(meta))))
    capsys.readouterr()
    assert main(["mix", str(bad), "--corpus", "synthetic"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {bad} has an unreadable model configuration ("), err


def test_best_parameters_of_other_shapes_are_refused_before_any_training(tmp_path, capsys):
    """best/C of the wrong shape was found only at the end of a resumed run's epoch, after the checkpoint
    had been rewritten with it."""
    def spoil(arrays):
        arrays["best/C"] = arrays["best/C"][:-1]

    assert_refused_in_one_line(tmp_path, capsys, spoil, "the best parameters' names and shapes")


def test_resume_refuses_a_training_setting_of_the_wrong_type(tmp_path, capsys):
    """batch "128" in the checkpoint said "cannot resume with batch=128: the checkpoint used 128"."""
    run(tmp_path, "run", 1)
    ckpt = tmp_path / "run" / "checkpoint.npz"
    with np.load(ckpt, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))
    meta["train"]["batch"] = str(meta["train"]["batch"])
    np.savez(ckpt, **dict(arrays, meta=np.array(json.dumps(meta))))
    capsys.readouterr()
    assert main(["train", "--corpus", "synthetic", "--out", str(ckpt.parent), "--resume", "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {ckpt} is not a readable nplm-edu checkpoint (training field "
                                               f"'batch' is '{meta['train']['batch']}', not int)")


def assert_refused_in_one_line(tmp_path, capsys, spoil, says):
    """A good checkpoint's arrays, ``spoil``-ed in place and saved anew: `train --resume` and `mix` each
    refuse it in one line saying ``says``, and leave the file as it was."""
    run(tmp_path, "good", 1)
    with np.load(tmp_path / "good" / "checkpoint.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    spoil(arrays)
    bad = tmp_path / "bad" / "checkpoint.npz"
    bad.parent.mkdir()
    np.savez(bad, **arrays)
    before = bad.read_bytes()
    for argv in (["train", "--corpus", "synthetic", "--out", str(bad.parent), "--resume", "--quiet"],
                 ["mix", str(bad), "--corpus", "synthetic"]):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {bad} is not a readable nplm-edu checkpoint ("), err
        assert says in err[0], err
    assert bad.read_bytes() == before


# ----------------------------------------------------------------- resume through a real process
ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
EPOCHS = 3
CLI_RUN = [sys.executable, "-m", "nplm_edu", "train", "--corpus", "synthetic", "--synthetic-tokens", "15000", "--n", "3",
           "--h", "8", "--m", "6", "--epochs", str(EPOCHS), "--batch", "4", "--lr", "0.1", "--seed", "3", "--patience",
           "10", "--quiet"]
UPDATES_PER_EPOCH = 3000  # 12,000 training windows of a 15,000-token synthetic corpus / K = 4


def _cli(out, *extra, timeout=120):
    return subprocess.run([*CLI_RUN, "--out", str(out), *extra], capture_output=True, text=True, env=ENV,
                          cwd=ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    proc = _cli(out)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.long
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_cli_resume_after_a_real_interruption_equals_uninterrupted(tmp_path, uninterrupted, how):
    """`python -m nplm_edu train ... --out DIR` stopped in the middle of the run, then the same command
    with --resume, ends with exactly (bitwise) the parameters, best parameters and history of the same
    command run without interruption. SIGINT (Ctrl-C) and SIGTERM (what `kill` and schedulers send):
    sent once the end-of-epoch-1 checkpoint exists; the trainer finishes its update, checkpoints and
    exits with status 130. SIGKILL: no chance to save anything, so --checkpoint-every-minutes 0.005
    (every 0.3 s) provides a checkpoint inside epoch 1 and the kill lands wherever the run is; the
    atomic writes leave a loadable checkpoint behind."""
    out = tmp_path / "cut"
    extra = ["--checkpoint-every-minutes", "0.005"] if how == "SIGKILL" else []
    proc = subprocess.Popen([*CLI_RUN, "--out", str(out), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not (out / "checkpoint.npz").exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no checkpoint within 60 s"
            time.sleep(0.005)
        proc.send_signal(getattr(signal, how))
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # only on a failed assertion above
            proc.kill()
            proc.wait()
    if how != "SIGKILL":
        assert proc.returncode == 130, err  # saved at the update it was asked to stop after
        assert err.strip() == f"interrupted (saved in {out / 'checkpoint.npz'}; resume continues from there)", err
    else:
        assert proc.returncode == -signal.SIGKILL
    state = load_checkpoint(out / "checkpoint.npz")[0]["state"]
    assert 0 < state["step"] < EPOCHS * UPDATES_PER_EPOCH and not state["done"]  # really stopped mid-run
    if how != "SIGKILL":
        assert state["step"] > UPDATES_PER_EPOCH and state["batch_in_epoch"] > 0  # saved on the signal, mid-epoch

    resumed = _cli(out, *extra, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    with np.load(uninterrupted / "checkpoint.npz", allow_pickle=False) as a, \
            np.load(out / "checkpoint.npz", allow_pickle=False) as b:
        assert sorted(a.files) == sorted(b.files)
        arrays = [k for k in a.files if k.startswith(("param/", "best/"))]
        assert len(arrays) == 12  # C, H, d, U, W, b and their best values
        for k in arrays:
            assert np.array_equal(a[k], b[k]), k
    ha, hb = (json.loads((d / "history.json").read_text()) for d in (uninterrupted, out))
    strip = [[{k: v for k, v in e.items() if k not in ("seconds", "cpu_seconds")} for e in h["epochs"]] for h in (ha, hb)]
    assert len(strip[0]) == EPOCHS and strip[0] == strip[1]
    assert ha["best_valid_ppl"] == hb["best_valid_ppl"] and ha["updates"] == hb["updates"] == EPOCHS * UPDATES_PER_EPOCH


def test_cli_exploding_loss_is_one_error_line(tmp_path):
    """lr 9: the loss climbs far above log |V| while still finite; the run stops there with status 2 and
    one `error:` line, no traceback, and no checkpoint of the exploded parameters."""
    proc = subprocess.run([sys.executable, "-m", "nplm_edu", "train", "--corpus", "synthetic", "--epochs", "10",
                           "--lr", "9", "--seed", "2", "--out", str(tmp_path), "--quiet"], capture_output=True,
                          text=True, env=ENV, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and re.fullmatch(r"error: the training loss became [0-9.e+]+ at update \d+ of epoch 1 "
                                            r"\(no checkpoint was written yet\); try a smaller learning rate",
                                            lines[0]), proc.stderr
    assert not (tmp_path / "checkpoint.npz").exists()


def test_cli_exploding_loss_under_hogwild_stops_the_workers_at_the_update(tmp_path):
    """A finite blow-up under hogwild: a worker sees it (not only the epoch's mean at its end) and the
    line names about which update, counted from 1, and which worker. lr 12, not the serial test's 9
    (whose loss hovers about the threshold 10 log |V| + 10, so whether and when it crossed it hung on
    the interleaving of the workers' updates) nor a rate whose single update sends the loss to millions
    (a worker scheduled late then measured the parameters after another's exploding update): alone,
    the loss crosses the threshold at update 10 and then climbs by less than 10x an update, so
    whatever the order in which the workers' updates land it is caught early in epoch 1, below 1e6."""
    proc = subprocess.run([sys.executable, "-m", "nplm_edu", "train", "--corpus", "synthetic", "--epochs", "10",
                           "--lr", "12", "--seed", "2", "--out", str(tmp_path), "--quiet", "--parallel", "hogwild",
                           "--workers", "2"], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.splitlines()[-1]
    m = re.fullmatch(r"error: the training loss became ([0-9.e+]+) at about update (\d+) of epoch 1 \(hogwild worker "
                     r"[12] of 2\) \(no checkpoint was written yet\); try a smaller learning rate", last)
    assert m and float(m.group(1)) < 1e6 and 1 <= int(m.group(2)) < 375, last  # caught while finite, inside the epoch
    assert not (tmp_path / "checkpoint.npz").exists()


# --------------------------------------------------------------------------- divergence and checkpoints inside an epoch
def explode_from(monkeypatch, update: int) -> None:
    """The learning rate becomes 1e30 from ``update`` on: the parameters overflow, the loss explodes."""
    import nplm_edu.training.trainer as train_mod

    rule = train_mod.learning_rate
    monkeypatch.setattr(train_mod, "learning_rate", lambda lr0, r, t, *decay: 1e30 if t >= update else rule(lr0, r, t, *decay))


def test_divergence_falls_back_on_the_last_validated_checkpoint(tmp_path, monkeypatch):
    """Checkpoints every update (minutes 0) inside epoch 2 hold parameters no validation has seen, the last
    of them those the exploded loss came from: the run falls back on the end of epoch 1, whose parameters
    are finite and whose validation perplexity was, and leaves no copy of it behind."""
    explode_from(monkeypatch, 25)  # 19 updates per epoch: inside epoch 2
    out = tmp_path / "run"
    with pytest.raises(TrainingDiverged, match=r"of epoch 2 \(the last validated checkpoint, at the end of epoch 1, is "
                                               r"kept in .*checkpoint.npz\); try a smaller learning rate$"), \
            np.errstate(over="ignore", invalid="ignore"):
        run(tmp_path, "run", 3, minutes=0.0)
    meta, params, best, _ = load_checkpoint(out / "checkpoint.npz")
    assert (meta["state"]["step"], meta["state"]["epoch"], meta["state"]["batch_in_epoch"]) == (19, 1, 0)
    assert np.isfinite(meta["state"]["history"][-1]["valid_ppl"])
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.npz", "history.json"]
    assert model_from_checkpoint(out / "checkpoint.npz", best=False).perplexity(*data()[1]) < 20  # usable


def test_divergence_in_the_first_epoch_removes_its_unvalidated_checkpoint(tmp_path, monkeypatch):
    explode_from(monkeypatch, 10)
    with pytest.raises(TrainingDiverged, match=r"of epoch 1 \(no epoch was validated yet: the checkpoint saved inside it "
                                               r"is removed\); try a smaller learning rate$"), \
            np.errstate(over="ignore", invalid="ignore"):
        run(tmp_path, "run", 3, minutes=0.0)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["history.json"]


def test_a_resumed_run_that_diverges_falls_back_on_the_epoch_kept_aside(tmp_path, monkeypatch):
    """A run stopped inside epoch 2 (max_updates: a checkpoint of update 25) keeps epoch 1's end aside in
    checkpoint.epoch.npz; resumed, it diverges, and checkpoint.npz is epoch 1's end again. Runs that end
    at an epoch's end keep no copy."""
    from dataclasses import replace

    out = tmp_path / "run"
    cfg = TrainConfig(epochs=3, batch=32, lr=0.3, seed=5, max_updates=25)
    train(new_model(), data(), cfg, out_dir=out, quiet=True)
    assert load_checkpoint(out / "checkpoint.npz")[0]["state"]["step"] == 25
    assert load_checkpoint(out / "checkpoint.epoch.npz")[0]["state"]["step"] == 19
    explode_from(monkeypatch, 30)
    with pytest.raises(TrainingDiverged, match=r"the last validated checkpoint, at the end of epoch 1, is kept in"), \
            np.errstate(over="ignore", invalid="ignore"):
        train(new_model(), data(), replace(cfg, max_updates=None), out_dir=out, resume=True, quiet=True)
    state = load_checkpoint(out / "checkpoint.npz")[0]["state"]
    assert (state["step"], state["batch_in_epoch"]) == (19, 0) and not (out / "checkpoint.epoch.npz").exists()
    monkeypatch.undo()
    run(tmp_path, "whole", 2, minutes=0.0)
    assert sorted(p.name for p in (tmp_path / "whole").iterdir()) == ["checkpoint.npz", "history.json"]


def test_resume_refuses_a_checkpoint_without_a_training_state(tmp_path):
    run(tmp_path, "run", 1)
    ckpt = tmp_path / "run" / "checkpoint.npz"
    meta, params, best, extra = load_checkpoint(ckpt)
    for state in ({}, dict(meta["state"], rng_state=None), dict(meta["state"], batch_in_epoch=10 ** 9)):
        save_checkpoint(ckpt, params, dict(meta, state=state), best, extra)
        with pytest.raises(UserError, match=f"^{re.escape(str(ckpt))} holds no training state to resume from"):
            run(tmp_path, "run", 2, resume=True)
    for bad in (dict(step=-1), dict(history=[{"epoch": "x"}])):
        save_checkpoint(ckpt, params, dict(meta, state=dict(meta["state"], **bad)), best, extra)
        with pytest.raises(UserError, match="is not a readable nplm-edu checkpoint"):
            load_checkpoint(ckpt)


def test_resume_refuses_the_same_ids_over_other_words(tmp_path, capsys):
    words = np.random.default_rng(0).choice([f"w{i}" for i in range(12)], 3000)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("\n".join(" ".join(words[i:i + 30]) for i in range(0, 3000, 30)))
    b.write_text(a.read_text().replace("w", "q"))
    args = ["train", "--n", "3", "--h", "5", "--m", "3", "--quiet", "--out", str(tmp_path / "run")]
    assert main([*args, "--corpus", str(a), "--epochs", "1"]) == 0
    capsys.readouterr()
    assert main([*args, "--corpus", str(b), "--epochs", "2", "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "was trained on other data" in err[0], err
    assert main([*args, "--corpus", str(a), "--epochs", "2", "--resume"]) == 0


def test_too_little_disk_space_is_found_before_training(tmp_path, monkeypatch):
    import types

    import nplm_edu.training.checkpoint as ck

    monkeypatch.setattr(ck.shutil, "disk_usage", lambda path: types.SimpleNamespace(free=4096))
    seen = []
    with pytest.raises(UserError, match=r"has 0.0 MiB free, and the checkpoints of this model need about"):
        train(new_model(), data(), TrainConfig(epochs=1, batch=32), out_dir=tmp_path / "run", quiet=True,
              callback=lambda step, model: seen.append(step), callback_every=1)
    assert not seen  # not one update


def test_a_failed_save_says_which_file_and_what_is_kept(tmp_path, monkeypatch):
    import nplm_edu.training.keeper as keeper_mod

    save, calls = keeper_mod.save_checkpoint, []

    def full_disk(*args, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return save(*args, **kw)

    monkeypatch.setattr(keeper_mod, "save_checkpoint", full_disk)
    out = tmp_path / "run"
    with pytest.raises(UserError) as info:
        run(tmp_path, "run", 3)
    assert str(info.value) == (f"cannot write {out / 'checkpoint.npz'}: No space left on device (the checkpoint at the "
                               f"end of epoch 1 is kept in {out / 'checkpoint.npz'}; resume continues from there)")
    assert load_checkpoint(out / "checkpoint.npz")[0]["state"]["epoch"] == 1


def test_a_failed_copy_of_the_validated_checkpoint_names_the_copy(tmp_path, monkeypatch):
    """Inside epoch 2 the end of epoch 1 is kept aside first: when that copy cannot be written, the line
    names the copy, not checkpoint.npz, which is untouched."""
    import nplm_edu.training.keeper as keeper_mod

    def full_disk(path, copy):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(keeper_mod, "keep_aside", full_disk)
    out = tmp_path / "run"
    with pytest.raises(UserError) as info:
        run(tmp_path, "run", 3, minutes=0.0)
    assert str(info.value) == (f"cannot write {out / 'checkpoint.epoch.npz'}: No space left on device (the checkpoint "
                               f"at the end of epoch 1 is kept in {out / 'checkpoint.npz'}; resume continues from there)")
    assert load_checkpoint(out / "checkpoint.npz")[0]["state"]["epoch"] == 1


def test_stale_temporaries_of_every_file_of_a_run_are_removed(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    stale = [out / "history.json.k1ll3d.tmp", out / "checkpoint.epoch.npz.k1ll3d.tmp", out / "checkpoint.npz.x.tmp"]
    for p in stale:
        p.write_bytes(b"half")
    run(tmp_path, "run", 1)
    assert not any(p.exists() for p in stale)


def test_ctrl_c_while_the_command_line_is_built_is_one_line(monkeypatch, capsys):
    import nplm_edu.cli as cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["train"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"


def test_a_lost_epoch_copy_after_the_first_epoch_leaves_the_file_and_says_so(tmp_path, monkeypatch):
    """Resumed from a checkpoint inside epoch 2 whose epoch copy is gone (a folder copied without it),
    a diverging run keeps that checkpoint rather than remove the only one, and says what it is."""
    from dataclasses import replace

    out = tmp_path / "run"
    cfg = TrainConfig(epochs=3, batch=32, lr=0.3, seed=5, max_updates=25)
    train(new_model(), data(), cfg, out_dir=out, quiet=True)
    (out / "checkpoint.epoch.npz").unlink()
    explode_from(monkeypatch, 30)
    with pytest.raises(TrainingDiverged, match=r"\(the checkpoint at update 25, in epoch 2 in .*checkpoint.npz was saved "
                                               r"inside an epoch, and no validated one was kept aside\)"), \
            np.errstate(over="ignore", invalid="ignore"):
        train(new_model(), data(), replace(cfg, max_updates=None), out_dir=out, resume=True, quiet=True)
    assert load_checkpoint(out / "checkpoint.npz")[0]["state"]["step"] == 25


def test_parameters_that_stop_being_finite_at_an_epoch_end_are_not_counted_as_that_epoch(tmp_path):
    """Without validation data nothing checks the parameters at an epoch's end but the save: the line
    names the epoch that failed, the history ends with the epoch before, checkpoint.npz is its end."""
    def poison(step, model):
        if step == 38:  # the last update of epoch 2
            model.params["b"][0] = np.inf

    out = tmp_path / "run"
    with pytest.raises(TrainingDiverged, match=r"stopped being finite at update 38 of epoch 2 \(the last validated "
                                               r"checkpoint, at the end of epoch 1, is kept in"):
        train(new_model(), data()[0], TrainConfig(epochs=3, batch=32, lr=0.3, seed=5), out_dir=out, quiet=True,
              callback=poison, callback_every=1)
    assert [e["epoch"] for e in json.loads((out / "history.json").read_text())["epochs"]] == [1]
    assert load_checkpoint(out / "checkpoint.npz")[0]["state"]["step"] == 19


def test_an_epoch_whose_parameters_cannot_be_saved_is_not_the_best_either(tmp_path):
    """Validation sees finite parameters (word 0's feature vector is in no validation context) but the
    save does not: the history names epoch 1 as the best, not the epoch that was dropped."""
    def poison(step, model):
        if step == 38:  # the last update of epoch 2
            model.params["C"][0] = np.inf

    (X, y), (Xv, yv) = data()
    keep = (Xv != 0).all(axis=1)
    out = tmp_path / "run"
    with pytest.raises(TrainingDiverged, match=r"stopped being finite at update 38 of epoch 2"):
        train(new_model(), ((X, y), (Xv[keep], yv[keep])), TrainConfig(epochs=3, batch=32, lr=0.3, seed=5),
              out_dir=out, quiet=True, callback=poison, callback_every=1)
    saved = json.loads((out / "history.json").read_text())
    assert [e["epoch"] for e in saved["epochs"]] == [1]
    assert (saved["best_epoch"], saved["best_valid_ppl"]) == (1, saved["epochs"][0]["valid_ppl"])


def test_dropping_an_epoch_recounts_the_best_and_the_epochs_since():
    state = TrainState(epoch=4, best_valid=3.0, best_epoch=4, bad_epochs=0, done=True,
                       history=[{"epoch": 1, "valid_ppl": 9.0}, {"epoch": 2, "valid_ppl": 5.0},
                                {"epoch": 3, "valid_ppl": 5.0}, {"epoch": 4, "valid_ppl": 3.0}])
    state.drop_last_epoch()  # epoch 3 ties epoch 2: one epoch without improvement, as the trainer counts
    assert (state.epoch, state.best_valid, state.best_epoch, state.bad_epochs, state.done) == (3, 5.0, 2, 1, False)
    state = TrainState(epoch=1, history=[{"epoch": 1, "train_ppl": 7.0}])
    state.drop_last_epoch()
    assert (state.epoch, state.best_valid, state.best_epoch, state.history) == (0, None, None, [])


def test_a_checkpoint_fingerprinted_by_ids_alone_still_resumes(tmp_path):
    """Checkpoints written before the words were part of the fingerprint resume on the same data."""
    from dataclasses import replace

    from nplm_edu.data.corpus import load_corpus
    from nplm_edu.training.checkpoint import data_fingerprint

    corpus = load_corpus("synthetic", synthetic_tokens=3000)
    out, cfg = tmp_path / "run", TrainConfig(epochs=1, batch=64, lr=0.3)
    model = FusedNPLM(NPLMConfig(V=corpus.V, n=3, m=3, h=4, seed=1))
    train(model, corpus, cfg, out_dir=out, quiet=True)
    meta, params, best, extra = load_checkpoint(out / "checkpoint.npz")
    ids_only = data_fingerprint(corpus.V, corpus.windows("train", 3)[1], corpus.windows("valid", 3)[1])
    assert meta["data"] != ids_only
    save_checkpoint(out / "checkpoint.npz", params, dict(meta, data=ids_only), best, extra)
    hist = train(FusedNPLM(NPLMConfig(V=corpus.V, n=3, m=3, h=4, seed=1)), corpus, replace(cfg, epochs=2),
                 out_dir=out, resume=True, quiet=True)
    assert [e["epoch"] for e in hist["epochs"]] == [1, 2]


def test_the_space_check_counts_the_copy_kept_aside_inside_an_epoch(tmp_path, monkeypatch):
    """Inside an epoch, the epoch's copy, checkpoint.npz and the next write's temporary file coexist:
    three checkpoints' worth (parameters and best ones: 2 x 4 bytes per float32 parameter)."""
    import types

    import nplm_edu.training.checkpoint as ck

    model = new_model()
    per = 2 * sum(p.nbytes for p in model.params.values())
    monkeypatch.setattr(ck.shutil, "disk_usage", lambda path: types.SimpleNamespace(free=int(2.5 * per)))
    with pytest.raises(UserError, match="the checkpoints of this model need about"):
        train(model, data(), TrainConfig(epochs=1, batch=32), out_dir=tmp_path / "run", quiet=True)
    monkeypatch.setattr(ck.shutil, "disk_usage", lambda path: types.SimpleNamespace(free=3 * per))
    train(model, data(), TrainConfig(epochs=1, batch=32), out_dir=tmp_path / "run", quiet=True)


def test_a_fresh_start_leaves_an_earlier_runs_files_until_its_own_first_save(tmp_path, monkeypatch):
    """--force over a run stopped inside an epoch: until the new run saves, the folder keeps the old
    checkpoint and its epoch copy together; the new run's first save removes the copy."""
    out = tmp_path / "run"
    train(new_model(), data(), TrainConfig(epochs=3, batch=32, lr=0.3, seed=5, max_updates=25), out_dir=out, quiet=True)
    with pytest.raises(TrainingDiverged, match=r"\(no checkpoint was written yet\)"), \
            np.errstate(over="ignore", invalid="ignore"):
        train(new_model(), data(), TrainConfig(epochs=1, batch=32, lr=1e30), out_dir=out, quiet=True)
    assert load_checkpoint(out / "checkpoint.npz")[0]["state"]["step"] == 25
    assert load_checkpoint(out / "checkpoint.epoch.npz")[0]["state"]["step"] == 19
    train(new_model(), data(), TrainConfig(epochs=1, batch=32, lr=0.3), out_dir=out, quiet=True)
    assert not (out / "checkpoint.epoch.npz").exists()


def test_a_failed_output_check_leaves_no_new_folder(tmp_path, monkeypatch, capsys):
    import nplm_edu.cli.train as cli_train

    def made_then_full(folder):  # what check_writable meets on a full disk: the folder made, the byte refused
        Path(folder).mkdir(parents=True, exist_ok=True)
        raise UserError(f"cannot write to {folder}: No space left on device")

    monkeypatch.setattr(cli_train, "check_writable", made_then_full)
    out = tmp_path / "new"
    assert main(["train", "--corpus", "synthetic", "--epochs", "1", "--out", str(out)]) == 2
    assert not out.exists() and "No space left on device" in capsys.readouterr().err


def test_a_fresh_start_whose_first_save_fails_leaves_the_earlier_runs_files_together(tmp_path, monkeypatch):
    import nplm_edu.training.keeper as keeper_mod

    out = tmp_path / "run"
    train(new_model(), data(), TrainConfig(epochs=3, batch=32, lr=0.3, seed=5, max_updates=25), out_dir=out, quiet=True)

    def full_disk(*args, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(keeper_mod, "save_checkpoint", full_disk)
    with pytest.raises(UserError, match="No space left on device"):
        run(tmp_path, "run", 1, minutes=0.0)
    assert load_checkpoint(out / "checkpoint.npz")[0]["state"]["step"] == 25
    assert load_checkpoint(out / "checkpoint.epoch.npz")[0]["state"]["step"] == 19


@pytest.mark.parametrize("make, says", [
    (lambda: TrainConfig(max_updates=1e2), "max_updates must be int | None, got 100.0"),
    (lambda: TrainConfig(lr=float("nan")), "lr must be float, got nan"),
    (lambda: NPLMConfig(V=20, direct=1), "direct must be bool, got 1"),
])
def test_a_setting_of_the_wrong_type_is_refused_before_training(make, says):
    """What a checkpoint would refuse to read back (check_types) is refused when the run is set up: a
    library caller's 1e2 updates trained a whole run whose checkpoint then could not resume."""
    config = make()
    with pytest.raises(UserError) as info:
        config.validate()
    assert str(info.value) == says and one_line(info.value)[0] == "error: --" + says.replace("_", "-", 1)


def test_an_early_stopped_run_resumed_with_a_larger_patience_goes_on(tmp_path, capsys):
    """Resumed with the patience it stopped at, a run says in one line why it trains nothing; with a
    larger patience it trains on from where it stopped."""
    cfg = TrainConfig(epochs=40, batch=32, lr=3.0, weight_decay=0.0, decay_rate=0.0, seed=5, patience=1)
    first = train(new_model(), data(), cfg, out_dir=tmp_path, quiet=True)
    assert first["stopped_early"] and len(first["epochs"]) < 40
    again = train(new_model(), data(), cfg, out_dir=tmp_path, resume=True)
    said = capsys.readouterr().out.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("nothing to train: the run stopped early after epoch"), said
    assert "a larger patience continues it" in said[0] and again["epochs"] == first["epochs"]
    more = train(new_model(), data(), replace(cfg, patience=3), out_dir=tmp_path, resume=True, quiet=True)
    assert len(more["epochs"]) > len(first["epochs"]) and more["epochs"][:len(first["epochs"])] == first["epochs"]
