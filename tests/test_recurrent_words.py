"""Rare and unknown words for a character-aware stream model (analysis/recurrent_words, experiments/recurrent_words)."""

import numpy as np
import pytest

from nplm_edu.analysis.recurrent_words import frequency_table, oov_reading, spelled_stream
from nplm_edu.data.corpus import load_corpus
from nplm_edu.experiments.protocol import Method
from nplm_edu.experiments import recurrent_words
from nplm_edu.experiments.recurrent_words import char_words, original_test_words, with_analysis
from nplm_edu.models.char_input import CharConfig, CharInput
from nplm_edu.models.input import WithInput
from nplm_edu.models.rnn import RecurrentConfig
from nplm_edu.numerics.recurrent import FastLSTM

WORDS = ["<unk>", "the", "cat", "cats", "sat", "on", "mat", "dog"]
UNK = 0


def char_lm(words=WORDS, seed=0):
    layer = CharInput(words, CharConfig(d=4, widths=(1, 2), filters=3, max_len=8))
    net = FastLSTM(RecurrentConfig(V=len(words), cell="lstm", m=layer.m, h=6, dtype="float64", seed=seed))
    lm = WithInput(net, layer, seed=seed)
    rng = np.random.default_rng(seed)
    for k, p in lm.params.items():
        if k != "Q":
            p[...] = 0.5 * rng.standard_normal(p.shape)  # gates open: the input matters
    return lm


def test_frequency_table_bins_tokens_and_perplexities():
    counts = np.array([0, 2, 50, 5000])  # training counts of ids 0 (unk) .. 3
    inputs, targets = np.array([1, 2, 3, 0]), np.array([2, 3, 0, 1])
    logs = {"a": np.log([0.5, 0.25, 0.1, 0.2]), "b": np.log([0.1, 0.1, 0.1, 0.1])}
    t = frequency_table(counts, 0, inputs, targets, logs)
    target = {b["bin"]: b for b in t["target"]}
    assert target["unk"]["tokens"] == 1 and target["unk"]["a"] == pytest.approx(10.0)
    assert target["11-100"]["tokens"] == 1 and target["11-100"]["a"] == pytest.approx(2.0)
    assert target["0-3"]["b"] == pytest.approx(10.0) and target["4-10"]["tokens"] == 0 and target["4-10"]["a"] is None
    previous = {b["bin"]: b for b in t["previous"]}
    assert previous["1001-10000"]["tokens"] == 1 and previous["1001-10000"]["a"] == pytest.approx(10.0)
    assert sum(b["tokens"] for b in t["previous"]) == sum(b["tokens"] for b in t["target"]) == 4


def test_spelled_stream_reads_unknown_words_by_their_spelling():
    lm = char_lm()
    rng = np.random.default_rng(3)
    inputs = rng.integers(0, len(WORDS), 60)
    inputs[[0, 10, 25, 26]] = UNK
    targets = np.append(inputs[1:], 1)
    plain = lm.log_prob_stream(inputs, targets)
    words = [None] * len(inputs)
    base, own, after = spelled_stream(lm, inputs, targets, words, UNK)
    assert np.allclose(base, plain, atol=1e-10) and np.allclose(own, base) and not after.any()  # nothing spelled
    words[10], words[25] = "dogs", "mats"  # position 0 stays <unk>, 26 has no original word
    base, own, after = spelled_stream(lm, inputs, targets, words, UNK)
    assert np.allclose(base, plain, atol=1e-10)
    assert np.flatnonzero(after).tolist() == [10, 25]
    assert np.allclose(own[:10], base[:10]) and not np.allclose(own[10], base[10])  # read from position 10 on
    words[10], words[25] = "<unk>", "<unk>"  # <unk>'s own spelling: the same vector as <unk>'s
    assert np.allclose(spelled_stream(lm, inputs, targets, words, UNK)[1], base, atol=1e-10)
    words[10] = "dogs"
    r = oov_reading(lm, inputs, targets, words, UNK)
    assert (r["unknown_inputs"], r["spelled_inputs"], r["spelled_words"]) == (int(np.sum(inputs == UNK)), 2, 2)
    assert r["ppl_as_unk"] == pytest.approx(float(np.exp(-plain.mean())), abs=1e-3)


def test_char_words_without_original_words_or_word_level_row(tmp_path):
    corpus = load_corpus("synthetic", synthetic_tokens=3000)
    layer = CharInput(corpus.vocab.words, CharConfig(d=4, widths=(1, 2), filters=3, max_len=8))
    lm = WithInput(FastLSTM(RecurrentConfig(V=corpus.V, cell="lstm", m=layer.m, h=6, seed=1)), layer, seed=1)
    assert original_test_words(corpus) is None
    w = char_words(lm, corpus, tmp_path, tmp_path / "recurrent.json")
    assert "oov" in w and "skipped" in w["oov"] and "not in the results file" in w["word_level"]
    assert sum(b["tokens"] for b in w["by_frequency"]["target"]) == len(corpus.test)
    assert all(set(b) == {"bin", "tokens", "char-lstm"} for b in w["by_frequency"]["previous"])


def test_only_the_character_aware_row_gets_the_words_field(monkeypatch):
    m = Method("lstm", build=None, extra=lambda model, corpus: {"x": 1})
    assert with_analysis(m, "lstm", None, None) is m
    monkeypatch.setitem(recurrent_words.ANALYSES, "char-lstm", lambda model, corpus, runs, out: {"bins": runs})
    m2 = with_analysis(Method("char-lstm", build=None, extra=lambda model, corpus: {"x": 1}), "char-lstm", "r", None)
    assert m2.name == "char-lstm" and m2.extra(None, None) == {"x": 1, "words": {"bins": "r"}}
