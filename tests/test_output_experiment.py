"""``reproduce output-layers`` by the comparison protocol, end to end on a tiny synthetic corpus (seconds):
the rows and summaries, the time to quality recomputed whenever rows are merged, two processes filling
one file, the test split read only after the grid, a killed process resumed, the new layers trained
through the trainer, and bad settings said in one line."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nplm_edu.cli import main
from nplm_edu.data.corpus import Corpus, CorpusSpec, load_corpus
from nplm_edu.errors import UserError
from nplm_edu.experiments import output_layers as ol
from nplm_edu.experiments import protocol
from nplm_edu.experiments.output_methods import (EXPLICIT, METHODS, TimedBackend, build_model, parse_methods,
                                                 read_class_file)
from nplm_edu.models.energy import EnergyNPLM
from nplm_edu.analysis.quality import seeds_time_to_quality
from nplm_edu.models.nplm import NPLMConfig
from nplm_edu.training.trainer import TrainConfig, train

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--corpus", "synthetic", "--synthetic-tokens", "4000", "--quick", "--quiet"]
SPEC = CorpusSpec(corpus="synthetic", synthetic_tokens=4000)


def reproduce(tmp_path, *extra, status=0):
    argv = ["reproduce", "output-layers", *TINY, "--out", str(tmp_path / "ol.json"), "--runs-dir",
            str(tmp_path / "runs"), *extra]
    assert main(argv) == status
    return json.loads((tmp_path / "ol.json").read_text()) if status == 0 else None


def test_rows_summaries_and_time_to_quality_recomputed_when_the_reference_arrives(tmp_path):
    doc = reproduce(tmp_path, "--methods", "tree-huffman,energy")
    assert doc["reference"] is None and doc["summary"]["tree-huffman"]["time_to_quality"] is None
    assert doc["protocol"] == ol.QUICK_PROTOCOL.record() and set(doc["grid"]["tree-huffman"]["lr_grid"]) == {"0.3", "1", "3"}
    assert set(doc["grid"]["energy"]["lr_grid"]) == {"0.3", "1", "3"}  # the energy network: the same grid and seeds
    doc = reproduce(tmp_path, "--methods", "full")  # the reference's rows: the other methods' rows recomputed
    runs = {r["run"]: r for r in doc["runs"]}
    assert sorted(runs) == [f"{m}/seed{s}" for m in ("energy", "full", "tree-huffman") for s in (0, 1, 2)]
    full = [runs[f"full/seed{s}"] for s in (0, 1, 2)]
    best = np.mean([min(e["valid_ppl"] for e in r["history"]) for r in full])
    assert doc["reference"]["best_valid_ppl"]["mean"] == pytest.approx(best) and doc["reference"]["complete"]
    for name in ("tree-huffman", "energy"):
        rows = [runs[f"{name}/seed{s}"] for s in (0, 1, 2)]
        assert doc["summary"][name]["time_to_quality"] == seeds_time_to_quality([r["history"] for r in rows], best)
    tree, energy = ([runs[f"{m}/seed{s}"] for s in (0, 1, 2)] for m in ("tree-huffman", "energy"))
    speed = np.mean([r["examples_per_cpu_second"] for r in full])
    for r in full + tree + energy:
        assert 1 < r["test_ppl"] < doc["V"] and (r["stopped_early"] or r["reached_max_epochs"])
        assert all({"valid_ppl", "seconds", "cpu_seconds", "train_cpu_seconds"} <= set(e) for e in r["history"])
        epochs = [e for e in r["history"] if not e.get("timing_partial")]
        per_cpu = len(epochs) * doc["examples_per_epoch"] / sum(e["train_cpu_seconds"] for e in epochs)
        assert r["examples_per_cpu_second"] == pytest.approx(per_cpu) and r["speedup_vs_full"] == pytest.approx(
            per_cpu / speed)
    assert doc["summary"]["full"]["speedup_vs_full"]["mean"] == pytest.approx(1.0)
    assert doc["examples_per_epoch"] == len(load_corpus("synthetic", synthetic_tokens=4000).train) - 4
    assert doc["slice"]["train"] == ol.QUICK_SPLIT[0] and doc["layers"]["ess_min"] == ol.ESS_MIN
    before = (tmp_path / "ol.json").read_text()
    again = reproduce(tmp_path, "--methods", "full,tree-huffman,energy")  # everything there: nothing trained again
    assert again["runs"] == json.loads(before)["runs"]


@pytest.mark.long  # the target end to end in two processes; the lock itself: test_skeleton.py
def test_two_processes_fill_one_file(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    out, runs = tmp_path / "ol.json", tmp_path / "runs"
    procs = [subprocess.Popen([sys.executable, "-m", "nplm_edu", "reproduce", "output-layers", *TINY, "--methods", m,
                               "--out", str(out), "--runs-dir", str(runs)], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for m in ("full", "class-frequency")]
    for p in procs:
        assert p.wait(timeout=600) == 0, p.stdout.read()
    doc = json.loads(out.read_text())
    assert sorted(r["run"] for r in doc["runs"]) == sorted(f"{m}/seed{s}" for m in ("full", "class-frequency")
                                                           for s in (0, 1, 2))
    assert doc["summary"]["class-frequency"]["time_to_quality"] is not None  # whichever process merged last


class Guarded(Corpus):
    """A corpus whose test windows may be read only while ``open``."""

    open = False

    def windows(self, split, n):
        if split == "test":
            assert Guarded.open, "the test split was read during the learning-rate choice"
            Guarded.reads += 1
        return super().windows(split, n)


def test_the_test_split_is_read_once_per_seed_and_never_for_the_grid(tmp_path, monkeypatch):
    corpus = load_corpus("synthetic", synthetic_tokens=4000)
    Guarded.reads = 0
    monkeypatch.setattr(ol, "comparison_data", lambda spec, quick: Guarded(corpus.name, corpus.vocab, corpus.ids,
                                                                            corpus.bounds))
    grid = ol.choose_lr

    def guarded_grid(*args, **kw):
        Guarded.open = False
        choice = grid(*args, **kw)
        Guarded.open = True
        return choice

    monkeypatch.setattr(ol, "choose_lr", guarded_grid)
    opts = ol.OutputLayersOptions(methods="class-frequency,nce", quick=True, runs_dir=str(tmp_path / "runs"))
    ol.run_output_layers(opts, out=tmp_path / "ol.json", quiet=True)
    doc = json.loads((tmp_path / "ol.json").read_text())
    nce = [r for r in doc["runs"] if r["method"] == "nce"]
    assert len(doc["runs"]) >= 4 and all(math.isfinite(r["test_log_Z_mean"]) for r in nce)
    assert Guarded.reads == len(doc["runs"]) + len(nce)  # each seed's test perplexity; NCE's log Z once more


def test_each_layer_is_described_in_the_file_and_describe_only_adds_it_without_training(tmp_path, monkeypatch):
    doc = reproduce(tmp_path, "--methods", "class-exchange,tree-huffman,nce")
    corpus = ol.comparison_data(SPEC, True)
    for name in ("class-exchange", "tree-huffman", "nce"):
        _, desc = build_model(name, corpus, NPLMConfig(V=corpus.V, **ol.NETWORK), ol.OutputLayersOptions(),
                              tmp_path / "runs" / "ol")
        assert doc["summary"][name]["layer"] == desc and all(r["layer"] == desc for r in doc["runs"]
                                                                if r["method"] == name)
    assert doc["summary"]["class-exchange"]["layer"]["n_classes"] >= 2
    assert doc["summary"]["tree-huffman"]["layer"]["max_depth"] >= doc["summary"]["tree-huffman"]["layer"]["mean_depth"]
    bare = json.loads(json.dumps(doc))  # a file written before descriptions were kept
    for r in bare["runs"]:
        del r["layer"]
    (tmp_path / "ol.json").write_text(json.dumps(bare))
    monkeypatch.setattr(protocol, "train_run", None)  # nothing may train
    monkeypatch.setattr(ol, "choose_lr", None)
    described = reproduce(tmp_path, "--describe-only")
    assert described["summary"] == doc["summary"]  # every number as it was, the descriptions back
    assert [{k: v for k, v in r.items() if k != "layer"} for r in described["runs"]] == bare["runs"]
    assert [r["layer"] for r in described["runs"]] == [r["layer"] for r in doc["runs"]]


def test_lightrnn_rows_keep_their_learned_table(tmp_path):
    doc = reproduce(tmp_path, "--methods", "lightrnn")
    rows = [r for r in doc["runs"] if r["method"] == "lightrnn"]
    words = load_corpus("synthetic", synthetic_tokens=4000).vocab.words
    for r in rows:
        assert r["table_rows"][0][0] == words[0] and all(1 <= len(row) <= ol.ROW_WORDS for row in r["table_rows"])
        assert {w for row in r["table_rows"] for w in row} <= set(words)
        assert all(e["reassign"]["valid_ppl_after"] > 0 for e in r["history"])  # each reassignment, before and after


class Killed(Exception):
    pass


def test_a_killed_process_resumes_from_its_run_folders(tmp_path, monkeypatch):
    per_epoch = -(-(len(load_corpus("synthetic", synthetic_tokens=4000).train) - 4) // ol.TRAIN.batch)

    class Dying(TimedBackend):
        updates = 0

        def update(self, *args):
            Dying.updates += 1
            if Dying.updates > 3 * per_epoch + per_epoch // 2:  # in seed 0's second epoch, after the grid's three
                raise Killed()
            return super().update(*args)

    opts = ol.OutputLayersOptions(methods="tree-huffman", quick=True, runs_dir=str(tmp_path / "runs"))
    monkeypatch.setattr(ol, "TimedBackend", Dying)
    with pytest.raises(Killed):
        ol.run_output_layers(opts, SPEC, out=tmp_path / "ol.json", quiet=True)
    monkeypatch.setattr(ol, "TimedBackend", TimedBackend)
    folders = sorted((tmp_path / "runs" / "ol" / "tree-huffman").glob("lr*-seed0"))
    kept = {f.name: json.loads((f / "history.json").read_text())["epochs"] for f in folders}
    assert len(kept) == 3 and all(len(e) == 1 for e in kept.values())  # the grid's epoch, then killed
    ol.run_output_layers(opts, SPEC, out=tmp_path / "ol.json", quiet=True)
    doc = json.loads((tmp_path / "ol.json").read_text())
    (row,) = [r for r in doc["runs"] if r["run"] == "tree-huffman/seed0"]
    done = kept[f"lr{row['lr']:g}-seed0"]
    assert [e["valid_ppl"] for e in row["history"][:len(done)]] == [round(e["valid_ppl"], 4) for e in done]
    assert len(doc["runs"]) == 3 and row["epochs"] > len(done)


@pytest.mark.parametrize("method", ["differentiated", "adaptive", "is-ess"])
def test_new_layers_sum_to_one_and_train_through_the_trainer(method):
    corpus = load_corpus("synthetic", synthetic_tokens=6000)
    model, desc = build_model(method, corpus, NPLMConfig(V=corpus.V, seed=1, **ol.NETWORK), ol.OutputLayersOptions())
    c, _ = corpus.windows("valid", model.order)
    assert np.allclose(model.probs(c[:50]).sum(axis=1), 1.0, atol=1e-5)  # float32 network, float64 sums
    cfg = TrainConfig(epochs=2, batch=32, lr=1.0, seed=0, threads=1)
    hist = train(model, corpus, cfg, quiet=True, backend=TimedBackend(model, cfg))["epochs"]
    assert hist[-1]["valid_ppl"] < hist[0]["valid_ppl"] < corpus.V
    if method == "is-ess":  # the sample sizes of each epoch's batches
        assert all(100 <= e["k_min"] <= e["k_mean"] <= e["k_max"] <= 2000 for e in hist)
    else:
        assert desc["cutoffs"] == [round(corpus.V * 2000 / 17907), round(corpus.V * 6000 / 17907)]
    assert np.allclose(model.probs(c[:50]).sum(axis=1), 1.0, atol=1e-5)


def test_the_bands_are_brown_s_on_brown():
    from nplm_edu.experiments.output_methods import band_cutoffs, band_widths

    assert band_cutoffs(17_907) == [2000, 6000] and band_widths(100, 3) == [60, 25, 15]
    assert band_cutoffs(100) == [11, 34] and band_cutoffs(3) == [1] and band_cutoffs(2) == [1]


@pytest.mark.parametrize("extra, message", [
    (["--n-classes", "0"], "between 1 and |V|"),
    (["--k-nce", "0", "--methods", "nce"], "--k-nce (the number of samples k) must be"),
    (["--k-is", "-1", "--methods", "is"], "--k-is (the number of samples k) must be"),
    (["--methods", "softmax"], "unknown method"),
    (["--methods", ","], "--methods names no method"),
    (["--methods", "class-file"], "--class-file is needed by the class-file method"),
    (["--seeds", "5"], "--seeds must be some of the protocol's seeds 0,1,2"),
    (["--seeds", "a"], "--seeds must be some of the protocol's seeds"),
])
def test_bad_input_is_one_line(tmp_path, capsys, extra, message):
    argv = ["reproduce", "output-layers", *TINY, "--out", str(tmp_path / "x.json"), "--runs-dir",
            str(tmp_path / "runs"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err
    assert not (tmp_path / "x.json").exists()


def test_a_file_of_other_settings_needs_force_and_an_old_file_is_replaced(tmp_path, capsys):
    old = tmp_path / "ol.json"
    old.write_text(json.dumps({"target": "output-layers", "settings": {}, "rows": []}))  # before the protocol
    reproduce(tmp_path, "--methods", "tree-huffman", "--seeds", "0")
    reproduce(tmp_path, "--methods", "tree-huffman", "--k-nce", "30", status=2)
    assert "made with other settings" in capsys.readouterr().err


def test_class_file_must_cover_the_vocabulary(tmp_path):
    corpus = load_corpus("synthetic", synthetic_tokens=8000)
    words = corpus.vocab.words
    good = tmp_path / "classes.txt"
    good.write_text("\n".join(f"{w} {i % 3}" for i, w in enumerate(words)) + "\nnot-a-word 1\n")
    labels = read_class_file(good, corpus.vocab)
    assert labels.tolist() == [i % 3 for i in range(len(words))]
    bad = tmp_path / "short.txt"
    bad.write_text("\n".join(f"{w} 0" for w in words[:-1]))
    with pytest.raises(UserError, match="does not cover the vocabulary"):
        read_class_file(bad, corpus.vocab)
    bad.write_text(f"{words[0]} 0\n{words[0]} 1\n")
    with pytest.raises(UserError, match="twice"):
        read_class_file(bad, corpus.vocab)
    bad.write_text(f"{words[0]} x\n")
    with pytest.raises(UserError, match="expected 'word class'"):
        read_class_file(bad, corpus.vocab)
    assert parse_methods("nce,class-file", str(good)) == ["class-file", "nce"]
    assert parse_methods(None, None) == [m for m in METHODS if m not in EXPLICIT]  # energy only when named
    assert parse_methods(None, str(good)) == [m for m in METHODS if m != "energy"]
    assert parse_methods("energy,full", None) == ["full", "energy"]


def test_the_energy_network_is_mlp9_s_shape_with_energies_for_outputs():
    corpus = load_corpus("synthetic", synthetic_tokens=4000)
    model, desc = build_model("energy", corpus, NPLMConfig(V=corpus.V, seed=3, **ol.NETWORK), ol.OutputLayersOptions())
    assert isinstance(model, EnergyNPLM) and desc["cost_per_example"] == corpus.V
    cfg = model.config
    assert (cfg.n, cfg.m, cfg.h, cfg.seed, cfg.dtype) == (ol.NETWORK["n"], ol.NETWORK["m"], ol.NETWORK["h"], 3, "float32")
    ctx, _ = corpus.windows("valid", cfg.n)
    assert np.allclose(np.exp(model.log_probs(ctx[:5])).sum(axis=1), 1)


def test_a_file_written_by_older_code_is_extended_and_each_row_keeps_its_commit(tmp_path, monkeypatch):
    """The full softmax's rows written by the code before rows recorded their commit (the file's provenance
    block names it), then another method's rows by this code: each row says which code trained it."""
    from nplm_edu.experiments import common
    monkeypatch.setattr(common, "package_modified", lambda: False)
    monkeypatch.setattr(common, "git_commit", lambda: "9cda8eb")
    doc = reproduce(tmp_path, "--methods", "full")
    for r in doc["runs"]:  # the shape the older code wrote: no provenance in the rows or the grid
        del r["provenance"], r["lr_grid_provenance"]
    doc["grid"]["full"].pop("provenance")
    (tmp_path / "ol.json").write_text(json.dumps(doc))
    monkeypatch.setattr(common, "git_commit", lambda: "new1234")
    doc = reproduce(tmp_path, "--methods", "tree-huffman")
    runs = {r["run"]: r for r in doc["runs"]}
    assert sorted(runs) == [f"{m}/seed{s}" for m in ("full", "tree-huffman") for s in (0, 1, 2)]
    assert {k: r["provenance"]["commits"] for k, r in runs.items()} == {
        **{f"full/seed{s}": ["9cda8eb"] for s in (0, 1, 2)}, **{f"tree-huffman/seed{s}": ["new1234"] for s in (0, 1, 2)}}
    assert doc["commit"] == "new1234" and doc["grid"]["full"]["provenance"]["1"]["commit"] == "9cda8eb"
    assert doc["reference"]["complete"] and doc["summary"]["tree-huffman"]["time_to_quality"] is not None
