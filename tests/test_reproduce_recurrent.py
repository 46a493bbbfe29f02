"""``reproduce recurrent`` under the comparison protocol, on the synthetic corpus (seconds): the rows and
what each seed's row holds, two processes filling one file, resuming, the test set unread while the
learning rate is chosen, the controls (lstm-4 sees four words; nplm-dropout's size), seeded samples."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from nplm_edu.cli import main
from nplm_edu.data.corpus import CorpusSpec, load_corpus
from nplm_edu.experiments import recurrent as rec
from nplm_edu.experiments.protocol import choose_lr, comparison_data, header_settings
from nplm_edu.errors import UserError
from nplm_edu.experiments.recurrent_words import needs_word_level
from nplm_edu.experiments.recurrent_rows import ROWS, kn5_log_probs, parameter_counts, seeded_samples, sizes
from nplm_edu.models.gradcheck import gradcheck
from nplm_edu.models.rnn import RecurrentConfig
from nplm_edu.numerics.recurrent import recurrent_model
from nplm_edu.numerics.window_recurrent import WindowRecurrent, WindowRecurrentConfig

ROOT = Path(__file__).resolve().parents[1]
QUICK = ["reproduce", "recurrent", "--corpus", "synthetic", "--quick", "--quiet"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One quick run of every row: (results document, out path, runs folder)."""
    tmp = tmp_path_factory.mktemp("recurrent")
    out, runs = tmp / "r.json", tmp / "runs"
    assert main([*QUICK, "--out", str(out), "--runs-dir", str(runs)]) == 0
    return json.loads(out.read_text()), out, runs


@pytest.mark.long  # every row of the quick target end to end (the module's one run of it)
def test_every_row_every_seed_with_what_its_row_holds(quick):
    doc, _, _ = quick
    assert set(doc["summary"]) == set(rec.ORDER) and len(doc["runs"]) == 5 * 3
    assert doc["protocol"]["lrs"] == [1.0, 3.0, 10.0, 30.0] and doc["slice"]["train"] == rec.QUICK_SLICE[0]
    for r in doc["runs"]:
        assert r["lr"] == doc["grid"][r["method"]]["chosen_lr"] == min(
            (v, float(k)) for k, v in r["lr_grid"].items() if v is not None)[1]  # the grid's best on validation
        assert r["parameters"] == doc["parameters"][r["method"]]
        assert all({"valid_ppl", "seconds", "cpu_seconds"} <= set(e) for e in r["history"])
        assert r["stopped_early"] or r["reached_max_epochs"]
        assert 0 < r["mix_weight"] < 1 and r["mix_test_ppl"] < max(r["test_ppl"], doc["kn5"]["test"])
        assert len(r["samples"]["texts"]) == 3 and all(len(t.split()) == 30 for t in r["samples"]["texts"])
        stream = r["method"] in ("rnn", "lstm", "gru")
        assert ("test_reset_ppl" in r) == stream
        assert ("gradient_through_time" in r) == (r["method"] in ("rnn", "lstm") and r["seed"] == 0)
    s = doc["summary"]["lstm"]["test_ppl"]
    assert s["n"] == 3 and s["mean"] == pytest.approx(np.mean(s["values"])) and s["std"] > 0


@pytest.mark.long  # every row of the quick target end to end (the module's one run of it)
def test_a_resumed_run_trains_nothing_again_and_gives_the_same_rows(quick):
    doc, out, runs = quick
    rows = doc["runs"]
    out.write_text(json.dumps({**doc, "runs": [r for r in rows if r["method"] != "rnn"]}))  # rnn's rows lost
    try:
        assert main([*QUICK, "--models", "rnn", "--out", str(out), "--runs-dir", str(runs)]) == 0  # runs resumed
        new = {r["run"]: r for r in json.loads(out.read_text())["runs"]}
    finally:
        out.write_text(json.dumps(doc))
    for r in (r for r in rows if r["method"] == "rnn"):
        assert new[r["run"]]["history"] == r["history"]  # no epoch trained again
        assert new[r["run"]]["test_ppl"] == r["test_ppl"] and new[r["run"]]["samples"] == r["samples"]


