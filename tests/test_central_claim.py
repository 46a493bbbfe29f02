"""``reproduce central-claim``: the removed sentences, the token groups, the gap, the pipeline (quick) under the
protocol (test sets never read for the choice, two writers keep both rows), the novelty split and the fixed
features on small inputs, the Brown part in its quick form."""

import contextlib
import io
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
from nplm_edu.data.corpus import Corpus
from nplm_edu.experiments import claim_runs
from nplm_edu.experiments.central_claim import (FAMILIES, QUICK as CC_QUICK, VARIANTS, CentralClaimOptions, forms,
                                               header, holdout_corpus, network_method, run_central_claim, scored,
                                               token_groups)
from nplm_edu.experiments.central_claim_brown import QUICK, rescale, run_brown
from nplm_edu.experiments.claim_runs import Ctx, SplitScores, gap, tables, train_seeds
from nplm_edu.experiments.protocol import Method, Protocol


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


@contextlib.contextmanager
def split_guard():
    """Every split the protocol reads, recorded, and a read of the test split while a learning rate is chosen
    (by ``claim_runs.choose_lr``) failing the run. Yields the events: the split of every ``Corpus.windows``
    call made during the choice, and ``score <split>`` for every split scored."""
    events, choosing = [], []
    real_choose, real_windows, real_score, real_test = claim_runs.choose_lr, Corpus.windows, SplitScores.__call__, Corpus.test

    def choose(*a, **k):
        choosing.append(True)
        try:
            return real_choose(*a, **k)
        finally:
            choosing.pop()

    def windows_(self, split, n):
        if choosing:
            events.append(split)
            assert split != "test", "the test split was read while the rate was chosen"
        return real_windows(self, split, n)

    def score(self, model, corpus, split):
        assert not choosing or split != "test"
        events.append(f"score {split}")
        return real_score(self, model, corpus, split)

    def test_split(self):
        assert not choosing, "the test split was read while the rate was chosen"
        return real_test.fget(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(claim_runs, "choose_lr", choose)
        mp.setattr(Corpus, "windows", windows_)
        mp.setattr(Corpus, "test", property(test_split))
        mp.setattr(SplitScores, "__call__", score)
        yield events


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One quick run of both families (the most expensive part of this file, run once), with every split the
    protocol reads recorded (:func:`split_guard`): (the results file's path, what the run printed, the
    events). A quick run writes under the scratch folder runs/results/ of the current folder, here a fresh one."""
    tmp = tmp_path_factory.mktemp("central_claim")
    with pytest.MonkeyPatch.context() as mp, split_guard() as events:
        mp.chdir(tmp)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            path = run_central_claim(CentralClaimOptions(quick=True, brown=False, runs_dir=str(tmp / "r")), quiet=True)
    return tmp, path, printed.getvalue(), events


def test_the_rate_of_a_central_claim_network_is_chosen_without_reading_the_test_split(tmp_path):
    """The guarantee of the quick pipeline's run, in seconds: a network of one cell (a small sample) under a
    short protocol reads only validation while its rate is chosen, then scores the test split once per seed."""
    pairs = FAMILIES["time-animal"]
    corpus, held = holdout_corpus(pairs, 2_000, seed=0, test_tokens=1_000)
    hc, ht = windows(corpus.vocab.encode(held), 5)
    method = network_method("c", "learned", corpus, (hc, ht), token_groups(hc, ht, pairs, corpus.vocab), {}, None)
    protocol = Protocol(lrs=(0.3, 1.0, 3.0), grid_epochs=1, patience=1, max_epochs=2, seeds=(0, 1, 2))
    ctx = Ctx(tmp_path / "cc.json", {"quick": True}, protocol, tmp_path / "r")
    with split_guard() as events:
        rows = train_seeds(method, "c", "network_learned", corpus, ctx)
        with pytest.raises(AssertionError, match="while the rate was chosen"):  # the guard does catch a read
            claim_runs.choose_lr(Method("peek", lambda lr, seed: corpus.test), corpus, protocol, tmp_path / "p")
    chosen = set(events[:events.index("score test")])  # what was read before any test score: the choice, seed 0
    assert {"valid", "score valid"} <= chosen <= {"train", "valid", "score valid"}
    assert events.count("score test") == 3 and sorted(rows) == [0, 1, 2]
    assert all(r["lr"] in protocol.lrs and "gap" in r for r in rows.values())


@pytest.mark.long  # the quick pipeline end to end (the module's one run of it)
def test_quick_pipeline(quick_run):
    tmp, path, printed, _ = quick_run
    assert path == Path("runs/results/central_claim_quick.json") and not (tmp / "data").exists()
    assert f"wrote {path}" in printed
    doc = json.loads((tmp / path).read_text())
    assert doc["quick"] and "command" in doc and "commit" in doc and doc["protocol"]["lrs"] == [0.3, 1.0, 3.0]
    assert doc["grammar_optimum"]["entropy_rate_nats"] == pytest.approx(entropy_rate(), abs=1e-6)
    assert set(doc["tables"]) == {f"{f}/4000" for f in FAMILIES}
    for cell, m in doc["tables"].items():
        assert set(m) == {"grammar", "kn5", "kn3", "interpolated_trigram", "network_learned",
                          "network_fixed_random", "network_fixed_pca"}
        # nothing beats the grammar itself on average; the network beats the 5-gram on removed sentences
        for name, entry in m.items():
            assert entry["heldout"]["mean"] <= m["grammar"]["heldout"]["mean"] + 0.02, name
            assert entry["gap"]["mean"] == pytest.approx(entry["heldout"]["mean"] - entry["ordinary"]["mean"])
        assert m["network_learned"]["heldout"]["mean"] > m["kn5"]["heldout"]["mean"] + 0.1
        assert m["network_learned"]["gap"]["n"] == 3 and m["kn5"]["gap"]["n"] == 1
        assert abs(m["grammar"]["gap"]["mean"]) < 0.1  # the removed sentences are as probable as any
        assert doc["grid"][f"{cell}/learned"]["chosen_lr"] in (0.3, 1.0, 3.0)
    info = next(r for r in doc["runs"] if r["model"] == "grammar")
    assert info["tokens"]["heldout"] == sum(info["tokens"][g] for g in ("completing", "after", "other"))
    assert doc["cost"]["cpu_hours"] > 0


def test_gap_is_removed_minus_ordinary_log_probability():
    """Derivation: a model giving each removed token probability 1/8 and each ordinary token 1/4 has mean
    log-probabilities -3 log 2 and -2 log 2 per token, so its gap is -log 2: the removed sentences are half
    as probable per token; in perplexities, log(4 / 8). The mean and std over seeds are numpy's (ddof 1)."""
    groups = {"completing": np.array([True, False]), "other": np.array([False, True])}
    row = scored(np.log([1 / 8, 1 / 8]), np.log([1 / 4, 1 / 4, 1 / 4]), groups)
    assert row["gap"] == pytest.approx(-np.log(2))
    assert row["gap"] == pytest.approx(np.log(row["scores"]["ordinary_ppl"] / row["scores"]["heldout_ppl"]))
    assert gap(-1.5, -1.25) == pytest.approx(-0.25)
    rows = [{"cell": "c", "model": "net", "seed": s, "scores": {"heldout": h, "ordinary": o}, "gap": gap(h, o)}
            for s, (h, o) in enumerate([(-1.5, -1.25), (-1.75, -1.25), (-1.5, -1.5)])]
    rows.append({"cell": "c", "model": "kn5", "seed": None, "scores": {"heldout": -2.0, "ordinary": -1.5},
                 "gap": gap(-2.0, -1.5)})
    t = tables(rows)["c"]
    assert t["net"]["gap"]["values"] == [-0.25, -0.5, 0.0] and t["net"]["seeds"] == [0, 1, 2]
    assert t["net"]["gap"]["mean"] == pytest.approx(-0.25) and t["net"]["gap"]["std"] == pytest.approx(0.25)
    assert t["kn5"]["gap"] == {"mean": -0.5, "std": None, "n": 1, "values": [-0.5]}
    unscored = {"cell": "c", "model": "net", "seed": 3, "valid_ppl": None, "diverged": "loss is nan"}
    assert tables(rows + [unscored])["c"]["net"] == t["net"]  # a seed diverged before any validation: left out


@pytest.mark.long  # the quick pipeline end to end (the module's one run of it)
def test_the_test_sets_are_never_read_while_the_rate_is_chosen(quick_run):
    """Every split the protocol's grid reads is recorded (the fixture): validation only; the removed sentences
    and the ordinary test sentences are scored after the choice, once per seed."""
    tmp, path, _, events = quick_run
    assert "valid" in events and "test" not in events
    n = len(FAMILIES) * 3 * 3  # per family three tables C, three seeds: scored once each
    assert events.count("score test") == n
    doc = json.loads((tmp / path).read_text())
    assert len([r for r in doc["runs"] if r["seed"] is not None]) == n


@pytest.mark.long  # the pipeline end to end in two processes; the lock itself: test_skeleton.py
def test_two_processes_filling_one_file_keep_both_rows(tmp_path):
    out, runs = tmp_path / "claim.json", tmp_path / "r"
    procs = [subprocess.Popen([sys.executable, "-m", "nplm_edu", "reproduce", "central-claim", "--quick", "--no-brown",
                               "--families", family, "--out", str(out), "--runs-dir", str(runs), "--quiet"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for family in FAMILIES]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    doc = json.loads(out.read_text())
    assert set(doc["tables"]) == {f"{f}/4000" for f in FAMILIES}
    assert len(doc["runs"]) == len(FAMILIES) * (4 + 3 * 3)  # four count models, three tables x three seeds
    assert set(doc["summary"]) == {f"{f}/4000/{v}" for f in FAMILIES for v in VARIANTS}


def test_cli_errors():
    for args in (["--families", "cat-dog"], ["--no-synthetic", "--no-brown"], ["--brown-parts", "ngrams"]):
        out = subprocess.run([sys.executable, "-m", "nplm_edu", "reproduce", "central-claim", *args],
                             capture_output=True, text=True)
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
    for key, value in (("sizes", (5_000, 1_250, 1_250)), ("oov_tokens", 50_000)):
        monkeypatch.setitem(QUICK, key, value)
    out = tmp_path / "claim.json"
    ctx = Ctx(out, header(True), CC_QUICK["protocol"], tmp_path / "r")
    run_brown(load_corpus("brown"), ctx, quick=True)
    doc = json.loads(out.read_text())
    rows = {r["run"]: r for r in doc["runs"]}
    p = rows["brown/mlp9/seed0"]
    assert sum(g["tokens"] for g in p["groups"].values()) == 1_250
    assert p["groups"]["seen"]["tokens"] == p["control_frequency_matched"]["seen"]["tokens"]
    assert p["oov"]["words"] > 100 and p["oov"]["tokens"] > 100
    assert set(doc["summary"]) == {"brown/mlp9", "brown-slice/learned", "brown-slice/fixed_pca",
                                   "brown-slice/fixed_random"}
    assert all(np.isfinite(s["test_ppl"]["mean"]) and s["test_ppl"]["n"] == 3 for s in doc["summary"].values())
    run_brown(load_corpus("brown"), ctx, quick=True)  # everything is in the file: nothing trains or changes
    assert {r["run"]: r for r in json.loads(out.read_text())["runs"]} == rows
