"""``reproduce central-claim``: the removed sentences, the token groups, the pipeline (quick), the
novelty split and the fixed features on small inputs, the Brown part in its quick form."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nplm_edu.analysis.cooccurrence import cooccurrence, nearest_neighbours, pca_features
from nplm_edu.analysis.novelty import compare, frequency_matched, ngram_keys, novelty_groups
from nplm_edu.data.corpus import brown_available, load_corpus, windows
from nplm_edu.data.synthetic import entropy_rate, split_sentences
from nplm_edu.experiments.central_claim import (FAMILIES, CentralClaimOptions, forms, holdout_corpus,
                                               run_central_claim, token_groups)
from nplm_edu.experiments.central_claim_brown import QUICK, rescale, run_brown


def test_every_sentence_with_a_pair_is_removed():
    pairs = FAMILIES["time-animal"]
    corpus, held = holdout_corpus(pairs, 6_000, seed=2, test_tokens=2_000)
    words = corpus.vocab.decode(corpus.ids)
    for s in split_sentences(words):
        assert not any(set(s) & forms(a) and set(s) & forms(b) for a, b in pairs), s
    held_s = split_sentences(held)
    assert held_s and all(any(set(s) & forms(a) and set(s) & forms(b) for a, b in pairs) for s in held_s)
    assert len(corpus.train) >= 6_000 and len(corpus.valid) >= 750 and len(corpus.test) >= 2_000
    assert forms("cat") == {"cat", "cats"} and forms("now") == {"now"}
    c, t = windows(corpus.vocab.encode(held), 5)
    g = token_groups(c, t, pairs, corpus.vocab)
    assert sum(m.astype(int) for m in g.values()).tolist() == [1] * len(t)  # a partition
    aux = corpus.vocab.encode(["is", "are", "was", "were"])
    assert np.isin(t[g["after"]], aux).mean() > 0.4  # the auxiliary after "yesterday the cat"


def test_quick_pipeline(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a quick run writes under the scratch folder runs/results/, and says so
    path = run_central_claim(CentralClaimOptions(quick=True, brown=False), quiet=True)
    assert path == Path("runs/results/central_claim_quick.json") and not (tmp_path / "data").exists()
    assert f"wrote {path}" in capsys.readouterr().out
    doc = json.loads(path.read_text())
    assert doc["quick"] and doc["brown"] is None and "command" in doc and "commit" in doc
    assert doc["grammar_optimum"]["entropy_rate_nats"] == pytest.approx(entropy_rate(), abs=1e-6)
    assert len(doc["synthetic"]) == len(FAMILIES)
    for run in doc["synthetic"]:
        m = run["models"]
        assert set(m) >= {"grammar", "kn5", "kn3", "interpolated_trigram", "network_learned",
                          "network_fixed_random", "network_fixed_pca"}
        # nothing beats the grammar itself on average; the network beats the 5-gram on removed sentences
        for name, entry in m.items():
            scores = entry.get("mean", entry)
            assert scores["heldout"] <= m["grammar"]["heldout"] + 0.02, name
        assert m["network_learned"]["mean"]["heldout"] > m["kn5"]["heldout"] + 0.1
        assert run["tokens"]["heldout"] == sum(run["tokens"][g] for g in ("completing", "after", "other"))


def test_cli_errors():
    out = subprocess.run([sys.executable, "-m", "nplm_edu", "reproduce", "central-claim", "--seeds", "0",
                          "--no-brown"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith("error:") and "Traceback" not in out.stderr


def test_novelty_split_on_a_toy_stream():
    V = 6
    train = np.array([0, 1, 2, 3, 1, 2, 0, 4, 2])
    table = np.unique(ngram_keys(*windows(train, 3), V))
    nn = np.full((V, 1), -1)
    nn[5] = 0  # word 5's neighbour is word 0
    ctx, tgt = np.array([[0, 1], [5, 1], [5, 3]]), np.array([2, 2, 1])
    g = novelty_groups(ctx, tgt, table, nn, V)
    assert g["seen"].tolist() == [True, False, False]
    assert g["neighbour_seen"].tolist() == [False, True, False]  # (0, 1, 2) was seen
    assert g["no_neighbour"].tolist() == [False, False, True]
    out = compare(g, {"a": np.log([0.5, 0.2, 0.1]), "b": np.log([0.4, 0.1, 0.2])}, "a", "b")
    assert out["neighbour_seen"]["a_minus_b"] == pytest.approx(np.log(2), abs=1e-4)
    assert out["no_neighbour"]["a_higher"] == 0.0
    ctl = frequency_matched(np.arange(100)[:, None] % 50, np.random.default_rng(0))
    assert np.all(np.abs(ctl[:, 0] - np.arange(100) % 50) <= 0.1 * (np.arange(100) % 50) + 1)


def test_fixed_features_from_cooccurrence():
    syn = load_corpus("synthetic", seed=0)
    F = pca_features(syn.train, syn.V, 10)
    assert F.shape == (syn.V, 10)
    rows, cols, counts, D = cooccurrence(syn.train, syn.V, contexts=1000)
    assert D == 4 * syn.V and counts.sum() == 4 * len(syn.train) - 6  # every pair at offsets -2..2 but 0
    # the words of a class end up near each other: most nearest neighbours share the class
    words = [w for w in syn.classes if w in syn.vocab.index and syn.classes[w] in ("animal", "place", "verb")]
    ids = syn.vocab.encode(words)
    nn = nearest_neighbours(F, ids, 3)
    same = [syn.classes.get(syn.vocab.words[j]) == syn.classes[w] for w, row in zip(words, nn) for j in row]
    assert np.mean(same) > 0.8
    R = rescale(F, np.full((3, 3), 2.0))
    assert np.sqrt(np.mean(R ** 2)) == pytest.approx(2.0)


@pytest.mark.long
@pytest.mark.skipif(not brown_available(), reason="the Brown corpus is not in NLTK_DATA")
def test_brown_part_quick(tmp_path, monkeypatch, brown_read_once):
    """The quick form's pipeline on a quarter of its slices (the same steps, in seconds)."""
    for key, value in (("slice", (5_000, 1_250)), ("test", 1_250), ("oov_tokens", 50_000)):
        monkeypatch.setitem(QUICK, key, value)
    out = run_brown(load_corpus("brown"), tmp_path, quick=True, force=False, quiet=True)
    p = out["novel_trigrams"]
    assert sum(g["tokens"] for g in p["groups"].values()) == p["test_tokens"]
    assert p["groups"]["seen"]["tokens"] == p["control_frequency_matched"]["seen"]["tokens"]
    assert p["oov"]["words"] > 100 and p["oov"]["tokens"] > 100
    assert set(out["fixed_features"]["variants"]) == {"learned", "fixed_pca", "fixed_random"}
    assert all(np.isfinite(v["test_ppl"]) for v in out["fixed_features"]["variants"].values())
    again = run_brown(load_corpus("brown"), tmp_path, quick=True, force=False, quiet=True)  # resumes: same numbers
    assert again["novel_trigrams"]["groups"] == p["groups"]