@pytest.mark.long  # the target end to end in two processes; the lock itself: test_skeleton.py
def test_two_processes_fill_one_file_and_keep_both_rows(tmp_path):
    out, runs = tmp_path / "r.json", tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-m", "nplm_edu", *QUICK, "--models", models, "--out", str(out),
                               "--runs-dir", str(runs)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for models in ("rnn", "nplm-dropout")]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()
    doc = json.loads(out.read_text())
    assert set(doc["summary"]) == {"rnn", "nplm-dropout"} and len(doc["runs"]) == 6


def test_the_learning_rate_is_chosen_without_reading_the_test_set(tmp_path):
    corpus = comparison_data(CorpusSpec(corpus="synthetic"), True, rec.QUICK_SLICE)
    other = replace(corpus, ids=corpus.ids.copy())
    a, b = corpus.bounds
    other.ids[b:] = np.random.default_rng(0).permutation(other.ids[b:])  # another test set
    protocol = rec.QUICK_PROTOCOL
    kn = {"valid": None, "test": None}  # never needed before the test is scored
    grids = [choose_lr(ROWS["lstm"].method(c, True, kn), c, protocol, tmp_path / name)["grid"]
             for c, name in ((corpus, "a"), (other, "b"))]
    assert grids[0] == grids[1]


def test_lstm_4_sees_only_the_last_four_words():
    rng = np.random.default_rng(0)
    V, t = 20, 12
    ids = rng.integers(0, V, 40)
    changed = ids.copy()
    changed[t - 5] = (ids[t - 5] + 1) % V  # the word five back from w_t
    windows = lambda s: (np.stack([s[i - 4:i] for i in range(4, len(s))]), s[4:])  # noqa: E731
    model = WindowRecurrent(WindowRecurrentConfig(V=V, m=6, h=5))
    lp, lp2 = (model.log_prob(*windows(s)) for s in (ids, changed))
    assert lp2[t - 4] == lp[t - 4]  # p(w_t) unchanged
    assert lp2[t - 5] != lp[t - 5]  # p(w_{t-1}) reads that word
    lstm = recurrent_model(RecurrentConfig(V=V, m=6, h=5))  # the stream LSTM, by contrast, reads it
    assert lstm.log_prob_stream(changed[:-1], changed[1:])[t - 1] != lstm.log_prob_stream(ids[:-1], ids[1:])[t - 1]


def test_the_window_lstm_fast_equals_the_reference_and_its_gradient_checks():
    rng = np.random.default_rng(1)
    cfg = WindowRecurrentConfig(V=11, m=5, h=4, dtype="float64")
    fast, ref = WindowRecurrent(cfg), WindowRecurrent(cfg, fast=False)
    X, y = rng.integers(0, 11, (7, 4)), rng.integers(0, 11, 7)
    mx, ma = (rng.random((7, 20)) > 0.3) / 0.7, (rng.random((7, 4)) > 0.3) / 0.7
    (lf, gf), (lr, gr) = fast.loss_and_grads(X, y, mx, ma), ref.loss_and_grads(X, y, mx, ma)
    assert lf == pytest.approx(lr, abs=1e-12) and all(np.allclose(gf[k], gr[k], atol=1e-12) for k in gf)
    assert np.allclose(fast.probs(X).sum(axis=1), 1.0)
    assert max(gradcheck(ref, X, y).values()) < 1e-6


