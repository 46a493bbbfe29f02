"""``reproduce ngrams`` and ``reproduce table1 --quick`` end to end on the synthetic corpus (seconds),
into temporary folders: the JSON schema, numbers recomputed independently, resuming, bad input."""

import argparse
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nplm_edu.cli.reproduce import TARGETS, add_cli
from nplm_edu.errors import UserError

# a tiny synthetic corpus: 8000 tokens -> 6400 train / 800 valid / 800 test, |V| = 47; 50 updates per epoch
TINY = ["--corpus", "synthetic", "--synthetic-tokens", "8000", "--quick", "--quiet"]


def run_parser():
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command"))
    return parser


def run(argv):
    args = run_parser().parse_args(argv)
    return args.func(args)


def table1(tmp_path, *extra, out="t1.json", runs="runs", quick=True):
    tiny = TINY if quick else [a for a in TINY if a != "--quick"]
    assert run(["reproduce", "table1", *tiny, "--out", str(tmp_path / out), "--runs-dir", str(tmp_path / runs),
                *extra]) == 0
    return json.loads((tmp_path / out).read_text())


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


@pytest.mark.parametrize("argv, says", [(["nothing", "--corpus", "synthetic"], "invalid choice: 'nothing'"),
                                        (["ngrams", "--lr", "3"], "error: unrecognized arguments: --lr 3")])
def test_unknown_target_or_option_is_a_usage_error(argv, says):
    """Each target has its own subcommand with only its own options: another target's option (the
    n-gram rows have no learning rate) is refused by argparse, status 2, before any work."""
    assert "ngrams" in TARGETS and "table1" in TARGETS
    proc = subprocess.run([sys.executable, "-m", "nplm_edu", "reproduce", *argv], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], timeout=60)
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""


def _help_entries(target: str, capsys) -> dict[str, str]:
    """`reproduce TARGET --help` as {flag: its help text, whitespace normalised}."""
    with pytest.raises(SystemExit):
        run(["reproduce", target, "--help"])
    entries, flag = {}, None
    for line in capsys.readouterr().out.split("options:", 1)[1].splitlines():
        if line.startswith("  -"):  # a new option; its help may start on this line or the next
            flag = line.split()[0].rstrip(",")
            entries[flag] = line
        elif flag is not None:
            entries[flag] += " " + line
    return {f: " ".join(text.split()) for f, text in entries.items()}


def test_each_target_offers_its_own_options_with_its_dataclass_defaults(capsys):
    """The defaults `--help` shows, and the values parsed when an option is not given, are the
    experiment's dataclass defaults; and no target offers another's options."""
    from nplm_edu.experiments import (beyond, central_claim, lr_sweep, minibatch, ngrams, output_layers as ol, recurrent,
                                      table1 as t1)

    def fields(instance, names=None):
        return {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)
                if names is None or f.name in names}

    own = {"ngrams": fields(ngrams.NgramsOptions()),
           "table1": {**fields(t1.TRAIN, t1.TRAIN_OPTIONS), **fields(t1.Table1Options())},
           "minibatch": fields(minibatch.MinibatchOptions()),
           "beyond": {**fields(beyond.NETWORK, beyond.NETWORK_OPTIONS), **fields(beyond.TRAIN, beyond.TRAIN_OPTIONS),
                      **fields(beyond.BeyondOptions())},
           "lr-sweep": fields(lr_sweep.LrSweepOptions()),
           "output-layers": fields(ol.OutputLayersOptions()),  # its training settings are the protocol's and Table 1's
           "recurrent": fields(recurrent.RecurrentOptions(), recurrent.CLI_OPTIONS),
           "central-claim": fields(central_claim.CentralClaimOptions())}
    common = {"-h", "--corpus", "--train-size", "--valid-size", "--test-size", "--min-count", "--corpus-seed", "--synthetic-tokens",
              "--out", "--quiet"}
    assert set(own) == set(TARGETS)
    for target, defaults in own.items():
        entries = _help_entries(target, capsys)
        flags = {"--" + name.replace("_", "-"): name for name in defaults}
        shared = {"-h", "--out", "--quiet"} if target == "central-claim" else common  # its corpora are fixed
        assert set(entries) == shared | set(flags), target
        args = vars(run_parser().parse_args(["reproduce", target]))
        for flag, name in flags.items():
            if defaults[name] is None:  # the help says what leaving it out means, once, never "(default None)"
                assert "(default" in entries[flag] and "(default None)" not in entries[flag], (target, flag)
                assert entries[flag].count("(default") == 1, (target, flag, entries[flag])
            else:
                assert f"(default {defaults[name]})" in entries[flag], (target, flag, entries[flag])
            assert args[name] == defaults[name] and type(args[name]) is type(defaults[name]), (target, name)


