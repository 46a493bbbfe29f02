"""``reproduce lr-sweep`` end to end on a tiny synthetic corpus (seconds): the JSON, each run
recomputed independently, a diverging rate recorded instead of stopping the sweep, bad input."""

import argparse
import json
import math

import pytest

from nplm_edu.cli.reproduce import add_cli
from nplm_edu.errors import UserError

# 8000 tokens -> 6400 train / 800 valid / 800 test, |V| = 47; 50 updates per epoch at K = 128
TINY = ["--corpus", "synthetic", "--synthetic-tokens", "8000", "--quiet"]


def run(argv):
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["reproduce", "lr-sweep", *argv])
    return args.func(args)


def sweep(tmp_path, *extra):
    out = tmp_path / "sweep.json"
    assert run([*TINY, "--out", str(out), *extra]) == 0
    return json.loads(out.read_text())


def test_quick_sweep_schema_and_runs_recomputed(tmp_path):
    from nplm_edu.data.corpus import load_corpus
    from nplm_edu.models.nplm import NPLMConfig
    from nplm_edu.numerics.fused import FusedNPLM
    from nplm_edu.training.trainer import TrainConfig, train

    doc = sweep(tmp_path, "--quick", "--row", "MLP7", "--lrs", "1,0.1,1", "--epochs", "5")
    assert doc["quick"] and doc["row"] == "MLP7" and doc["corpus"] == "synthetic"
    assert doc["lrs"] == [0.1, 1.0] and [r["lr"] for r in doc["runs"]] == [0.1, 1.0]  # sorted, no repeats
    assert doc["tokens"] == {"train": 6400, "valid": 800} and "test" not in json.dumps(doc["runs"])
    assert doc["train"] == {"epochs": 2, "batch": 128, "decay_rate": 1e-4, "weight_decay": 1e-4, "seed": 0}  # quick: 2
    assert doc["commit"] and doc["command"].startswith("python -m nplm_edu") and "wall_seconds" in doc
    corpus = load_corpus("synthetic", synthetic_tokens=8000)
    for r in doc["runs"]:
        assert not r["diverged"] and [e["epoch"] for e in r["history"]] == [1, 2]
        assert [e["updates"] for e in r["history"]] == [50, 100]  # no early stopping: every epoch runs
        assert r["best_valid_ppl"] == min(e["valid_ppl"] for e in r["history"])
        assert 1 < r["final_valid_ppl"] < doc["V"]
        # the same run by hand: same initial parameters (seed), same order, the one rate changed
        model = FusedNPLM(NPLMConfig(V=corpus.V, n=3, h=50, m=30, direct=True, seed=0))
        h = train(model, corpus, TrainConfig(epochs=2, batch=128, lr=r["lr"], decay_rate=1e-4, weight_decay=1e-4,
                                             seed=0, patience=2), quiet=True)
        assert [e["valid_ppl"] for e in r["history"]] == [round(e["valid_ppl"], 3) for e in h["epochs"]]
    # the two rates give different curves, and the best is the lower best validation perplexity
    a, b = doc["runs"]
    assert a["history"] != b["history"]
    assert doc["best_lr"] == min(doc["runs"], key=lambda r: r["best_valid_ppl"])["lr"]


def test_a_diverging_rate_is_recorded_and_the_sweep_goes_on(tmp_path):
    doc = sweep(tmp_path, "--quick", "--row", "MLP7", "--lrs", "0.5,1e6", "--epochs", "1")
    ok, bad = doc["runs"]
    assert not ok["diverged"] and math.isfinite(ok["best_valid_ppl"])
    assert bad["diverged"] and bad["history"] == [] and "became" in bad["message"]
    assert doc["best_lr"] == 0.5


@pytest.mark.parametrize("extra, says", [(["--lrs", "0.1,fast"], "comma-separated numbers"),
                                         (["--lrs", "0.3,-1"], "positive finite"),
                                         (["--lrs", ","], "at least one"),
                                         (["--row", "MLP10"], "--row names MLP10, which is MLP9 mixed"),
                                         (["--row", "MLP1,MLP9"], "--row names the one network"),
                                         (["--epochs", "0"], "epochs must be at least 1")])
def test_bad_input_is_one_clear_error(tmp_path, capsys, extra, says):
    from nplm_edu.cli import main

    out = tmp_path / "x.json"
    assert main(["reproduce", "lr-sweep", *TINY, "--quick", "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and err.count("\n") == 1, err
    assert not out.exists()


def test_parse_lrs():
    from nplm_edu.experiments.lr_sweep import parse_lrs

    assert parse_lrs("3, 1,0.3,0.1") == [0.1, 0.3, 1.0, 3.0]
    with pytest.raises(UserError):
        parse_lrs("nan")
