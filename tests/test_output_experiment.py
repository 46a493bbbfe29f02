"""``reproduce output-layers --quick`` end to end on a tiny synthetic corpus (seconds): the JSON's rows and
keys, ratios against the full softmax's row, resuming row by row, the energy network, and bad input."""

import json
import math

import numpy as np
import pytest

from nplm_edu.cli import main
from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.experiments.output_methods import METHODS, energy_slice, parse_methods, read_class_file

TINY = ["--corpus", "synthetic", "--synthetic-tokens", "8000", "--quick", "--quiet"]
KEYS = {"method", "train_examples_per_s", "speedup_vs_full", "eval_examples_per_s", "valid_ppl", "test_ppl",
        "ppl_ratio_vs_full", "epochs", "command", "commit", "machine", "blas_threads", "date", "speedup_vs_full_cpu",
        "train_examples_per_cpu_s", "eval_speedup_vs_full_cpu"}


def reproduce(tmp_path, *extra):
    argv = ["reproduce", "output-layers", *TINY, "--out", str(tmp_path / "ol.json"), "--runs-dir",
            str(tmp_path / "runs"), *extra]
    assert main(argv) == 0
    return json.loads((tmp_path / "ol.json").read_text())


def test_quick_pipeline_rows_ratios_and_resume(tmp_path):
    doc = reproduce(tmp_path, "--epochs", "1")
    rows = {r["method"]: r for r in doc["rows"]}
    assert list(rows) == [m for m in METHODS if m != "class-file"]  # the full softmax first
    for r in rows.values():
        assert KEYS <= set(r), KEYS - set(r)
        assert r["epochs"] == 1 and 1 < r["test_ppl"] < doc["V"] and r["train_examples_per_s"] > 0
        assert r["ppl_ratio_vs_full"] == pytest.approx(r["test_ppl"] / rows["full"]["test_ppl"], rel=1e-3)
        assert r["speedup_vs_full"] == pytest.approx(r["train_examples_per_s"] / rows["full"]["train_examples_per_s"],
                                                     abs=0.005 + 1e-9)  # the file rounds ratios to 2 decimals
    assert rows["full"]["speedup_vs_full"] == 1.0
    assert rows["class-frequency"]["layer"]["n_classes"] == round(math.sqrt(doc["V"]))
    assert rows["tree-huffman"]["layer"]["mean_depth"] < rows["tree-huffman"]["layer"]["max_depth"]
    for m in ("is", "is-adaptive", "is-target", "nce"):  # exact and self-normalized evaluation of the sampled ones
        assert math.isfinite(rows[m]["test_log_Z_mean"]) and rows[m]["test_ppl_self_normalized"] > 0
    assert {r["method"] for r in doc["energy"]["rows"]} == {"full", "energy"}
    assert doc["energy"]["rows"][1]["test_ppl"] > 1 and doc["commit"] and doc["settings"]["epochs"] == 1
    # resuming: a rerun trains nothing; a row removed from the file is evaluated again from its checkpoint
    path = tmp_path / "ol.json"
    doc["rows"] = [r for r in doc["rows"] if r["method"] != "tree-huffman"]
    path.write_text(json.dumps(doc))
    again = {r["method"]: r for r in reproduce(tmp_path, "--epochs", "1")["rows"]}
    assert again["full"]["date"] == rows["full"]["date"] and not again["full"]["resumed"]  # kept as it was
    assert again["tree-huffman"]["resumed"]  # from its checkpoint: nothing left to train, same numbers
    assert again["tree-huffman"]["test_ppl"] == rows["tree-huffman"]["test_ppl"]
    # a rerun with every row already there measures nothing, so the file (its provenance too) stays as it was
    kept = json.loads(path.read_text())
    kept["command"] = "the command that measured these rows"
    path.write_text(json.dumps(kept))
    before = path.read_bytes()
    reproduce(tmp_path, "--epochs", "1")
    assert path.read_bytes() == before


def test_other_settings_need_force(tmp_path):
    reproduce(tmp_path, "--epochs", "1", "--methods", "full", "--no-energy")
    assert main(["reproduce", "output-layers", *TINY, "--epochs", "1", "--methods", "full", "--lr", "0.5",
                 "--out", str(tmp_path / "ol.json"), "--runs-dir", str(tmp_path / "runs"), "--no-energy"]) == 2


