"""SGD trainer: the update rule, determinism, resume == uninterrupted, checkpoints, divergence, CLI."""

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from nplm_edu.errors import UserError
from nplm_edu.model import NPLM, NPLMConfig
from nplm_edu.train import (TrainConfig, TrainingDiverged, epoch_order, learning_rate, load_checkpoint,
                            model_from_checkpoint, save_checkpoint, sgd_step, train)


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
    return NPLM(NPLMConfig(V=V, n=n, m=4, h=h, direct=direct, seed=1))


def test_learning_rate_and_sgd_step_rule():
    assert learning_rate(1e-3, 1e-8, 0) == 1e-3  # t = 0: eps_0
    assert np.isclose(learning_rate(0.1, 0.5, 2), 0.05)  # 0.1 / (1 + 0.5 * 2)
    P = {k: np.array([1.0]) for k in ("C", "H", "U", "W", "b", "d")}
    G = {k: np.array([2.0]) for k in P}
    sgd_step(P, G, 0.1, 0.5)
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

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, "cut", 2, callback=stop, minutes=0.0)  # minutes=0: checkpoint after every update
    meta, _, _ = load_checkpoint(tmp_path / "cut" / "checkpoint.npz")
    assert (meta["step"], meta["epoch"], meta["batch_in_epoch"]) == (25, 1, 6)
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
    # truncated file
    bad = tmp_path / "truncated.npz"
    bad.write_bytes(path.read_bytes()[:200])
    with pytest.raises(UserError, match="not a readable"):
        load_checkpoint(bad)
    # a foreign npz, and one holding a pickled object
    np.savez(tmp_path / "foreign.npz", x=np.arange(3))
    with pytest.raises(UserError, match="not a readable"):
        load_checkpoint(tmp_path / "foreign.npz")
    np.savez(tmp_path / "pickled.npz", meta=np.array([{"format": "x"}], dtype=object))
    with pytest.raises(UserError, match="not a readable"):
        load_checkpoint(tmp_path / "pickled.npz")
    with pytest.raises(UserError):
        load_checkpoint(tmp_path / "missing.npz")
    assert not list((tmp_path / "a").glob("*.tmp"))  # atomic writes leave no temp files


def test_nan_stops_and_keeps_last_good_checkpoint(tmp_path):
    def poison(step, model):
        if step == 30:
            model.params["b"][0] = np.nan

    # minutes=0: a checkpoint is due right after the poisoning update, so save_checkpoint's guard fires
    with pytest.raises(TrainingDiverged, match="parameters are no longer finite: .*checkpoint.npz not overwritten"):
        run(tmp_path, "poisoned", 3, callback=poison, minutes=0.0)
    meta, params, _ = load_checkpoint(tmp_path / "poisoned" / "checkpoint.npz")
    assert meta["step"] == 29 and all(np.all(np.isfinite(p)) for p in params.values())  # the update before


def test_nonfinite_loss_stops_training_and_keeps_the_epoch_checkpoint(tmp_path, monkeypatch):
    """A learning rate that explodes in epoch 2 (update 25 of 38) makes the parameters overflow and the
    training loss non-finite: train() stops at that update with its message (the loss check, not the
    checkpoint guard: with the default 10-minute interval no checkpoint is due mid-epoch), and the
    checkpoint of the end of epoch 1 is left intact: it loads, finite, equal to a 1-epoch run's."""
    import nplm_edu.train as train_mod

    rule = train_mod.learning_rate
    monkeypatch.setattr(train_mod, "learning_rate", lambda lr0, r, t: 1e30 if t >= 25 else rule(lr0, r, t))
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
    bad = len(losses) - 1  # the update whose loss was not finite: the last one attempted
    assert bad > 25 and all(np.isfinite(losses[:bad])) and not np.isfinite(losses[bad])
    assert msg == (f"the training loss became {losses[bad]} at update {bad} of epoch 2 (the last good "
                   f"checkpoint is kept in {out / 'checkpoint.npz'}); try a smaller learning rate")
    assert bad < 2 * 19  # stopped inside epoch 2: no further update, no epoch-2 validation or checkpoint
    saved = json.loads((out / "history.json").read_text())
    assert [e["epoch"] for e in saved["epochs"]] == [1]
    meta, params, best = load_checkpoint(out / "checkpoint.npz")
    assert (meta["step"], meta["epoch"], meta["batch_in_epoch"]) == (19, 1, 0)  # the end of epoch 1
    assert all(np.all(np.isfinite(p)) for p in list(params.values()) + list(best.values()))
    monkeypatch.setattr(train_mod, "learning_rate", rule)
    one_epoch, _ = run(tmp_path, "one-epoch", 1)
    for k in one_epoch.params:
        assert np.array_equal(params[k], one_epoch.params[k]), k
    assert model_from_checkpoint(out / "checkpoint.npz").perplexity(*data()[1]) < 20  # usable: below uniform


