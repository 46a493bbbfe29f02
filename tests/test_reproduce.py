"""``reproduce ngrams`` end to end on the synthetic corpus (seconds), into a temporary folder."""

import argparse
import json
import math

import pytest

from nplm_edu.errors import UserError
from nplm_edu.reproduce import TARGETS, add_cli


def run(argv):
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_reproduce_ngrams_synthetic(tmp_path):
    out = tmp_path / "ngrams.json"
    assert run(["reproduce", "ngrams", "--corpus", "synthetic", "--classes", "5,8", "--passes", "2",
                "--out", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert doc["corpus"] == "synthetic" and doc["commit"] and doc["command"].startswith("python -m nplm_edu")
    rows = {(r["model"], r["order"], r["classes"]): r for r in doc["rows"]}
    assert set(rows) == {("interp", 3, None), ("kn", 3, None), ("kn", 4, None), ("kn", 5, None),
                         ("class", 3, 5), ("class", 3, 8), ("class", 4, 5), ("class", 5, 5)}
    for r in rows.values():
        assert math.isfinite(r["valid"]) and 1 < r["test"] < doc["V"] and r["seconds"] >= 0
        assert r["paper_test"] is None  # the paper's numbers are for Brown only
    em = rows[("interp", 3, None)]["em_valid_log_likelihood"]
    assert all(b >= a for a, b in zip(em, em[1:]))


def test_unknown_target():
    assert "ngrams" in TARGETS
    with pytest.raises(UserError):
        run(["reproduce", "nothing", "--corpus", "synthetic"])