def test_table1_quick_schema_and_numbers(tmp_path):
    from nplm_edu.data.corpus import load_corpus
    from nplm_edu.analysis.sampling import seeded_samples
    from nplm_edu.models.ngram import InterpolatedTrigram
    from nplm_edu.training.checkpoint import model_from_checkpoint

    doc = table1(tmp_path, "--epochs", "2", "--lr", "0.5")
    # the table's ten rows, then MLP1 without direct connections, trained beside them (no mixed row)
    assert list(doc["rows"]) == [f"MLP{i}" for i in range(1, 11)] + ["MLP1-ND"]
    nd = doc["rows"]["MLP1-ND"]
    assert (nd["n"], nd["h"], nd["m"], nd["direct"], nd["mix"]) == (5, 50, 60, False, False)
    assert nd["model"]["direct"] is False and doc["rows"]["MLP1"]["model"]["direct"] is True
    assert nd["epochs_run"] == 2 and "--rows MLP1-ND" in nd["command_explicit"]
    assert doc["quick"] and doc["corpus"] == "synthetic" and doc["tokens"] == {"train": 6400, "valid": 800, "test": 800}
    V = doc["V"]
    assert 1 < doc["trigram"]["valid"] < V
    corpus = load_corpus("synthetic", synthetic_tokens=8000)
    tri = InterpolatedTrigram(corpus.V, verbose=False).fit(corpus.train, valid=corpus.windows("valid", 3), iterations=5)
    for name, (n, h, m, direct) in {"MLP1": (5, 50, 60, True), "MLP3": (5, 0, 60, True), "MLP5": (5, 50, 30, True),
                                    "MLP7": (3, 50, 30, True), "MLP9": (5, 100, 30, False)}.items():
        r = doc["rows"][name]
        assert (r["n"], r["h"], r["m"], r["direct"], r["mix"]) == (n, h, m, direct, False)
        assert r["model"]["V"] == V and r["train_settings"]["lr"] == 0.5 and r["train_settings"]["epochs"] == 2
        assert r["epochs_run"] == len(r["history"]) == 2 and r["updates"] == 2 * 50  # ceil(6400 / 128) per epoch
        assert r["commit"] and r["machine"] and r["command"].startswith("python -m nplm_edu")
        assert "--rows " + name in r["command_explicit"] and r["seconds_training"] > 0
        assert r["paper"] == {"train": None, "valid": None, "test": None}  # the paper's numbers: full Brown only
        for k in ("train", "valid", "test"):
            assert 1 < r[k] < V, (name, k, r[k])
        # the recorded validation perplexity is the best epoch's (early stopping keeps its parameters)
        assert r["valid"] == pytest.approx(min(e["valid_ppl"] for e in r["history"]), rel=1e-4)
        h = r["history"]
        assert r["best_epoch"] == 1 + min(range(len(h)), key=lambda i: h[i]["valid_ppl"])  # the trainer's, as recorded
        # recompute from the checkpoint: network and trigram log-probs, then the 0.5 mix by hand
        model = model_from_checkpoint(tmp_path / "runs" / "t1" / name / "checkpoint.npz")
        tc, tt = corpus.windows("test", n)
        la = model.log_prob(tc, tt).astype(np.float64)
        lb = tri.log_prob(tc[:, -2:], tt)
        assert r["test"] == pytest.approx(math.exp(-la.mean()), abs=2e-3)
        mix = math.exp(-np.mean(np.log(0.5 * np.exp(la) + 0.5 * np.exp(lb))))
        assert r["mixtures"]["0.5"]["test"] == pytest.approx(mix, abs=2e-3)
        # the stored samples: the trained network's, drawn again from its checkpoint with the recorded seeds
        sm = r["samples"]
        assert sm["seeds"] == [0, 1, 2] and [len(t.split()) for t in sm["texts"]] == [30, 30, 30]
        assert sm == seeded_samples(model, corpus)
        even = doc["rows"][f"MLP{int(name[3:]) + 1}"]
        assert even["mix"] and even["network"] == name and even["mix_weight"] == 0.5
        assert (even["valid"], even["test"]) == (r["mixtures"]["0.5"]["valid"], r["mixtures"]["0.5"]["test"])
        # EM starts at 0.5 and never lowers the validation likelihood
        mx = r["mixtures"]
        assert 0 <= mx["em"]["weight"] <= 1 and mx["em"]["valid"] <= mx["0.5"]["valid"] + 1e-3
        assert mx["per_bin"]["valid"] <= mx["0.5"]["valid"] + 1e-3
        # frequency bins: they partition the test tokens, and their means add up to the perplexities
        bins = r["test_by_frequency"]
        assert [b["bin"] for b in bins] == ["unk", "0-3", "4-10", "11-100", "101-1000", "1001-10000", ">10000"]
        assert sum(b["tokens"] for b in bins) == 800
        full = [b for b in bins if b["tokens"]]
        for who, ppl in (("mlp", r["test"]), ("trigram", doc["trigram"]["test"]), ("mix", mx["0.5"]["test"])):
            mean = sum(b["tokens"] * b[f"mean_log_prob_{who}"] for b in full) / 800
            assert math.exp(-mean) == pytest.approx(ppl, rel=1e-3)
        counts = np.bincount(corpus.train, minlength=V)[tt]
        assert [b["tokens"] for b in bins][3:5] == [int(np.sum((counts >= 11) & (counts <= 100))),
                                                   int(np.sum((counts >= 101) & (counts <= 1000)))]
    assert longest_list(doc) < 50  # aggregates only: nothing per token (800 test tokens) in the file