def test_divergence_before_any_checkpoint_says_so(tmp_path):
    with pytest.raises(TrainingDiverged, match=r"at update 1 of epoch 1 \(no checkpoint was written yet\); try a "
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
    from nplm_edu.cli import main

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


def test_checkpoint_refuses_nonfinite(tmp_path):
    model = new_model()
    model.params["C"][0, 0] = np.inf
    with pytest.raises(TrainingDiverged):
        save_checkpoint(tmp_path / "c.npz", model, {}, None)


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


# ----------------------------------------------------------------- resume through a real process
ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
CLI_RUN = [sys.executable, "-m", "nplm_edu", "train", "--corpus", "synthetic", "--n", "3", "--h", "8", "--m", "6",
           "--epochs", "4", "--batch", "4", "--lr", "0.1", "--seed", "3", "--patience", "10", "--quiet"]
UPDATES_PER_EPOCH = 6000  # 24,000 training windows of the default synthetic corpus / K = 4


def _cli(out, *extra, timeout=120):
    return subprocess.run([*CLI_RUN, "--out", str(out), *extra], capture_output=True, text=True, env=ENV,
                          cwd=ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    proc = _cli(out)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_cli_resume_after_a_real_interruption_equals_uninterrupted(tmp_path, uninterrupted, how):
    """`python -m nplm_edu train ... --out DIR` stopped in the middle of the run, then the same command
    with --resume, ends with exactly (bitwise) the parameters, best parameters and history of the same
    command run without interruption. SIGINT (Ctrl-C): sent once the end-of-epoch-1 checkpoint exists;
    the trainer finishes its update, checkpoints and exits with status 130. SIGKILL: no chance to save
    anything, so --checkpoint-minutes 0.005 (every 0.3 s) provides a checkpoint inside epoch 1 and the
    kill lands wherever the run is; the atomic writes leave a loadable checkpoint behind."""
    out = tmp_path / "cut"
    extra = ["--checkpoint-minutes", "0.005"] if how == "SIGKILL" else []
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
    if how == "SIGINT":
        assert proc.returncode == 130 and err.strip() == "interrupted", err
    else:
        assert proc.returncode == -signal.SIGKILL
    meta, _, _ = load_checkpoint(out / "checkpoint.npz")
    assert 0 < meta["step"] < 4 * UPDATES_PER_EPOCH and not meta["done"]  # really stopped mid-run
    if how == "SIGINT":
        assert meta["step"] > UPDATES_PER_EPOCH and meta["batch_in_epoch"] > 0  # saved on Ctrl-C, mid-epoch

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
    strip = [[{k: v for k, v in e.items() if k != "seconds"} for e in h["epochs"]] for h in (ha, hb)]
    assert len(strip[0]) == 4 and strip[0] == strip[1]
    assert ha["best_valid_ppl"] == hb["best_valid_ppl"] and ha["updates"] == hb["updates"] == 4 * UPDATES_PER_EPOCH
