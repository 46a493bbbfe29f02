"""The character-aware input (models.char_input): the spelling rules, the layer's hand-derived backward
against an independent reverse-mode AD of Kim et al.'s equations and against central differences in
float64, under the NPLM and the LSTM, training through the trainer, vectors of words outside the
vocabulary, and the parameter count against C's."""

import numpy as np
import pytest

from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.models.char_input import BOW, EOW, PAD, UNK_CHAR, CharConfig, CharInput, spell
from nplm_edu.models.gradcheck import relative_error
from nplm_edu.models.input import Table, WithInput
from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.models.rnn import RecurrentConfig
from nplm_edu.numerics.recurrent import recurrent_model
from nplm_edu.training.trainer import TrainConfig, train

WORDS = ["the", "cat", "cats", "sat", "on", "mat", "<unk>", "<p>", "dog", "Walked"]
SMALL = CharConfig(d=3, widths=(1, 2, 3), filters=2, max_len=6)  # m = 2 + 4 + 6 = 12


def away_from_init(params, seed=0):
    rng = np.random.default_rng(seed)
    for k, p in params.items():
        p[...] = 0.5 * rng.standard_normal(p.shape)
    params["Q"][PAD] = 0


def numerical(model, args, name, eps=1e-6):
    """Central differences of model.loss_and_grads(*args)'s loss w.r.t. every entry of params[name]."""
    p = model.params[name]
    num = np.zeros(p.shape)
    for i in range(p.size):
        idx = np.unravel_index(i, p.shape)
        old = p[idx]
        p[idx] = old + eps
        lp = model.loss_and_grads(*args)[0]
        p[idx] = old - eps
        lm = model.loss_and_grads(*args)[0]
        p[idx] = old
        num[idx] = (lp - lm) / (2 * eps)
    if name == "Q":
        num[PAD] = 0  # the padding row is a constant zero by the layer's rule: it has no gradient
    return num


def test_the_spelling_rules():
    S = spell(["ab", "a\u00e9", "abcdefghij"], max_len=6)
    assert S.shape == (3, 8)
    assert S[0, 0] == BOW and S[0, 3] == EOW and (S[0, 4:] == PAD).all()
    assert S[1, 2] == UNK_CHAR  # a character outside the inventory
    assert S[2, -1] == EOW and len(set(S[2, 1:7])) == 6  # cut to its first 6 characters, then the end mark
    assert np.array_equal(spell(["Ab"], 6)[0, 2:], S[0, 2:]) and spell(["Ab"], 6)[0, 1] != S[0, 1]  # case kept


def test_bad_settings_are_one_line():
    with pytest.raises(UserError, match="filter widths"):
        CharConfig(widths=(1, 30), max_len=20).validate()
    net = NPLM(NPLMConfig(V=len(WORDS), n=3, m=5, h=4, dtype="float64"))
    with pytest.raises(UserError, match="reads m = 5"):
        WithInput(net, CharInput(WORDS, SMALL))


def autodiff_readout_loss(P, S, R, targets):
    """Kim et al.'s forward (convolutions, max over time, highway) written with tests/autodiff.py's
    operations, read out by R (m, k) into a mean NLL; returns (loss, the parameters as Vars)."""
    from autodiff import Var, group_max, mean_nll, relu, rows, sigmoid, tanh

    V = {k: Var(v) for k, v in P.items()}
    N, L = S.shape
    d, ys = SMALL.d, []
    for w in SMALL.widths:
        n = L - w + 1
        a = V[f"bF_{w}"]
        for o in range(w):  # window i, slot o reads character i + o
            a = a + rows(V["Q"], S[:, o:o + n].reshape(-1)) @ V[f"F_{w}"].cols(o * d, (o + 1) * d).T
        ys.append(group_max(tanh(a), n))  # (N, h_w) max over the n windows
    blocks, lo = [], 0
    for y in ys:  # W y = sum over the blocks of y: W[:, block] y_block
        blocks.append((lo, lo + y.value.shape[1], y))
        lo += y.value.shape[1]
    aT, aH = V["b_T"], V["b_H"]
    for lo, hi, y in blocks:
        aT, aH = aT + y @ V["W_T"].cols(lo, hi).T, aH + y @ V["W_H"].cols(lo, hi).T
    t, g = sigmoid(aT), relu(aH)
    out = Var(np.zeros((N, R.shape[1])))
    for lo, hi, y in blocks:
        x = t.cols(lo, hi) * g.cols(lo, hi) + (1 - t.cols(lo, hi)) * y  # the highway
        out = out + x @ Var(R[lo:hi])
    return mean_nll(out, targets), V


