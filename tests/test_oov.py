"""Section 5's out-of-vocabulary rule, C(j) = sum_i C(i) P(i | context), on words mapped to <unk>."""

import numpy as np
import pytest

from nplm_edu.analysis.cooccurrence import nearest_neighbours
from nplm_edu.analysis.oov import expected_features, log_prob_with_rows, oov_study
from nplm_edu.data.corpus import Corpus, Vocabulary
from nplm_edu.data.synthetic import generate
from nplm_edu.data.vocab import UNK
from nplm_edu.errors import UserError
from nplm_edu.models.nplm import NPLMConfig
from nplm_edu.numerics.fused import FusedNPLM
from nplm_edu.training.trainer import TrainConfig, train

RARE = ("horse", "kitchen", "sleeping")  # an animal, a place, a verb: all three become <unk>


@pytest.fixture(scope="module")
def setup():
    tokens, classes = generate(40_000, seed=4)
    words, counts = np.unique(np.array(tokens), return_counts=True)
    keep = ~np.isin(words, RARE)
    vocab = Vocabulary(list(words[keep]) + [UNK], list(counts[keep]) + [int(counts[~keep].sum())])
    ids = vocab.encode(tokens)
    corpus = Corpus("synthetic-oov", vocab, ids, (32_000, 36_000))
    model = FusedNPLM(NPLMConfig(V=len(vocab), n=4, m=10, h=30, seed=0))
    train(model, corpus, TrainConfig(epochs=8, batch=32, lr=0.3, seed=0), quiet=True)
    return tokens, classes, corpus, model


def test_the_formula_and_the_extended_table(setup):
    tokens, classes, corpus, model = setup
    ctx = corpus.windows("train", 4)[0][:50]
    P, C = model.probs(ctx), model.params["C"].astype(np.float64)
    np.testing.assert_allclose(expected_features(model, ctx), P @ C, rtol=1e-10)  # sum_i C(i) P(i | context)
    c, t = corpus.windows("test", 4)
    row = model.params["C"][c[:20, -1]]  # a new word whose row copies each context's last word
    np.testing.assert_allclose(log_prob_with_rows(model, np.c_[c[:20, :-1], np.full(20, corpus.V)], t[:20], row[:1]),
                               model.log_prob(np.c_[c[:20, :-1], np.full(20, c[0, -1])], t[:20]), rtol=1e-5)
    with pytest.raises(UserError):
        log_prob_with_rows(model, np.full((1, 3), corpus.V + 1), t[:1], row[:1])


def test_unknown_words_get_the_features_of_their_class(setup):
    # From one occurrence, the rule puts each unknown word among the words of its class. (Whether the
    # next words are then predicted better is a question for Brown, where <unk> mixes thousands of
    # words: here the other context words already tell the network everything but a noun's number,
    # which the context BEFORE the noun cannot tell, so C(horse) mixes singular and plural animals.)
    tokens, classes, corpus, model = setup
    vocab, unk = corpus.vocab, corpus.vocab.unk
    out = oov_study(model, corpus.ids, tokens, unk, first=corpus.bounds[0])
    assert out["words"] == 3 and out["tokens"] > 1000
    for key in ("mean_log_prob_unk", "mean_log_prob_own", "mean_log_prob_other"):
        assert -3 < out[key] < -0.5, key
    known = np.array([i for i, w in enumerate(vocab.words) if w in classes and w != UNK])
    C = np.concatenate([model.params["C"][known], np.stack([out["features"][w] for w in RARE])])
    for j, w in enumerate(RARE):
        nn = nearest_neighbours(C, [len(known) + j], 3)[0]
        near = [classes[vocab.words[known[i]]] for i in nn if i < len(known)]
        assert sum(c.startswith(classes[w]) for c in near) >= 2, (w, near)
    with pytest.raises(UserError):
        oov_study(model, corpus.ids, tokens[:-1], unk)
