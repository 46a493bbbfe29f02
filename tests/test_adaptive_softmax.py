"""The adaptive softmax (models.adaptive_softmax): gradients against central differences and against an
independent reverse-mode AD of Grave et al.'s equations (tests/autodiff.py) in float64, probabilities
summing to 1 over the vocabulary, the frequency ranking, training through the trainer, bad settings in
one line."""

import numpy as np
import pytest

from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.models.adaptive_softmax import AdaptiveSoftmax, frequency_rank
from nplm_edu.models.gradcheck import gradcheck, relative_error
from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.models.sparse_output import densify, train_counts
from nplm_edu.training.trainer import TrainConfig, train

V, H = 13, 16
COUNTS = np.random.default_rng(0).integers(0, 50, V)


def model_and_batch(layer, seed=0, K=12):
    """An NPLM (no direct connections, float64) with ``layer`` on top, its parameters away from their
    initial values, and K examples whose targets reach every part of the layer."""
    rng = np.random.default_rng(seed)
    model = NPLM(NPLMConfig(V=V, n=4, m=3, h=H, direct=False, dtype="float64", seed=1), output=layer)
    for p in model.params.values():
        p[...] = 0.5 * rng.standard_normal(p.shape)
    c, t = rng.integers(0, V, (K, 3)), rng.integers(0, V, K)
    t[:4] = frequency_rank(V, COUNTS)[[0, 5, 9, 12]]  # a head word and a word of each tail, at least
    t[4] = t[3]  # a repeated target
    return model, c, t


def check_layer(layer, seed=0):
    """Every parameter's gradient against central differences; probabilities sum to 1; log_prob agrees."""
    model, c, t = model_and_batch(layer, seed)
    errors = gradcheck(model, c, t, max_entries=400)
    assert set(errors) == set(model.params)
    for k, err in errors.items():
        assert err < 1e-7, (k, err)
    lp = model.log_probs(c)  # (K, |V|)
    assert lp.shape == (len(c), V)
    assert np.allclose(np.exp(lp).sum(axis=1), 1.0, atol=1e-12)  # every context
    assert np.allclose(model.log_prob(c, t), lp[np.arange(len(t)), t], atol=1e-12)
    return model, c, t


def layer_case(layer, seed=0, K=12, counts=COUNTS):
    """The layer's parameters (float64, away from their initial values), a hidden layer a (K, h) and K
    targets: the first word of each band / of the head and of each tail by frequency, and a repeat."""
    rng = np.random.default_rng(seed)
    P = layer.init_params(rng, np.float64)
    for k, p in P.items():
        if k not in layer.state:
            p[...] = 0.5 * rng.standard_normal(p.shape)
    a, t = rng.standard_normal((K, layer.h)), rng.integers(0, layer.V, K)
    by_frequency = np.argsort(-counts, kind="stable")  # the words from the most frequent, ties by id
    firsts = by_frequency[[0] + list(layer.bounds[1:-1])]
    t[:len(firsts)], t[-1] = firsts, firsts[-1]
    return P, a, t


def against_autodiff(loss, ga, grads, P, a, t, autodiff_loss, zero=()):
    """A layer's loss, its hand-derived gradients ``grads`` (dense) and dL/da ``ga`` against
    ``autodiff_loss(Vars, a Var, t)``, the same loss written with tests/autodiff.py's operations:
    each gradient's relative error (asserted below 1e-12; the loss to 1e-13 relative). Every
    gradient is reached by the batch (not zero) but those named in ``zero``, zero in both."""
    from autodiff import Var

    Vars, A = {k: Var(v) for k, v in P.items()}, Var(a)
    L = autodiff_loss(Vars, A, t)
    L.backward()
    assert loss == pytest.approx(float(L.value), rel=1e-13)
    errors = {"a": relative_error(ga, A.grad)}
    for k in grads:
        g = densify(grads[k], P[k])
        assert (np.abs(Vars[k].grad).max() > 0) != (k in zero) and (k not in zero or not g.any()), k
        errors[k] = relative_error(g, Vars[k].grad)
    assert max(errors.values()) < 1e-12, errors
    return errors


def layer_against_autodiff(layer, P, a, t, autodiff_loss, zero=()):
    """:func:`against_autodiff` for the layer's loss and backward_sparse; every trained parameter checked."""
    loss, cache = layer.loss(P, {"U": a}, t)
    g_in, grads = layer.backward_sparse(P, cache)
    assert set(grads) == set(P) - set(layer.state)
    return against_autodiff(loss, g_in["U"], grads, P, a, t, autodiff_loss, zero)


def one_word_tails(layer) -> tuple:
    """The parameters of the tails of one word: log softmax over one word is 0, their gradients are zero."""
    return tuple(f"{k}_{i}" for i in range(1, layer.n + 1) if layer.bounds[i + 1] - layer.bounds[i] == 1
                 for k in ("Proj", "U", "b"))