def test_the_header_describes_every_row_the_target_can_train(tmp_path):
    """The file's header describes every row, the default ones and those trained only when named (what it
    is, its parameter count, as built); its settings are the keys a writer compares."""
    corpus = comparison_data(CorpusSpec(corpus="synthetic"), True, rec.QUICK_SLICE)
    kn = kn5_log_probs(corpus, tmp_path)
    doc = rec.header(corpus, kn, True)
    assert rec.NAMED_ONLY == ("char-lstm", "transformer-4", "transformer-32")  # ROWS less the default ORDER
    assert list(doc["rows"]) == [*rec.ORDER, *rec.NAMED_ONLY] and set(doc["rows"]) == set(ROWS)
    assert list(doc["parameters"]) == [*rec.ORDER, *rec.NAMED_ONLY, "nplm-dropout/lstm"]
    assert set(doc["descriptions"]) == set(ROWS)
    for name in ("char-lstm", "transformer-4"):
        row = ROWS[name]
        built = row.make(corpus.V, 0, {**sizes(True), "words": corpus.vocab.words}).num_params()
        assert doc["descriptions"][name] == {"what": row.what, "parameters": built} and doc["parameters"][name] == built
    assert set(header_settings(doc)) == {"corpus", "V", "quick", "tokens", "slice", "rule", "kn5", "samples"}


def test_the_nplm_control_has_about_the_lstms_parameters_on_brown():
    counts = parameter_counts(17_907, names=("lstm", "nplm-dropout"))  # the paper's |V| on Brown
    assert abs(counts["nplm-dropout"] / counts["lstm"] - 1) < 0.2


def test_samples_are_fixed_by_their_seeds():
    corpus = load_corpus("synthetic")
    model = recurrent_model(RecurrentConfig(V=corpus.V, m=6, h=5))
    a, b = seeded_samples(model, corpus), seeded_samples(model, corpus)
    assert a == b and len(set(a["texts"])) == 3


@pytest.mark.parametrize("extra, message", [(["--models", "lstm,xyz"], "--models takes a comma-separated list"),
                                            (["--seeds", "0,7"], "--seeds must be some of the protocol's seeds 0,1,2")])
def test_bad_rows_or_seeds_are_one_line(tmp_path, capsys, extra, message):
    assert main([*QUICK, *extra, "--out", str(tmp_path / "r.json"), "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_the_character_aware_row_refuses_before_the_lstm_seeds_it_is_compared_with(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main([*QUICK, "--models", "char-lstm", "--out", str(out), "--runs-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--models char-lstm is compared with the lstm row" in err and "seed 0, 1, 2" in err
    assert "train lstm's seeds first" in err and len(err.strip().splitlines()) == 1 and not out.exists()
    out.write_text(json.dumps({"target": "recurrent", "runs": [{"method": "lstm", "seed": s} for s in (0, 1)]}))
    with pytest.raises(UserError, match="none for seed 2: train"):
        needs_word_level(["char-lstm"], out, (0, 1, 2))
    needs_word_level(["char-lstm"], out, (0, 1))  # its seeds' lstm rows are there
    needs_word_level(["lstm", "char-lstm"], tmp_path / "none.json", (0,))  # lstm trains first in this run


def test_the_transformer_rows_train_on_blocks_and_are_scored_from_their_window(tmp_path):
    from nplm_edu.training.blocks import BlockBackend

    corpus = load_corpus("synthetic", synthetic_tokens=3000, seed=3)
    kn = {s: np.zeros(len(corpus.split(s))) for s in ("valid", "test")}
    for n_ctx in (4, 32):
        model, cfg, backend = ROWS[f"transformer-{n_ctx}"].method(corpus, True, kn).build(1.0, 0)
        assert model.config.n_ctx == n_ctx and isinstance(backend, BlockBackend) and backend.clip == 0.25
        assert cfg.batch == max(1, 8 * 10 // n_ctx) and cfg.dropout_x == cfg.dropout_a == 0 and cfg.tie
    out = tmp_path / "r.json"
    assert main([*QUICK, "--models", "transformer-4", "--seeds", "0", "--out", str(out),
                 "--runs-dir", str(tmp_path / "runs")]) == 0
    (row,) = json.loads(out.read_text())["runs"]
    assert row["method"] == "transformer-4" and row["parameters"] > 0 and row["test_ppl"] > 1
    assert len(row["samples"]["texts"]) == 3 and all(len(t.split()) == 30 for t in row["samples"]["texts"])
