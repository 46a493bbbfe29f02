"""Modified Kneser-Ney discounts that always leave mass to back off with (tiny vocabularies)."""

import numpy as np

from nplm_edu.data.corpus import load_corpus
from nplm_edu.models.ngram import KneserNey, modified_kn_discounts


def test_formula_when_it_is_valid():
    np.testing.assert_allclose(modified_kn_discounts(np.array([0, 10, 5, 3, 2])), [0.5, 1.1, 3 - 4 / 3])


def test_invalid_estimates_fall_back_to_one_absolute_discount():
    # n1..n4 = 10, 2, 1, 40: D(3+) = 3 - 4 (10/14)(40/1) < 0 -> Y = 10 / (10 + 4) for every count
    np.testing.assert_allclose(modified_kn_discounts(np.array([0, 10, 2, 1, 40])), [10 / 14] * 3)
    np.testing.assert_allclose(modified_kn_discounts(np.array([0, 0, 5, 3, 2])), [0.5] * 3)  # no n1


def test_a_small_vocabulary_never_gets_probability_zero():
    # the synthetic grammar: its frequent n-grams once drove D(2) and D(3+) to 0, and an n-gram unseen
    # after a seen context got probability 0 (an infinite perplexity on a held-out sentence)
    syn = load_corpus("synthetic", synthetic_tokens=20_000, seed=0)
    for order in (3, 4, 5):
        kn = KneserNey(order, syn.V).fit(syn.train)
        assert all(np.all(kn.D[k] > 0) for k in range(1, order + 1)), order
        assert np.all(kn.probs(syn.windows("test", order)[0]) > 0), order
