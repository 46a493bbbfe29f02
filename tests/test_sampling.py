"""The sampler: the model's own distribution at T = 1, temperature, seeds, stops; samples from the
book's models on the synthetic grammar are (mostly) grammatical, a uniform model's are not."""

import numpy as np
import pytest

from nplm_edu.analysis.sampling import load_network, reshape, sample, seeded_samples, side_by_side
from nplm_edu.data.corpus import load_corpus
from nplm_edu.data.synthetic import GrammarHMM, split_sentences
from nplm_edu.errors import UserError
from nplm_edu.models.lm import LanguageModel
from nplm_edu.models.ngram import InterpolatedTrigram, KneserNey
from nplm_edu.models.nplm import NPLMConfig
from nplm_edu.numerics.fused import FusedNPLM
from nplm_edu.training.trainer import TrainConfig, train


class Fixed(LanguageModel):
    """P(next) = P[last word]: a bigram with a known table."""
    order = 2

    def __init__(self, P):
        self.P, self.V = np.asarray(P, float), len(P)

    def probs(self, contexts):
        return self.P[contexts[:, -1]]


P = np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25], [0.2, 0.2, 0.6]])


def test_frequencies_follow_the_model_and_the_temperature():
    rng = np.random.default_rng(0)
    first = np.array([s[0] for s in sample(Fixed(P), [0], rng, length=1, samples=20_000)])
    np.testing.assert_allclose(np.bincount(first, minlength=3) / 20_000, P[0], atol=0.015)
    hot = np.array([s[0] for s in sample(Fixed(P), [0], rng, length=1, temperature=2.0, samples=20_000)])
    want = np.sqrt(P[0]) / np.sqrt(P[0]).sum()
    np.testing.assert_allclose(np.bincount(hot, minlength=3) / 20_000, want, atol=0.015)
    assert sample(Fixed(P), [0], rng, length=4, temperature=0) == [[1, 0, 1, 0]]  # greedy
    np.testing.assert_allclose(reshape(P, 0.5).sum(axis=1), 1)
    assert reshape(P, 1.0, ban=[1])[:, 1].max() == 0


def test_seeds_stops_lengths_and_bad_input():
    a = sample(Fixed(P), [2], np.random.default_rng(5), length=50, samples=3)
    assert a == sample(Fixed(P), [2], np.random.default_rng(5), length=50, samples=3)
    assert a != sample(Fixed(P), [2], np.random.default_rng(6), length=50, samples=3)
    out = sample(Fixed(P), [2], np.random.default_rng(1), length=40, stop=[0], samples=50)
    assert all(s[-1] == 0 and 0 not in s[:-1] or len(s) == 40 and 0 not in s for s in out)
    assert max(len(s) for s in out) <= 40 and min(len(s) for s in out) >= 1
    assert all(1 not in s for s in sample(Fixed(P), [2], np.random.default_rng(1), length=30, ban=[1], samples=5))
    for bad in (dict(temperature=-1), dict(length=0), dict(ban=[0, 1, 2])):
        with pytest.raises(UserError):
            sample(Fixed(P), [0], np.random.default_rng(0), **bad)
    with pytest.raises(UserError):
        sample(Fixed(P), [], np.random.default_rng(0))
    with pytest.raises(UserError):
        sample(Fixed(P), [7], np.random.default_rng(0))
    with pytest.raises(UserError):
        sample(Fixed(P), [0], 3)


def grammatical_share(texts):
    """Share of the whole sentences of the samples that the grammar can produce."""
    hmm, ok, total = GrammarHMM(), 0, 0
    for text in texts:
        for s in split_sentences(text.split())[1:-1]:  # not the end of the prompt's sentence, nor a cut one
            total += 1
            ok += s[0] not in ("<p>", "<t>") and np.isfinite(hmm.log_probs(s).sum())
    return ok / max(total, 1)


