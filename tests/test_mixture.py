"""Mixtures of two language models: probabilities, EM weights (single and per bin), the report."""

import math
from dataclasses import asdict

import numpy as np
import pytest

from nplm_edu.analysis.mixture import Mixture, em_weight, mixed_log_prob, mixture_report
from nplm_edu.errors import UserError
from nplm_edu.models.lm import LanguageModel
from nplm_edu.models.nplm import NPLM, NPLMConfig


class Unigram(LanguageModel):
    """P(w) from counts, ignoring the context; bins = the last context word mod 3 (for the tests)."""

    order, n_bins = 2, 3

    def __init__(self, V, ids):
        self.V = V
        self.p = (np.bincount(ids, minlength=V) + 1.0) / (len(ids) + V)

    def probs(self, contexts):
        return np.tile(self.p, (len(contexts), 1))

    def bins(self, contexts):
        return np.asarray(contexts)[:, -1] % 3


def setup(V=9, T=300, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, V, T)
    ctx = np.stack([ids[:-3], ids[1:-2], ids[2:-1]], axis=1)  # (T-3, 3) for an order-4 NPLM
    tgt = ids[3:]
    nplm = NPLM(NPLMConfig(V=V, n=4, m=3, h=4, dtype="float64", seed=seed))
    return nplm, Unigram(V, ids), ctx, tgt


def test_probs_sum_to_one_and_match_log_prob():
    nplm, uni, c, t = setup()
    mix = Mixture(nplm, uni, 0.3)
    p = mix.probs(c[:20])
    assert np.allclose(p.sum(axis=1), 1.0)
    assert np.allclose(np.log(p[np.arange(20), t[:20]]), mix.log_prob(c[:20], t[:20]))
    # 0.3 P_a + 0.7 P_b, the unigram reading only the last context word
    want = 0.3 * nplm.probs(c[:20]) + 0.7 * uni.probs(c[:20, -1:])
    assert np.allclose(p, want)


def test_mixed_log_prob_is_stable():
    la, lb = np.array([-1000.0, np.log(0.2)]), np.array([-1001.0, np.log(0.6)])
    out = mixed_log_prob(la, lb, 0.5)
    assert np.isfinite(out[0]) and np.isclose(out[1], np.log(0.5 * 0.2 + 0.5 * 0.6))
    assert np.allclose(mixed_log_prob(la, lb, 1.0), la)


def test_em_single_weight_by_hand():
    # two tokens: P_a = (0.9, 0.1), P_b = (0.1, 0.9). By symmetry the likelihood
    # (l*0.9 + (1-l)*0.1)(l*0.1 + (1-l)*0.9) is maximal at l = 0.5.
    la, lb = np.log([0.9, 0.1]), np.log([0.1, 0.9])
    assert np.isclose(em_weight(la, lb, init=0.2)[0], 0.5, atol=1e-6)
    # model a always better: weight -> 1
    assert em_weight(np.log([0.5, 0.5]), np.log([0.1, 0.1]))[0] > 0.99


def test_em_never_decreases_likelihood_and_beats_fixed_half():
    rng = np.random.default_rng(1)
    la, lb = np.log(rng.random(500)), np.log(rng.random(500) ** 3)
    prev = -np.inf
    for iters in (1, 2, 5, 20):
        lam = em_weight(la, lb, iters=iters)[0]
        ll = mixed_log_prob(la, lb, lam).sum()
        assert ll >= prev - 1e-9
        prev = ll
    assert prev >= mixed_log_prob(la, lb, 0.5).sum()


def test_em_per_bin():
    # bin 0: model a right; bin 1: model b right; bin 2 empty keeps its initial weight
    la = np.log([0.9, 0.9, 0.01, 0.01])
    lb = np.log([0.01, 0.01, 0.9, 0.9])
    lam = em_weight(la, lb, np.array([0, 0, 1, 1]), n_bins=3)
    assert lam[0] > 0.95 and lam[1] < 0.05 and lam[2] == 0.5