@pytest.mark.parametrize("extra, message", [
    (["--n-classes", "0"], "between 1 and |V|"),
    (["--n-classes", "100000"], "between 1 and |V|"),
    (["--k-nce", "0", "--methods", "nce"], "--k-nce (the number of samples k) must be"),
    (["--k-is", "-1", "--methods", "is"], "--k-is (the number of samples k) must be"),
    (["--methods", "softmax"], "unknown method"),
    (["--methods", "class-file"], "--class-file is needed by the class-file method"),
])
def test_bad_input_is_one_line(tmp_path, capsys, extra, message):
    argv = ["reproduce", "output-layers", *TINY, "--epochs", "1", "--no-energy", "--out", str(tmp_path / "x.json"),
            "--runs-dir", str(tmp_path / "runs"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err and "\n" not in err


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
    assert parse_methods("nce,class-file", str(good)) == ["full", "class-file", "nce"]


def test_energy_slice_has_its_own_vocabulary():
    corpus = load_corpus("synthetic", synthetic_tokens=8000)
    small = energy_slice(corpus, (1000, 300, 300), min_count=4)
    assert [len(small.split(s)) for s in ("train", "valid", "test")] == [1000, 300, 300]
    counts = np.bincount(small.ids, minlength=small.V)
    assert (counts[np.arange(small.V) != small.vocab.unk] >= 4).all() and small.V <= corpus.V
    same = [corpus.vocab.words[i] for i in corpus.train[:50]]  # the same text, words kept or <unk>
    got = small.vocab.decode(small.train[:50])
    assert all(g == w or g == "<unk>" for g, w in zip(got, same))


def test_a_diverging_method_is_recorded_and_the_others_go_on(tmp_path):
    doc = reproduce(tmp_path, "--epochs", "1", "--methods", "full,tree-huffman", "--lr", "1e6", "--no-energy")
    rows = {r["method"]: r for r in doc["rows"]}
    assert "diverged" in rows["full"] and "diverged" in rows["tree-huffman"]  # both recorded, none stopped the run
    assert "try a smaller learning rate" in rows["full"]["diverged"]


def test_timing_of_an_epoch_resumed_inside_is_flagged():
    from types import SimpleNamespace

    from nplm_edu.experiments.output_methods import TimedBackend
    from nplm_edu.models.nplm import NPLM, NPLMConfig
    from nplm_edu.training.trainer import TrainConfig

    backend = TimedBackend(NPLM(NPLMConfig(V=5, n=2, m=2, h=2)), TrainConfig())
    backend.load_extra({}, SimpleNamespace(batch_in_epoch=3, drop_state=None, step=10))
    assert backend.epoch_extra()["timing_partial"] and "timing_partial" not in backend.epoch_extra()


@pytest.mark.parametrize("extra, message", [
    (["--class-file", "/nonexistent"], "--class-file names no file: no class file at /nonexistent"),
    (["--methods", "is", "--k-is", "0"], "--k-is (the number of samples k) must be a whole number >= 1"),
    (["--methods", "nce", "--k-nce", "0"], "--k-nce (the number of samples k) must be a whole number >= 1"),
])
def test_settings_are_refused_before_anything_trains(tmp_path, capsys, monkeypatch, extra, message):
    import nplm_edu.experiments.output_layers as ol

    monkeypatch.setattr(ol, "train", lambda *a, **k: pytest.fail("trained before the settings were checked"))
    monkeypatch.setattr(ol, "table_corpus", lambda *a, **k: pytest.fail("read the corpus first"))
    assert main(["reproduce", "output-layers", *TINY, "--out", str(tmp_path / "ol.json"), "--runs-dir",
                 str(tmp_path / "runs"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_results_files_of_one_name_in_two_folders_keep_their_own_runs(tmp_path):
    args = ["reproduce", "output-layers", *TINY, "--epochs", "1", "--methods", "full", "--no-energy",
            "--runs-dir", str(tmp_path / "runs")]
    assert main([*args, "--out", str(tmp_path / "a" / "ol.json")]) == 0
    first = tmp_path / "runs" / "ol" / "full" / "checkpoint.npz"
    before = first.read_bytes()
    assert main([*args, "--lr", "0.5", "--out", str(tmp_path / "b" / "ol.json")]) == 0  # other settings
    assert first.read_bytes() == before  # the first file's run is still there to resume
    assert len(list((tmp_path / "runs").glob("ol-*/full/checkpoint.npz"))) == 1


def test_a_row_written_by_another_process_meanwhile_is_kept(tmp_path, monkeypatch):
    import nplm_edu.experiments.output_layers as ol

    train = ol.train
    out = tmp_path / "ol.json"

    def train_while_another_writes(model, corpus, cfg, **kw):
        history = train(model, corpus, cfg, **kw)
        if kw["out_dir"].name == "tree-huffman":  # meanwhile, another process finished class-frequency
            doc = json.loads(out.read_text())
            row = {**doc["rows"][0], "method": "class-frequency", "valid_ppl": 123.0}
            ol.merge_rows(out, doc, {"class-frequency": row}, doc["settings"], corpus, 0.0)
        return history

    monkeypatch.setattr(ol, "train", train_while_another_writes)
    doc = reproduce(tmp_path, "--epochs", "1", "--methods", "full,tree-huffman", "--no-energy")
    assert [r["method"] for r in doc["rows"]] == ["full", "class-frequency", "tree-huffman"]
    assert doc["rows"][1]["valid_ppl"] == 123.0
