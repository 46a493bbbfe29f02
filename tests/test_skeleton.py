"""experiments/skeleton.py: results merged row by row under one lock, run folders with one writer,
another target's file refused, run folders per results file, outputs never over inputs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nplm_edu.data.locks import one_writer
from nplm_edu.errors import UserError
from nplm_edu.experiments.skeleton import (check_not_over, merge_results, read_results, results_kind,
                                           rounded_history, run_folder, runs_for)

ROOT = Path(__file__).resolve().parents[1]
KINDS = {"table1.json": "table1", "table1_quick.json": "table1", "ngrams.json": "ngrams", "beyond.json": "beyond",
         "recurrent_one_seed.json": "recurrent", "output_layers.json": "output-layers", "lr_sweep.json": "lr-sweep",
         "minibatch.json": "minibatch", "central_claim.json": "central-claim", "train_brown_slice.json": "train"}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_committed_results_file_is_read_as_its_targets(name):
    path = ROOT / "data" / "results" / name
    assert results_kind(json.loads(path.read_text())) == KINDS[name]
    assert read_results(path, KINDS[name]) is not None


def test_another_targets_file_or_a_corrupt_one_is_refused(tmp_path):
    with pytest.raises(UserError, match="is a table1 results file, not recurrent's"):
        read_results(ROOT / "data" / "results" / "table1.json", "recurrent")
    bad = tmp_path / "x.json"
    bad.write_text('{"rows": [')
    with pytest.raises(UserError, match="not a ngrams results file"):
        read_results(bad, "ngrams")
    bad.write_text('{"some": "other tool"}')
    with pytest.raises(UserError, match="not a results file of ours"):
        read_results(bad, "ngrams")


def test_merge_keeps_rows_of_the_same_settings_and_drops_others(tmp_path):
    out = tmp_path / "r.json"
    head = {"corpus": "c", "V": 5, "tokens": 10, "quick": True}
    merge_results(out, "recurrent", {**head, "kn5": {}}, {"rnn": {"model": "rnn", "x": 1}}, 0.0, key="model")
    doc = merge_results(out, "recurrent", {**head, "kn5": {}}, {"lstm": {"model": "lstm", "x": 2}}, 0.0, key="model",
                        order=["lstm", "rnn"])
    assert [r["model"] for r in doc["rows"]] == ["lstm", "rnn"] and json.loads(out.read_text()) == doc
    assert doc["target"] == "recurrent" and doc["commit"]  # the provenance block of write_results
    before = out.read_text()
    doc = merge_results(out, "recurrent", {**head, "V": 6, "kn5": {}}, {"rnn": {"model": "rnn"}}, 0.0, key="model")
    assert [r["model"] for r in doc["rows"]] == ["rnn"]  # other settings: the file starts again
    assert (tmp_path / "r.replaced-1.json").read_text() == before  # and the old one is kept whole beside it
    merge_results(out, "recurrent", {**head, "V": 7, "kn5": {}}, {"rnn": {"model": "rnn"}}, 0.0, key="model")
    assert (tmp_path / "r.replaced-2.json").exists() and (tmp_path / "r.replaced-1.json").read_text() == before


def test_descriptions_are_merged_with_the_files_never_compared(tmp_path):
    out = tmp_path / "r.json"
    head = {"corpus": "c", "V": 5, "tokens": 10, "quick": True}
    first = {**head, "what": {"rnn": "an RNN", "lstm": "old words"}, "note": "first"}
    merge_results(out, "recurrent", {**first, "kn5": {}}, {"rnn": {"model": "rnn"}}, 0.0, key="model",
                  merged=("what", "note", "more"))
    second = {**head, "kn5": {}, "what": {"lstm": "an LSTM", "gru": "a GRU"}, "note": "second"}
    doc = merge_results(out, "recurrent", second, {"lstm": {"model": "lstm"}}, 0.0, key="model",
                        merged=("what", "note", "more"))
    assert doc["what"] == {"rnn": "an RNN", "lstm": "an LSTM", "gru": "a GRU"}  # theirs kept, the writer's own win
    assert doc["note"] == "second" and "more" not in doc and len(doc["rows"]) == 2
    doc = merge_results(out, "recurrent", {**head, "kn5": {}}, {}, 0.0, key="model", merged=("what",))
    assert doc["what"]["rnn"] == "an RNN"  # a writer describing nothing keeps the file's descriptions
    doc = merge_results(out, "recurrent", {**head, "V": 6, "kn5": {}, "what": {"rnn": "x"}}, {}, 0.0, key="model",
                        merged=("what",))
    assert doc["what"] == {"rnn": "x"} and doc["rows"] == []  # a file of other settings: nothing of it kept


MERGER = """
import sys
from nplm_edu.experiments.skeleton import merge_results
out, who = sys.argv[1], sys.argv[2]
for i in range(15):
    merge_results(out, "table1", {"settings": {"a": 1}}, {f"{who}{i}": {"row": who, "i": i}}, 0.0, same=("settings",))
"""


def test_two_processes_filling_one_file_keep_every_row(tmp_path):
    out = tmp_path / "t.json"
    procs = [subprocess.Popen([sys.executable, "-c", MERGER, str(out), who], cwd=ROOT) for who in ("A", "B")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    rows = json.loads(out.read_text())["rows"]
    assert sorted(rows) == sorted(f"{w}{i}" for w in "AB" for i in range(15))


def test_run_folder_one_writer_and_an_unreadable_settings_file(tmp_path):
    run = tmp_path / "MLP1"
    with run_folder(run, {"a": 1}) as resumed:
        assert not resumed and json.loads((run / "run_config.json").read_text()) == {"a": 1}
        with pytest.raises(UserError, match="being written \\(a training run\\) by process"):
            with run_folder(run, {"a": 1}):
                pass
        (run / "checkpoint.npz").write_bytes(b"x")
    (run / "run_config.json").write_text("{not json")
    with pytest.raises(UserError, match="holds a run with an unreadable run_config.json: `force` trains from scratch"):
        with run_folder(run, {"a": 1}):
            pass
    with run_folder(run, {"a": 1}, force=True) as resumed:  # --force starts afresh
        assert not resumed and not (run / "checkpoint.npz").exists()


def test_results_files_of_one_name_in_two_folders_never_share_runs(tmp_path):
    a = runs_for(str(tmp_path / "runs"), tmp_path / "a" / "ol.json")
    b = runs_for(str(tmp_path / "runs"), tmp_path / "b" / "ol.json")
    assert a == tmp_path / "runs" / "ol" and b != a and b.name.startswith("ol-")
    assert runs_for(str(tmp_path / "runs"), tmp_path / "a" / "ol.json") == a  # the same file: the same runs
    assert runs_for(str(tmp_path / "runs"), tmp_path / "b" / "ol.json") == b


def test_no_output_over_an_input(tmp_path):
    f = tmp_path / "corpus.txt"
    with pytest.raises(UserError, match="--json .* is --corpus"):
        check_not_over({"--json": f}, {"--corpus": f})
    with pytest.raises(UserError, match="--results .* lies inside --out"):
        check_not_over({"--results": tmp_path / "run" / "checkpoint.npz"}, {"--out": tmp_path / "run"})
    check_not_over({"--json": tmp_path / "other.json", "--out": None}, {"--corpus": f, "--class-file": None})


def test_rounded_history():
    assert rounded_history([{"epoch": 1, "valid_ppl": 12.345678, "seconds": 0.1}]) == [
        {"epoch": 1, "valid_ppl": 12.3457, "seconds": 0.1}]