def longest_list(x) -> int:
    if isinstance(x, dict):
        return max((longest_list(v) for v in x.values()), default=0)
    if isinstance(x, list):
        return max([len(x)] + [longest_list(v) for v in x])
    return 0


def test_table1_resumes_row_by_row(tmp_path):
    first = table1(tmp_path, "--rows", "MLP7", "--epochs", "1")["rows"]
    assert set(first) == {"MLP7", "MLP8"}
    second = table1(tmp_path, "--rows", "MLP7,MLP3", "--epochs", "1")["rows"]
    assert set(second) == {"MLP3", "MLP4", "MLP7", "MLP8"}
    assert second["MLP7"] == first["MLP7"]  # not retrained: same wall time, commit, finish time
    # more epochs: the row continues from its checkpoint instead of starting again
    third = table1(tmp_path, "--rows", "MLP7", "--epochs", "2")["rows"]
    assert third["MLP7"]["resumed"] and third["MLP7"]["epochs_run"] == 2
    assert third["MLP7"]["history"][0] == first["MLP7"]["history"][0]
    assert third["MLP3"] == second["MLP3"]
    # --force trains from scratch
    fourth = table1(tmp_path, "--rows", "MLP7", "--epochs", "2", "--force")["rows"]
    assert not fourth["MLP7"]["resumed"] and fourth["MLP7"]["valid"] == third["MLP7"]["valid"]  # same seed


