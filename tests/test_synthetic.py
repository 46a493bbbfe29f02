"""The synthetic grammar's best achievable perplexity, computed from its definition, against samples."""

import numpy as np
import pytest

from nplm_edu.data.corpus import windows
from nplm_edu.data.synthetic import (GrammarHMM, entropy_rate, generate, sentence_entropy, split_sentences,
                                     tokens_per_sentence, window_entropy)
from nplm_edu.errors import UserError


def plug_in_window_entropy(ids, k, W):
    """H(w_t | k previous tokens) from the counts of a sample, with the Miller-Madow bias correction."""
    c, t = windows(ids, k + 1)
    key = np.zeros(len(t), np.int64)
    for j in range(k):
        key = key * W + c[:, j]
    _, cf = np.unique(key * W + t, return_counts=True)
    _, cc = np.unique(key, return_counts=True)
    N = len(t)
    h = -(cf / N * np.log(cf / N)).sum() + (cc / N * np.log(cc / N)).sum()
    return h + (len(cf) - len(cc)) / (2 * N)


def test_two_exact_computations_agree():
    # the entropy of the choices per sentence / tokens per sentence, against enumerating every window
    # of the hidden Markov model: three words of context reach everything that matters
    rate = entropy_rate()
    assert window_entropy(3) == pytest.approx(rate, abs=1e-12)
    assert window_entropy(4) == pytest.approx(rate, abs=1e-12)
    assert window_entropy(0) > window_entropy(1) > window_entropy(2) > window_entropy(3)
    assert np.exp(rate) == pytest.approx(4.1956, abs=1e-4)


def test_exact_values_match_a_large_sample():
    toks, _ = generate(500_000, seed=7)
    hmm = GrammarHMM()
    ids = hmm.encode(toks)
    for k in (1, 2, 3):
        assert plug_in_window_entropy(ids, k, len(hmm.words)) == pytest.approx(window_entropy(k), abs=3e-3), k
    # the sample's own log-likelihood per token under the grammar tends to the entropy rate
    assert -hmm.log_probs(toks[:200_000]).mean() == pytest.approx(entropy_rate(), abs=5e-3)
    sents = split_sentences(toks[:200_000])[:-1]
    assert np.mean([len(s) for s in sents]) == pytest.approx(tokens_per_sentence(), abs=0.02)


def test_other_settings_of_the_grammar():
    args = dict(p_time=0.2, sentences_per_paragraph=2.0, paragraphs_per_text=3.0)
    toks, _ = generate(200_000, seed=3, **args)
    hmm = GrammarHMM(*args.values())
    assert -hmm.log_probs(toks).mean() == pytest.approx(entropy_rate(*args.values()), abs=6e-3)
    assert window_entropy(3, *args.values()) == pytest.approx(entropy_rate(*args.values()), abs=1e-12)
    assert sentence_entropy(*args.values()) < sentence_entropy()  # fewer time words and marks to choose


def test_sentences_and_forward_probabilities():
    toks, _ = generate(3_000, seed=1)
    sents = split_sentences(toks)
    assert sum(sents, []) == toks
    assert all(s[-1] in (".", "<p>", "<t>") for s in sents[:-1])
    lp = GrammarHMM().log_probs(["yesterday", "the", "cat", "was"])
    assert lp[-1] == pytest.approx(0.0)  # "yesterday ... was": the tense is decided
    assert np.exp(lp[2]) == pytest.approx(0.6 / 6)  # "the" is singular with probability 0.6
    assert GrammarHMM().log_probs(["yesterday", "the", "cat", "is"])[-1] == -np.inf
    with pytest.raises(UserError):
        GrammarHMM().encode(["unicorn"])
    with pytest.raises(UserError):
        window_entropy(-1)
