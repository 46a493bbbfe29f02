"""Words read by their spelling (analysis.spelling): a word outside the vocabulary scored through its own
vector equals the network with that vector as a row of C; nearest words; the input layer's size."""

import numpy as np
import pytest

from nplm_edu.analysis.spelling import input_sizes, nearest_by_spelling, spelled_log_prob
from nplm_edu.errors import UserError
from nplm_edu.models.char_input import CharConfig, CharInput
from nplm_edu.models.input import WithInput
from nplm_edu.models.nplm import NPLM, NPLMConfig

WORDS = ["the", "cat", "cats", "sat", "on", "mat", "<unk>", "dog"]
CFG = CharConfig(d=3, widths=(1, 2, 3), filters=2, max_len=6)


def model():
    net = NPLM(NPLMConfig(V=len(WORDS), n=3, m=CFG.m, h=5, dtype="float64", seed=1))
    return WithInput(net, CharInput(WORDS, CFG), seed=2)


def test_a_new_word_is_read_as_its_spelling():
    lm = model()
    c, t = np.array([[0, 8], [8, 9], [1, 2]]), np.array([3, 4, 5])  # ids 8, 9: "catz", "mats"
    got = spelled_log_prob(lm, c, t, ["catz", "mats"])
    P, words = lm.params, WORDS + ["catz", "mats"]
    x = np.stack([lm.input.vectors(P, [words[i] for i in row[::-1]]).ravel() for row in c])  # (K, 2m) w_{t-1} first
    a = np.tanh(P["d"] + x @ P["H"].T)
    y = P["b"] + a @ P["U"].T + x @ P["W"].T  # y = b + U a + W x over the |V| words
    expect = (y - np.log(np.exp(y).sum(axis=1, keepdims=True)))[np.arange(3), t]
    assert np.allclose(got, expect, atol=1e-12)
    assert np.allclose(spelled_log_prob(lm, c[2:], t[2:], []), lm.log_prob(c[2:], t[2:]))  # known words as before


def test_nearest_words_and_sizes():
    lm = model()
    near = nearest_by_spelling(lm, "cat", WORDS, k=3)
    assert near[0] == ("cat", 1.0) and len(near) == 3
    sizes = input_sizes(lm.input, 17_907)
    assert sizes["table_C"] == 17_907 * CFG.m and sizes["char_input"] == lm.input.num_params()
    with pytest.raises(UserError, match="spellings"):
        nearest_by_spelling(NPLM(NPLMConfig(V=4, n=2, m=2, h=2)), "a", ["a"])