@pytest.mark.long  # the target end to end in two processes; the lock itself: test_skeleton.py
def test_table1_two_processes_fill_one_table(tmp_path):
    """One process per core, different rows, one file: each writes its rows under a lock, keeping the other's."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    base = [sys.executable, "-m", "nplm_edu", "reproduce", "table1", *TINY, "--epochs", "1",
            "--out", str(tmp_path / "t1.json"), "--runs-dir", str(tmp_path / "runs"), "--no-save-features"]
    procs = [subprocess.Popen(base + ["--rows", rows], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for rows in ("MLP7,MLP3", "MLP5,MLP1-ND")]
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out.decode()
    rows = json.loads((tmp_path / "t1.json").read_text())["rows"]
    assert list(rows) == ["MLP3", "MLP4", "MLP5", "MLP6", "MLP7", "MLP8", "MLP1-ND"]  # table order, nothing lost
    assert all(rows[r]["epochs_run"] == 1 for r in ("MLP3", "MLP5", "MLP7", "MLP1-ND"))


def test_table1_ctrl_c_resumes_inside_a_row(tmp_path, monkeypatch):
    from nplm_edu.numerics.fused import FusedNPLM

    calls = {"n": 0}
    original = FusedNPLM.sgd_update

    def interrupted(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 30:  # Ctrl-C in the middle of the first epoch
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, *a, **k)

    monkeypatch.setattr(FusedNPLM, "sgd_update", interrupted)
    with pytest.raises(KeyboardInterrupt):
        table1(tmp_path, "--rows", "MLP7", "--epochs", "2")
    assert not (tmp_path / "t1.json").exists() and (tmp_path / "runs" / "t1" / "MLP7" / "checkpoint.npz").exists()
    monkeypatch.setattr(FusedNPLM, "sgd_update", original)
    resumed = table1(tmp_path, "--rows", "MLP7", "--epochs", "2")["rows"]["MLP7"]
    assert resumed["resumed"] and calls["n"] == 30
    straight = table1(tmp_path, "--rows", "MLP7", "--epochs", "2", out="b.json", runs="b")["rows"]["MLP7"]
    for k in ("train", "valid", "test", "updates"):
        assert resumed[k] == straight[k]  # same numbers as a run never interrupted
    assert [e["valid_ppl"] for e in resumed["history"]] == [e["valid_ppl"] for e in straight["history"]]


@pytest.mark.parametrize("rows, says", [("MLP2", "computed with MLP1"), ("MLP10", "ask for MLP9"),
                                        ("MLP11", "unknown row"), ("", "at least one row")])
def test_table1_bad_rows(tmp_path, capsys, rows, says):
    from nplm_edu.cli import main

    assert main(["reproduce", "table1", "--rows", rows, *TINY, "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and err.count("\n") == 1
    assert not (tmp_path / "x.json").exists()


def test_table1_refuses_to_mix_settings(tmp_path):
    table1(tmp_path, "--rows", "MLP7", "--epochs", "1")
    with pytest.raises(UserError, match="`force` starts the table again"):  # the setting; the CLI says --force
        table1(tmp_path, "--rows", "MLP3", "--epochs", "1", "--lr", "0.2")
    rows = table1(tmp_path, "--rows", "MLP3", "--epochs", "1", "--lr", "0.2", "--force")["rows"]
    assert set(rows) == {"MLP3", "MLP4"}  # a fresh table: the old settings' rows are gone


def test_quick_slices_a_big_corpus():
    from nplm_edu.data.corpus import CorpusSpec
    from nplm_edu.experiments.table1 import QUICK_SPLIT, table_corpus

    spec = CorpusSpec(corpus="synthetic", synthetic_tokens=60_000)
    c = table_corpus(spec, quick=True)
    assert (len(c.train), len(c.valid), len(c.test)) == (QUICK_SPLIT[0], 6000, 6000)  # 48000/6000/6000 cut
    assert c.name.endswith("[quick]") and np.array_equal(c.valid, table_corpus(spec, quick=False).valid)


@pytest.mark.long
def test_minibatch_target(tmp_path):
    """K = 1 against K = 128 at the same per-example step: same start, same order, close curves."""
    out = tmp_path / "mb.json"
    argv = ["reproduce", "minibatch", "--corpus", "synthetic", "--synthetic-tokens", "8000", "--row", "MLP7",
            "--epochs", "2", "--lr", "0.5", "--out", str(out), "--runs-dir", str(tmp_path / "runs"), "--quiet"]
    assert run(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["row"] == "MLP7" and doc["model"]["n"] == 3 and doc["tokens"]["train"] == 6400
    runs = doc["runs"]
    assert list(runs) == ["k1", "same-step", "table1"]
    assert (runs["k1"]["batch"], runs["k1"]["lr"]) == (1, 1e-3) and runs["table1"]["lr"] == 0.5
    assert runs["k1"]["per_example_step"] == pytest.approx(runs["same-step"]["per_example_step"])
    for r in runs.values():
        assert [e["epoch"] for e in r["history"]] == [1, 2]
        assert r["history"][1]["examples"] == 2 * (6400 - 2)  # every window of the training split, per epoch
    assert runs["k1"]["history"][-1]["updates"] == 2 * 6398 and runs["same-step"]["history"][-1]["updates"] == 2 * 50
    # the same step per example: the two curves agree to a few percent (small steps add up nearly linearly)
    for a, b in zip(runs["k1"]["history"], runs["same-step"]["history"]):
        assert a["valid_ppl"] == pytest.approx(b["valid_ppl"], rel=0.05)
    # the larger table1 rate learns faster per example on this easy corpus
    assert runs["table1"]["history"][-1]["valid_ppl"] < runs["k1"]["history"][-1]["valid_ppl"]
    # each run checkpoints: run again, the three resume finished (no epoch trained again: the same seconds)
    k1 = tmp_path / "runs" / "mb" / "k1"
    assert (k1 / "checkpoint.npz").exists()
    stamp = (k1 / "checkpoint.npz").stat().st_mtime_ns
    assert run(argv) == 0
    assert json.loads(out.read_text())["runs"] == runs and (k1 / "checkpoint.npz").stat().st_mtime_ns == stamp
    # --force trains them again from scratch: a new checkpoint, the same curves (same seed, same order)
    assert run(argv + ["--force"]) == 0 and (k1 / "checkpoint.npz").stat().st_mtime_ns != stamp
    again = json.loads(out.read_text())["runs"]["k1"]["history"]
    assert [e["valid_ppl"] for e in again] == [e["valid_ppl"] for e in runs["k1"]["history"]]


def test_minibatch_one_row_only(tmp_path):
    with pytest.raises(UserError, match="one network"):
        run(["reproduce", "minibatch", "--corpus", "synthetic", "--row", "MLP7,MLP9", "--out", str(tmp_path / "x")])


def test_table1_saves_the_best_networks_features(tmp_path):
    from nplm_edu.data.corpus import load_corpus
    from nplm_edu.experiments.table1 import vocab_fingerprint
    from nplm_edu.training.checkpoint import model_from_checkpoint

    doc = table1(tmp_path, "--rows", "MLP7,MLP9", "--epochs", "1", quick=False)  # the default: --save-features
    best = min(("MLP7", "MLP9"), key=lambda r: doc["rows"][r]["valid"])
    with np.load(tmp_path / "t1_features.npz", allow_pickle=False) as f:
        assert str(f["row"]) == best and f["C"].dtype == np.float16 and int(f["V"]) == doc["V"]
        assert str(f["vocab_sha"]) == vocab_fingerprint(load_corpus("synthetic", synthetic_tokens=8000).vocab)
        C = model_from_checkpoint(tmp_path / "runs" / "t1" / best / "checkpoint.npz").params["C"]
        np.testing.assert_allclose(f["C"], C, rtol=1e-3, atol=1e-4)  # float16: 3 significant digits
    assert not (tmp_path / "t1_features.npz.tmp.npz").exists()
    table1(tmp_path, "--rows", "MLP7", "--epochs", "1", "--save-features", out="q.json")  # never with --quick
    assert not list(tmp_path.glob("q*features*")) and not list((tmp_path / "runs").glob("*features*"))


@pytest.mark.parametrize("target", ["minibatch", "lr-sweep"])
def test_slice_targets_state_their_brown_slice_in_help(target, capsys):
    from nplm_edu.experiments.minibatch import SLICE

    entries = _help_entries(target, capsys)
    assert f"default: {SLICE[0]} on Brown" in entries["--train-size"]
    assert f"default: {SLICE[1]} on Brown" in entries["--valid-size"]
    assert "default: 800000 on Brown" in _help_entries("table1", capsys)["--train-size"]
