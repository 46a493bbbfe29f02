"""Samples for a Table 1 row from a rerun of its command: adopted as the row's own network's only when
every epoch of the rerun matches; else kept with the rerun's own perplexities."""

import json

import pytest

from nplm_edu.errors import UserError
from nplm_edu.experiments.table1_samples import adopt_samples, history_difference
from test_reproduce import table1  # a tiny quick run of reproduce table1


def test_a_rerun_of_the_same_command_gives_the_row_its_networks_samples(tmp_path):
    args = ("--rows", "MLP9", "--epochs", "2")
    old = table1(tmp_path, *args, out="old.json", runs="runs_old")
    drawn = old["rows"]["MLP9"].pop("samples")  # a row written before rows kept samples
    (tmp_path / "old.json").write_text(json.dumps(old, indent=1))
    table1(tmp_path, *args, out="new.json", runs="runs_new")  # trains the same network again
    samples = adopt_samples(tmp_path / "old.json", tmp_path / "new.json", "MLP9")
    row = json.loads((tmp_path / "old.json").read_text())["rows"]["MLP9"]
    assert row["samples"] == samples and samples["same_network"] is True and "rerun" not in samples
    assert {k: samples[k] for k in ("prompt", "seeds", "texts")} == drawn  # what the row's network drew
    assert samples["drawn_by"]["command_explicit"] == row["command_explicit"]


def test_a_rerun_that_trained_another_network_is_marked_so(tmp_path):
    args = ("--rows", "MLP9", "--epochs", "2")
    table1(tmp_path, *args, out="old.json", runs="runs_old")
    new = table1(tmp_path, *args, out="new.json", runs="runs_new")
    new["rows"]["MLP9"]["history"][1]["valid_ppl"] *= 1.01  # as if the rerun's arithmetic had drifted
    (tmp_path / "new.json").write_text(json.dumps(new, indent=1))
    samples = adopt_samples(tmp_path / "old.json", tmp_path / "new.json", "MLP9")
    assert samples["same_network"] is False
    assert samples["rerun"]["history_largest_relative_difference"] == pytest.approx(0.01 / 1.01, rel=1e-6)
    assert samples["rerun"]["test"] == new["rows"]["MLP9"]["test"]


def test_another_command_or_no_samples_is_refused(tmp_path):
    table1(tmp_path, "--rows", "MLP9", "--epochs", "2", out="old.json", runs="runs_old")
    table1(tmp_path, "--rows", "MLP9", "--epochs", "1", out="new.json", runs="runs_new")
    with pytest.raises(UserError, match="another command"):
        adopt_samples(tmp_path / "old.json", tmp_path / "new.json", "MLP9")
    with pytest.raises(UserError, match="must be a row of both"):
        adopt_samples(tmp_path / "old.json", tmp_path / "new.json", "MLP1")


def test_history_difference():
    a = [{"epoch": 1, "updates": 5, "lr": 0.5, "train_ppl": 10.0, "valid_ppl": 12.0}]
    assert history_difference(a, [dict(a[0])]) == 0.0
    assert history_difference(a, [dict(a[0], train_ppl=10.5)]) == pytest.approx(0.5 / 10.5)
    assert history_difference(a, a + a) == float("inf")


def test_chapter_8_prints_the_samples_its_results_file_holds():
    import html
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    row = json.loads((root / "data/results/table1.json").read_text())["rows"]["MLP9"]
    nb = json.loads((root / "book/08_training.ipynb").read_text())
    out = "".join("".join(o.get("data", {}).get("text/html", "")) for c in nb["cells"] if c["cell_type"] == "code"
                  for o in c.get("outputs", []))
    if "samples" in row:
        assert all(html.escape(t) in out for t in row["samples"]["texts"])
    else:
        assert "holds no samples of it" in out