def test_backward_against_an_independent_autodiff():
    layer = CharInput(WORDS, SMALL)
    P = layer.init_params(np.random.default_rng(0), np.float64)
    away_from_init(P)
    rng = np.random.default_rng(1)
    ids = np.array([0, 9, 3, 3, 5, 1])  # a repeated word
    R, targets = rng.standard_normal((layer.m, 4)), rng.integers(0, 4, len(ids))
    x, cache = layer.forward(P, ids)  # (N, m)
    y = x @ R
    p = np.exp(y - y.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    gy = p.copy()
    gy[np.arange(len(ids)), targets] -= 1
    grads = layer.backward(P, cache, gy / len(ids) @ R.T)
    loss, Vars = autodiff_readout_loss(P, layer.S[ids], R, targets)
    loss.backward()
    Vars["Q"].grad[PAD] = 0  # the padding is a constant zero row by the layer's rule
    assert np.isclose(loss.value, -np.log(p[np.arange(len(ids)), targets]).mean())
    assert set(grads) == set(P)
    for k in P:
        assert relative_error(grads[k], Vars[k].grad) < 1e-12, k
    assert not grads["Q"][PAD].any() and grads["Q"].any()


def test_the_nplm_with_char_input_against_central_differences():
    net = NPLM(NPLMConfig(V=len(WORDS), n=3, m=SMALL.m, h=5, direct=True, dtype="float64", seed=1))
    model = WithInput(net, CharInput(WORDS, SMALL), seed=2)
    away_from_init(model.params)
    rng = np.random.default_rng(3)
    c, t = rng.integers(0, len(WORDS), (7, 2)), rng.integers(0, len(WORDS), 7)
    mx = (rng.random((7, 2 * SMALL.m)) >= 0.3) / 0.7  # dropout on x too
    _, grads = model.loss_and_grads(c, t, mx)
    assert set(grads) == set(model.params) and "C" not in grads
    for name in model.params:
        err = relative_error(grads[name], numerical(model, (c, t, mx), name))
        assert err < 1e-6, (name, err)
    lp = model.log_probs(c)
    assert np.allclose(np.exp(lp).sum(axis=1), 1) and np.allclose(model.log_prob(c, t), lp[np.arange(7), t])


def test_the_lstm_with_char_input_against_central_differences():
    net = recurrent_model(RecurrentConfig(V=len(WORDS), cell="lstm", m=SMALL.m, h=4, dtype="float64", seed=1), fast=False)
    model = WithInput(net, CharInput(WORDS, SMALL), seed=2)
    away_from_init(model.params)
    rng = np.random.default_rng(4)
    X, Y = rng.integers(0, len(WORDS), (2, 3)), rng.integers(0, len(WORDS), (2, 3))
    state = tuple(rng.normal(size=(2, 4)) for _ in range(net.n_state))
    _, grads, _ = model.loss_and_grads(X, Y, state)
    for name in ("Q", "F_2", "bF_3", "W_T", "b_H", "Wx"):
        err = relative_error(grads[name], numerical(model, (X, Y, state), name))
        assert err < 1e-6, (name, err)
    lp = model.log_prob_stream(X[0], Y[0])
    assert lp.shape == (3,) and np.isfinite(lp).all()
    fast = WithInput(recurrent_model(net.config), CharInput(WORDS, SMALL), seed=2)  # the fast LSTM under it
    for k, p in model.params.items():
        fast.params[k][...] = p  # the same values (the network's arrays are the wrapper's)
    assert not fast.sparse_grads and not fast.fused_sgd  # the network's shortcuts past C: declared off
    loss, g_fast, _ = fast.loss_and_grads(X, Y, state)
    loss_ref, g_ref, _ = model.loss_and_grads(X, Y, state)
    assert np.isclose(loss, loss_ref) and all(np.allclose(g_fast[k], g_ref[k], atol=1e-12) for k in g_ref)


def test_the_table_as_an_input_layer_is_the_plain_network():
    cfg = NPLMConfig(V=len(WORDS), n=3, m=4, h=5, dtype="float64", seed=1)
    plain, net = NPLM(cfg), NPLM(cfg)
    model = WithInput(net, Table(len(WORDS), 4))
    model.params["C"][...] = plain.params["C"]
    rng = np.random.default_rng(5)
    c, t = rng.integers(0, len(WORDS), (6, 2)), rng.integers(0, len(WORDS), 6)
    (l1, g1), (l2, g2) = plain.loss_and_grads(c, t), model.loss_and_grads(c, t)
    assert l1 == l2 and all(np.array_equal(g1[k], g2[k]) for k in g1)


def test_words_outside_the_vocabulary_get_vectors_and_the_layer_is_smaller_than_c():
    layer = CharInput(WORDS, SMALL)
    P = layer.init_params(np.random.default_rng(0), np.float64)
    x = layer.vectors(P, ["cat", "catz", "\u00e9t\u00e9"])  # in, outside the vocabulary, unknown characters
    assert x.shape == (3, SMALL.m) and np.isfinite(x).all()
    assert np.allclose(x[0], layer.forward(P, np.array([1]))[0][0])  # "cat" is word 1
    kim = CharInput(WORDS)  # Kim et al.'s small layer: m = 525
    assert kim.num_params() == sum(p.size for p in kim.init_params(np.random.default_rng(0), np.float32).values())
    assert kim.num_params() < Table(17_907, kim.m).num_params() / 10


def test_trains_through_the_trainer():
    corpus = load_corpus("synthetic", synthetic_tokens=4_000, seed=3)
    cfg = CharConfig(d=4, widths=(1, 2, 3), filters=3, max_len=8)
    net = NPLM(NPLMConfig(V=corpus.V, n=3, m=cfg.m, h=16, direct=False, seed=1))
    model = WithInput(net, CharInput(corpus.vocab.words, cfg), seed=1)
    e = train(model, corpus, TrainConfig(epochs=3, batch=16, lr=0.1, seed=2), quiet=True)["epochs"]
    assert e[-1]["train_ppl"] < e[0]["train_ppl"] and e[-1]["valid_ppl"] < e[0]["valid_ppl"] < corpus.V