def test_the_book_models_on_the_synthetic_grammar(tmp_path):
    corpus = load_corpus("synthetic", synthetic_tokens=30_000, seed=0)
    kn5 = KneserNey(5, corpus.V).fit(corpus.train)
    tri = InterpolatedTrigram(corpus.V, verbose=False).fit(corpus.train, valid=corpus.windows("valid", 3))
    net = FusedNPLM(NPLMConfig(V=corpus.V, n=5, m=10, h=30, seed=0))
    train(net, corpus, TrainConfig(epochs=6, batch=32, lr=0.3, seed=0), out_dir=tmp_path, quiet=True)

    class Uniform(LanguageModel):
        order, V = 2, corpus.V

        def probs(self, contexts):
            return np.full((len(contexts), self.V), 1 / self.V)

    prompt = [".", "<p>", "yesterday", "the"]
    texts = side_by_side({"trigram": tri, "kn5": kn5, "network": net, "uniform": Uniform()}, corpus.vocab, prompt,
                         seed=3, length=60, samples=8, ban=["<unk>"])
    assert set(texts) == {"trigram", "kn5", "network", "uniform"}
    assert all("<unk>" not in t for ts in texts.values() for t in ts)
    for name in ("kn5", "network"):
        assert grammatical_share(texts[name]) > 0.9, (name, texts[name][:2])
    assert grammatical_share(texts["uniform"]) < 0.1
    # the Brown helper finds a checkpoint only for the corpus it was trained on, and refuses another
    assert load_network([tmp_path / "checkpoint.npz"], corpus) is not None
    other = load_corpus("synthetic", synthetic_tokens=30_000, seed=1)
    assert load_network([tmp_path / "absent.npz"], corpus) is None  # nothing there: the chapters say so
    with pytest.raises(UserError, match="was trained on other data than synthetic as split here"):
        load_network([tmp_path / "checkpoint.npz", tmp_path / "absent.npz"], other)  # not None, silently


def test_sampled_ids_are_pinned():
    """The ids drawn with a fixed seed, recorded once: a change to the sampler's arithmetic that moved
    any draw (the stored samples of the results files and the chapters) fails here."""
    from nplm_edu.models.rnn import RecurrentConfig
    from nplm_edu.numerics.recurrent import recurrent_model

    table = np.random.default_rng(7).dirichlet(np.full(40, 0.3), size=40)
    first = {T: sample(Fixed(table), [5], np.random.default_rng(11), length=12, temperature=T, ban=[3], samples=3)[0]
             for T in (1.0, 0.7, 1.6)}
    assert first == {1.0: [4, 1, 10, 21, 24, 30, 27, 7, 12, 33, 24, 32],
                     0.7: [2, 1, 12, 33, 35, 25, 35, 8, 12, 33, 28, 37],
                     1.6: [5, 2, 2, 26, 25, 30, 29, 1, 23, 31, 16, 33]}
    lstm = recurrent_model(RecurrentConfig(V=40, cell="lstm", m=6, h=8, seed=4))
    assert sample(lstm, [1, 2, 5], np.random.default_rng(12), length=12, temperature=0.8, samples=3) == [
        [10, 7, 26, 34, 4, 18, 10, 37, 2, 34, 31, 8], [37, 13, 4, 0, 10, 18, 7, 36, 37, 16, 26, 5],
        [7, 9, 35, 21, 16, 37, 26, 35, 25, 8, 31, 30]]


def test_seeded_samples_continue_the_validation_prompt_and_are_fixed_by_their_seeds():
    corpus = load_corpus("synthetic", synthetic_tokens=8_000)
    model = FusedNPLM(NPLMConfig(V=corpus.V, n=3, m=8, h=10, seed=1))
    a = seeded_samples(model, corpus)
    assert a == seeded_samples(model, corpus)  # the seeds fix the texts
    assert a["prompt"] == " ".join(corpus.vocab.decode(corpus.valid[:4])) and a["seeds"] == [0, 1, 2]
    assert [len(t.split()) for t in a["texts"]] == [30, 30, 30] and len(set(a["texts"])) == 3
    # each text is what the sampler draws with that seed, from that prompt
    first = sample(model, corpus.valid[:4], np.random.default_rng(1), length=30)[0]
    assert a["texts"][1] == " ".join(corpus.vocab.decode(first))
    b = seeded_samples(model, corpus, seeds=(5,), length=7)
    assert b["seeds"] == [5] and len(b["texts"][0].split()) == 7
