"""``reproduce recurrent --quick`` end to end on the synthetic corpus (seconds): the JSON's rows, numbers
recomputed from the checkpoint, resuming, and bad input in one line."""

import json

import numpy as np
import pytest

from nplm_edu.analysis.mixture import batched_log_prob, em_weight, mixed_log_prob
from nplm_edu.cli import main
from nplm_edu.data.corpus import load_corpus
from nplm_edu.models.ngram import KneserNey
from nplm_edu.training.stream import recurrent_from_checkpoint, split_log_probs

TINY = ["reproduce", "recurrent", "--corpus", "synthetic", "--synthetic-tokens", "8000", "--quick", "--quiet",
        "--lr", "1", "--clip", "1"]


def ppl(lp):
    return float(np.exp(-np.mean(lp)))


def test_quick_rows_and_numbers(tmp_path):
    out, runs = tmp_path / "r.json", tmp_path / "runs"
    assert main([*TINY, "--out", str(out), "--runs-dir", str(runs)]) == 0
    doc = json.loads(out.read_text())
    assert doc["complete"] and doc["commit"] and doc["command"].startswith("python -m nplm_edu")
    rows = {r["model"]: r for r in doc["rows"]}
    assert list(rows) == ["rnn", "lstm"]
    corpus = load_corpus("synthetic", synthetic_tokens=8000)
    kn5 = KneserNey(5, corpus.V).fit(corpus.train)
    kv, kt = (batched_log_prob(kn5, *corpus.windows(s, 5)) for s in ("valid", "test"))
    assert doc["kn5"]["test_ref"] == pytest.approx(ppl(kt), abs=2e-3)
    for cell, r in rows.items():
        assert r["hidden"] == 32 and r["epochs"] == 2 and r["best_epoch"] in (1, 2) and len(r["history"]) == 2
        assert r["tokens_per_second"] > 0 and r["wall_seconds"] > 0 and r["settings"]["stream"]["T"] == 10
        model = recurrent_from_checkpoint(runs / "r" / cell / "checkpoint.npz")
        lv, lt = split_log_probs(model, corpus, "valid"), split_log_probs(model, corpus, "test")
        assert r["valid_ppl"] == pytest.approx(ppl(lv), abs=2e-3) and r["test_ppl"] == pytest.approx(ppl(lt), abs=2e-3)
        assert r["test_over_kn5"] == pytest.approx(r["test_ppl"] / doc["kn5"]["test_ref"], abs=1e-3)
        lam = em_weight(lv, kv)[0]  # the mixture refitted here
        assert r["mix_weight"] == pytest.approx(lam, abs=1e-4)
        assert r["mix_test_ppl"] == pytest.approx(ppl(mixed_log_prob(lt, kt, lam)), abs=2e-3)
        assert r["mix_valid_ppl"] <= min(r["valid_ppl"], doc["kn5"]["valid"]) + 1e-3
        assert 0 <= r["mix_weight"] <= 1 and r["test_reset_ppl"] > 1
        assert sum(b["tokens"] for b in r["test_by_distance"]) == len(corpus.test)
    # rerunning resumes: nothing more to train, the same numbers
    assert main([*TINY, "--out", str(out), "--runs-dir", str(runs)]) == 0
    again = {r["model"]: r for r in json.loads(out.read_text())["rows"]}
    for cell in rows:
        assert again[cell]["resumed"] and again[cell]["test_ppl"] == rows[cell]["test_ppl"]


def test_models_run_by_separate_commands_share_the_file(tmp_path):
    out, runs = tmp_path / "r.json", tmp_path / "runs"
    assert main([*TINY, "--out", str(out), "--runs-dir", str(runs), "--models", "rnn"]) == 0
    first = json.loads(out.read_text())
    assert [r["model"] for r in first["rows"]] == ["rnn"] and not first["complete"]
    assert main([*TINY, "--out", str(out), "--runs-dir", str(runs), "--models", "lstm"]) == 0
    both = json.loads(out.read_text())
    assert [r["model"] for r in both["rows"]] == ["rnn", "lstm"] and both["complete"]
    assert both["rows"][0] == first["rows"][0] and all(r["commit"] and r["command"] for r in both["rows"])


@pytest.mark.parametrize("extra,message", [(["--T", "0"], "T (time steps per batch) must be"),
                                           (["--batch", "0"], "batch must be at least 1"),
                                           (["--clip", "0"], "clip norm must be a finite number > 0"),
                                           (["--clip", "-1"], "clip norm must be a finite number > 0"),
                                           (["--models", "gru"], "--models takes")])
def test_bad_input_is_one_line(tmp_path, capsys, extra, message):
    assert main([*TINY, "--out", str(tmp_path / "r.json"), "--runs-dir", str(tmp_path / "runs"), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


def test_other_settings_refuse_to_resume(tmp_path, capsys):
    args = ["reproduce", "recurrent", "--corpus", "synthetic", "--synthetic-tokens", "8000", "--quiet", "--h", "8",
            "--m", "8", "--batch", "4", "--T", "5", "--epochs", "1", "--models", "rnn", "--lr", "1", "--clip", "1",
            "--out", str(tmp_path / "r.json"), "--runs-dir", str(tmp_path / "runs")]
    assert main(args) == 0
    assert main([*args, "--T", "6"]) == 2
    assert "holds a run with other settings" in capsys.readouterr().err


def test_a_row_written_by_another_process_meanwhile_is_kept(tmp_path, monkeypatch):
    """Two processes filling one results file (--models lstm beside --models rnn) keep both rows."""
    import nplm_edu.experiments.recurrent as rec

    out, runs = tmp_path / "r.json", tmp_path / "runs"
    args = [*TINY, "--h", "8", "--m", "8", "--batch", "4", "--T", "5", "--epochs", "1", "--out", str(out),
            "--runs-dir", str(runs)]
    assert main([*args, "--models", "rnn"]) == 0
    rnn = json.loads(out.read_text())
    out.unlink()  # the lstm process starts before the rnn process has written its row ...
    train = rec.train

    def train_while_another_writes(*a, **kw):
        history = train(*a, **kw)
        header = {k: v for k, v in rnn.items() if k != "rows"}
        rec.merge_results(out, "recurrent", header, {"rnn": rnn["rows"][0]}, 0.0, key="model")  # ... written now
        return history

    monkeypatch.setattr(rec, "train", train_while_another_writes)
    assert main([*args, "--models", "lstm"]) == 0
    assert sorted(r["model"] for r in json.loads(out.read_text())["rows"]) == ["lstm", "rnn"]