def test_fit_and_report():
    nplm, uni, c, t = setup()
    valid, test = (c[:150], t[:150]), (c[150:], t[150:])
    single = Mixture.fit(nplm, uni, *valid)
    binned = Mixture.fit(nplm, uni, *valid, per_bin=True)
    assert binned.weights.shape == (3,)
    rep = mixture_report(nplm, uni, valid, test)
    ppl = rep["perplexity"]
    assert set(ppl) == {"neural", "ngram", "mix 0.5", "mix EM", "mix per bin"}
    assert np.isclose(rep["weights"]["mix EM"], single.weights[0])
    assert np.allclose(rep["weights"]["mix per bin"], binned.weights)
    assert np.isclose(ppl["mix EM"]["test"], single.perplexity(*test))
    assert np.isclose(ppl["mix per bin"]["test"], binned.perplexity(*test))
    # EM maximizes the validation likelihood: no worse than 0.5 there, per-bin no worse than single
    assert ppl["mix EM"]["valid"] <= ppl["mix 0.5"]["valid"] + 1e-9
    assert ppl["mix per bin"]["valid"] <= ppl["mix EM"]["valid"] + 1e-9
    # a mixture is never worse than the worse component (log-sum-exp is concave... per token:
    # lam Pa + (1-lam) Pb >= min(Pa, Pb))
    assert ppl["mix 0.5"]["test"] <= max(ppl["neural"]["test"], ppl["ngram"]["test"])
    assert math.isfinite(ppl["mix per bin"]["test"])


def test_bad_mixtures():
    nplm, uni, c, t = setup()
    with pytest.raises(UserError):
        Mixture(nplm, Unigram(5, np.arange(5)), 0.5)
    with pytest.raises(UserError):
        Mixture(nplm, uni, 1.5)
    with pytest.raises(UserError):
        Mixture(nplm, uni, [0.2, 0.3])  # per-bin weights without bins


def test_with_the_interpolated_trigram():
    from nplm_edu.models import ngram

    rng = np.random.default_rng(0)
    V = 12
    ids = rng.integers(0, V, 2000)
    tri = ngram.InterpolatedTrigram(V, verbose=False)
    from numpy.lib.stride_tricks import sliding_window_view
    w = sliding_window_view(ids, 4)
    valid, test = (w[1500:1750, :-1], w[1500:1750, -1]), (w[1750:, :-1], w[1750:, -1])
    tri.fit(ids[:1500], valid=(valid[0][:, 1:], valid[1]))
    nplm = NPLM(NPLMConfig(V=V, n=4, m=3, h=4, seed=0))
    rep = mixture_report(nplm, tri, valid, test)
    assert "mix per bin" in rep["perplexity"] and len(rep["weights"]["mix per bin"]) == tri.n_bins
    mix = Mixture.fit(nplm, tri, *valid, per_bin=True)
    assert np.allclose(mix.probs(test[0][:5]).sum(axis=1), 1.0)
    assert np.isclose(mix.perplexity(*test), rep["perplexity"]["mix per bin"]["test"])


def test_mix_command(tmp_path, capsys):
    import argparse
    import json

    from nplm_edu.cli.mix import add_cli
    from nplm_edu.data.corpus import load_corpus
    from nplm_edu.training.trainer import TrainConfig, train

    corpus = load_corpus("synthetic")
    model = NPLM(NPLMConfig(V=corpus.V, n=3, m=4, h=8, seed=0))
    train(model, corpus, TrainConfig(epochs=2, batch=64, lr=0.3), out_dir=tmp_path / "run", quiet=True)
    ap = argparse.ArgumentParser()
    add_cli(ap.add_subparsers())
    args = ap.parse_args(["mix", str(tmp_path / "run" / "checkpoint.npz"), "--json", str(tmp_path / "mix.json")])
    assert args.func(args) == 0
    rep = json.loads((tmp_path / "mix.json").read_text())
    valid = corpus.windows("valid", 3)
    assert np.isclose(rep["perplexity"]["neural"]["valid"], model.perplexity(*valid))  # the best parameters
    said = capsys.readouterr()
    assert "mix per bin" in said.out
    assert f"wrote {tmp_path / 'mix.json'}" in said.out  # says what it wrote
    assert "fitting the deleted-interpolation trigram on" in said.err and "scoring" in said.err  # and what it does
    args = ap.parse_args(["mix", str(tmp_path / "run" / "checkpoint.npz"), "--quiet"])
    assert args.func(args) == 0
    assert capsys.readouterr().err == ""