def adaptive_autodiff_loss(P, a, targets, cutoffs, counts=COUNTS):
    """Grave et al.'s (2017) mean NLL written with tests/autodiff.py's operations: log p(w) = log
    softmax(y_head)[w's head unit] (+ log softmax(y_i)[w] for w in tail i), every tail computed for every
    example and kept by a 0/1 weight where the target is in it."""
    from autodiff import logsumexp, pick, total

    K = len(targets)
    rank = np.argsort(np.argsort(-counts, kind="stable"))  # (|V|,) each word's frequency rank, ties by id
    bounds = [0] + list(cutoffs) + [len(counts)]  # the head: ranks 0..c_1; tail i: bounds[i]..bounds[i + 1]
    r = rank[targets]  # (K,)
    tail = np.searchsorted(bounds[1:-1], r, side="right")  # (K,) 0: the head, i: tail i
    y_head = a @ P["U_head"].T + P["b_head"]  # (K, c_1 + n)
    head_unit = np.where(tail == 0, r, bounds[1] + tail - 1)  # the word itself, or its tail's token
    logp = total(pick(y_head - logsumexp(y_head), head_unit))
    for i in range(1, len(bounds) - 1):
        y = (a @ P[f"Proj_{i}"].T) @ P[f"U_{i}"].T + P[f"b_{i}"]  # (K, |tail i|) y_i = b_i + U_i Proj_i a
        inside = np.clip(r - bounds[i], 0, bounds[i + 1] - bounds[i] - 1)  # the target's place (any, outside)
        logp = logp + total(pick(y - logsumexp(y), inside) * (tail == i).astype(np.float64))
    return logp * (-1.0 / K)


@pytest.mark.parametrize("cutoffs", [[4, 9], [6], [1, 2, 3]])
def test_backward_equals_automatic_differentiation(cutoffs):
    """The hand-derived backward (head, projections, tails, dL/da) equals an independent reverse-mode AD."""
    layer = AdaptiveSoftmax(V, H, cutoffs, COUNTS)
    P, a, t = layer_case(layer)
    layer_against_autodiff(layer, P, a, t, lambda P, a, t: adaptive_autodiff_loss(P, a, t, cutoffs),
                           zero=one_word_tails(layer))  # [1, 2, 3]: tails 1 and 2 hold one word each


def test_shapes_follow_the_cutoffs_and_div():
    layer = AdaptiveSoftmax(V, H, [4, 9], COUNTS)
    P = layer.init_params(np.random.default_rng(0), np.float64)
    assert P["U_head"].shape == (4 + 2, H) and P["Proj_1"].shape == (4, H) and P["U_1"].shape == (5, 4)
    assert P["Proj_2"].shape == (1, H) and P["U_2"].shape == (4, 1)  # h / 4^2 = 1
    assert layer.decayed == ("U_head", "Proj_1", "U_1", "Proj_2", "U_2")


@pytest.mark.parametrize("cutoffs", [[4, 9], [6], [1, 2, 3]])
def test_gradients_and_probabilities(cutoffs):
    check_layer(AdaptiveSoftmax(V, H, cutoffs, COUNTS))


def test_a_tail_without_targets_gets_zero_gradients_and_a_wrong_backward_is_caught():
    layer = AdaptiveSoftmax(V, H, [4, 9], COUNTS)
    model, c, t = model_and_batch(layer)
    head = frequency_rank(V, COUNTS)[:4]
    t = head[np.arange(len(t)) % 4]  # head words only
    _, grads = model.loss_and_grads(c, t)
    assert not grads["U_1"].any() and not grads["Proj_2"].any() and grads["U_head"].any()
    assert max(gradcheck(model, c, t).values()) < 1e-7
    good = layer.backward_sparse
    layer.backward_sparse = lambda P, cache: good(P, dict(cache, tails=[]))  # forgets the tails
    _, c2, t2 = model_and_batch(layer)
    assert gradcheck(model, c2, t2)["Proj_1"] > 1e-3


def test_the_frequent_words_are_in_the_head():
    layer = AdaptiveSoftmax(V, H, [3, 8], COUNTS)
    top = np.argsort(-COUNTS, kind="stable")[:3]
    assert set(np.flatnonzero(layer.cluster == 0)) == set(top)
    assert np.array_equal(AdaptiveSoftmax(V, H, [3]).cluster, [0] * 3 + [1] * 10)  # no counts: ids are ranks


@pytest.mark.parametrize("cutoffs", [[], [0, 4], [4, 4], [5, 13], [2.5], [True]])
def test_bad_cutoffs_are_one_line(cutoffs):
    with pytest.raises(UserError, match="cutoffs must be increasing"):
        AdaptiveSoftmax(V, H, cutoffs)


def train_a_little(make_layer):
    """A tiny NPLM with the layer made by ``make_layer(V, h, counts)``, trained through the trainer on
    the synthetic corpus: its history."""
    corpus = load_corpus("synthetic", synthetic_tokens=6_000, seed=3)
    counts = train_counts(corpus.train, corpus.V)
    layer = make_layer(corpus.V, 16, counts)
    model = NPLM(NPLMConfig(V=corpus.V, n=3, m=8, h=16, direct=False, seed=1), output=layer)
    return corpus, train(model, corpus, TrainConfig(epochs=3, batch=16, lr=0.1, seed=2), quiet=True)


def test_trains_through_the_trainer():
    corpus, hist = train_a_little(lambda V, h, counts: AdaptiveSoftmax(V, h, [V // 8, V // 3], counts))
    e = hist["epochs"]
    assert e[-1]["train_ppl"] < e[0]["train_ppl"] and e[-1]["valid_ppl"] < e[0]["valid_ppl"] < corpus.V