def test_scoring_shows_a_bar_when_asked(monkeypatch):
    """batched_log_prob's bar counts every token scored (shown once scoring takes a second)."""
    from nplm_edu.analysis import mixture

    seen = {}

    class Bar:
        def __init__(self, **kw):
            seen.update(kw, n=0)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, k):
            seen["n"] += k

    monkeypatch.setattr(mixture, "progress_bar", lambda **kw: Bar(**kw))

    class Uniform:
        order, V = 3, 5

        def log_prob(self, contexts, targets):
            return np.full(len(targets), -np.log(5))

    out = mixture.batched_log_prob(Uniform(), np.zeros((2500, 2), int), np.zeros(2500, int), batch=1000,
                                   progress="valid: network")
    assert len(out) == 2500 and seen["n"] == 2500 and seen["desc"] == "valid: network" and not seen["disable"]


def test_mix_refuses_a_checkpoint_whose_network_gives_nan(tmp_path, capsys):
    """A checkpoint with finite but huge parameters (a diverging run) must not print nan with exit 0."""
    from nplm_edu.cli import main
    from nplm_edu.data.corpus import load_corpus
    from nplm_edu.numerics.fused import FusedNPLM
    from nplm_edu.training.checkpoint import TrainState, corpus_fingerprints, save_checkpoint
    from nplm_edu.training.trainer import TrainConfig

    corpus = load_corpus("synthetic", synthetic_tokens=3000)
    model = FusedNPLM(NPLMConfig(V=corpus.V, n=3, m=4, h=5))
    for p in model.params.values():
        p[...] = 3e37  # finite, but the logits overflow to inf and the probabilities to nan
    meta = {"kind": "nplm", "model": asdict(model.config), "train": vars(TrainConfig()), "state": vars(TrainState()),
            "data": corpus_fingerprints(corpus, 3)[0]}
    save_checkpoint(tmp_path / "checkpoint.npz", model.params, meta)
    rc = main(["mix", str(tmp_path / "checkpoint.npz"), "--corpus", "synthetic", "--synthetic-tokens", "3000", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error:") and "non-finite" in err and len(err.strip().splitlines()) == 1
    # finite log-probabilities so low that the perplexity overflows a float (math.exp raised OverflowError)
    for p in model.params.values():
        p[...] = 0.0
    model.params["b"][0] = 1e5  # every word but the first at log-probability -1e5
    save_checkpoint(tmp_path / "checkpoint.npz", model.params, meta)
    rc = main(["mix", str(tmp_path / "checkpoint.npz"), "--corpus", "synthetic", "--synthetic-tokens", "3000", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "non-finite" in err and len(err.strip().splitlines()) == 1, err


def test_mix_refuses_a_checkpoint_trained_on_other_data(tmp_path, capsys):
    """Another corpus seed, or the same ids over other words: the perplexities would be of the wrong text."""
    from nplm_edu.cli import main

    words = np.random.default_rng(0).choice([f"w{i}" for i in range(12)], 3000)
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("\n".join(" ".join(words[i:i + 30]) for i in range(0, 3000, 30)))
    b.write_text(a.read_text().replace("w", "q"))  # the same ids, other words
    small = ["--n", "3", "--h", "5", "--m", "3", "--epochs", "1", "--quiet"]
    assert main(["train", "--corpus", str(a), *small, "--out", str(tmp_path / "run")]) == 0
    ckpt = str(tmp_path / "run" / "checkpoint.npz")
    assert main(["mix", ckpt, "--corpus", str(a)]) == 0
    capsys.readouterr()
    for other in (["--corpus", str(b)], ["--corpus", str(a), "--train-size", "0.7"]):
        assert main(["mix", ckpt, *other]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"error: {ckpt} was trained on other data (another corpus, split or vocabulary): mix it on "
                       "the corpus it was trained on, with the same corpus options"], err
