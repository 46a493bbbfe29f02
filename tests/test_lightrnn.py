"""LightRNN's output and input layers (models.lightrnn): gradients against central differences and against
an independent reverse-mode AD of Li et al.'s equations (tests/autodiff.py) in float64, probabilities
summing to 1 over the vocabulary whatever the table, empty slots never predicted, the table checked,
training through the trainer."""

import numpy as np
import pytest

from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.models.gradcheck import gradcheck, relative_error
from nplm_edu.models.input import WithInput
from nplm_edu.models.lightrnn import LightInput, LightOutput, table_shape
from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.training.trainer import TrainConfig, train

from test_adaptive_softmax import layer_against_autodiff
from test_char_input import numerical

V, H = 13, 6  # a 4 x 4 table with 3 empty slots


def network(seed=0, light_input=False, K=12):
    rng = np.random.default_rng(seed)
    net = NPLM(NPLMConfig(V=V, n=3, m=4, h=H, direct=False, dtype="float64", seed=1), output=LightOutput(V, H))
    model = WithInput(net, LightInput(V, 4), seed=2) if light_input else net
    for k, p in model.params.items():
        if k != "slot":
            p[...] = 0.5 * rng.standard_normal(p.shape)
    c, t = rng.integers(0, V, (K, 2)), rng.integers(0, V, K)
    t[:3] = [0, 0, 5]  # a repeated target
    return model, c, t


def test_the_table_shape():
    assert table_shape(17_907) == (134, 134) and table_shape(10) == (4, 3) and table_shape(2) == (2, 1)
    P = LightOutput(V, H).init_params(np.random.default_rng(0), np.float32)
    assert len(np.unique(P["slot"])) == V and P["slot"].max() < 16


@pytest.mark.parametrize("seed", [0, 1])
def test_gradients_and_probabilities(seed):
    model, c, t = network(seed)
    errors = gradcheck(model, c, t, max_entries=300)
    assert set(errors) == set(model.params) - {"slot"}
    for k, err in errors.items():
        assert err < 1e-7, (k, err)
    lp = model.log_probs(c)  # (K, |V|)
    assert np.allclose(np.exp(lp).sum(axis=1), 1.0, atol=1e-12)
    assert np.allclose(model.log_prob(c, t), lp[np.arange(len(t)), t], atol=1e-12)


def test_probabilities_sum_to_one_after_the_table_changes_and_empty_rows_get_nothing():
    model, c, t = network()
    model.params["slot"][...] = np.arange(V)  # rows 0..2 full, row 3 holds word 12 only
    assert np.allclose(np.exp(model.log_probs(c)).sum(axis=1), 1.0, atol=1e-12)
    layer = model.output
    model.params["slot"][...] = np.r_[np.arange(12), 12]  # the same
    mask_r, mask_c = layer.masks(model.params)
    assert np.isinf(mask_c[3, 1:]).all() and not np.isinf(mask_r).any()
    assert max(gradcheck(model, c, t).values()) < 1e-7


def light_autodiff_loss(P, a, targets):
    """Li et al.'s (2016) mean NLL written with tests/autodiff.py's operations: -log P_r(R_w | a) -
    log P_c(C_w | a, R_w), each softmax a sum of exp over the places that hold a word (a 0/1 weight)."""
    from autodiff import exp, log, pick, rows, sum_cols, tanh, total

    R, C_t = len(P["Y_r"].value), len(P["Y_c"].value)
    slot = P["slot"].value.astype(np.int64)  # (|V|,) the word's place R_w C_t + C_w
    holds = np.zeros(R * C_t)
    holds[slot] = 1.0
    holds = holds.reshape(R, C_t)  # (R, C_t) 1 where a slot holds a word
    r, c = slot[targets] // C_t, slot[targets] % C_t  # (K,) the targets' rows and columns
    y_r = a @ P["Y_r"].T + P["b_r"]  # (K, R)
    log_Pr = y_r - log(sum_cols(exp(y_r) * holds.max(axis=1)))  # over the rows that hold a word
    g = tanh(a @ P["A"].T + rows(P["E"], r))  # (K, h) the state after reading the row
    y_c = g @ P["Y_c"].T + P["b_c"]  # (K, C_t)
    log_Pc = y_c - log(sum_cols(exp(y_c) * holds[r]))  # over the occupied slots of row R_w
    return (total(pick(log_Pr, r)) + total(pick(log_Pc, c))) * (-1.0 / len(targets))


@pytest.mark.parametrize("seed", [0, 1])
def test_backward_equals_automatic_differentiation(seed):
    """The hand-derived backward (Y_r, b_r, A, E, Y_c, b_c and dL/da) equals an independent reverse-mode
    AD; some targets' rows have an empty slot, which the column softmax leaves out."""
    model, _, t = network(seed)
    layer = model.output
    P = {k: model.params[k] for k in layer.init_params(np.random.default_rng(0), np.float64)}
    a = np.random.default_rng(seed + 10).standard_normal((len(t), H))
    assert np.isinf(layer.masks(P)[1][(P["slot"][t] // layer.C_t).astype(int)]).any()
    layer_against_autodiff(layer, P, a, t, light_autodiff_loss)


def test_the_light_input_and_output_equal_automatic_differentiation():
    """With m = h, LightRNN's input vectors (X^r(R_w), X^c(C_w)) read by the output layer: the hand-derived
    backward through both layers equals an independent reverse-mode AD."""
    from autodiff import Var, concat_cols, rows

    model, _, t = network()
    out, inp = model.output, LightInput(V, H)
    P = {k: model.params[k] for k in out.init_params(np.random.default_rng(0), np.float64)}
    P.update({k: 0.5 * np.random.default_rng(3).standard_normal(v.shape)
              for k, v in inp.init_params(np.random.default_rng(0), np.float64).items()})
    ids = np.r_[t[1:], t[0]]  # the input words, one a repeat
    x, cache_in = inp.forward(P, ids)  # (K, h)
    loss, cache = out.loss(P, {"U": x}, t)
    g_in, grads = out.backward_sparse(P, cache)
    grads.update(inp.backward(P, cache_in, g_in["U"]))
    Vars = {k: Var(v) for k, v in P.items()}
    r, c = np.divmod(P["slot"][ids].astype(np.int64), out.C_t)  # the input words' rows and columns
    xv = concat_cols([rows(Vars["X_r"], r), rows(Vars["X_c"], c)])  # x(w) = (X^r(R_w), X^c(C_w))
    L = light_autodiff_loss(Vars, xv, t)
    L.backward()
    assert np.array_equal(xv.value, x) and loss == pytest.approx(float(L.value), rel=1e-13)
    assert set(grads) == set(P) - {"slot"}
    errors = {k: relative_error(grads[k], Vars[k].grad) for k in grads}
    errors["x"] = relative_error(g_in["U"], xv.grad)
    assert max(errors.values()) < 1e-12, errors


def test_the_light_input_against_central_differences():
    model, c, t = network(light_input=True)
    _, grads = model.loss_and_grads(c, t)
    assert "C" not in grads and grads["X_r"].shape == (4, 2)
    for name in ("X_r", "X_c", "H", "Y_c", "E"):
        err = relative_error(grads[name], numerical(model, (c, t), name))
        assert err < 1e-7, (name, err)
    assert np.allclose(np.exp(model.log_probs(c)).sum(axis=1), 1.0)


def test_a_broken_table_is_one_line():
    layer = LightOutput(V, H)
    P = layer.init_params(np.random.default_rng(0), np.float64)
    P["slot"][1] = P["slot"][0]
    with pytest.raises(UserError, match="its own slot"):
        layer.check_table(P)
    with pytest.raises(UserError, match="even m"):
        LightInput(V, 5)


def light_nplm(corpus, m=8, h=16, seed=1):
    """A small NPLM with LightRNN's input and output layers on ``corpus`` (float32)."""
    net = NPLM(NPLMConfig(V=corpus.V, n=3, m=m, h=h, direct=False, seed=seed), output=LightOutput(corpus.V, h))
    return WithInput(net, LightInput(corpus.V, m), seed=seed)


def test_trains_through_the_trainer():
    corpus = load_corpus("synthetic", synthetic_tokens=6_000, seed=3)
    model = light_nplm(corpus)
    slot = model.params["slot"].copy()
    e = train(model, corpus, TrainConfig(epochs=3, batch=16, lr=0.1, seed=2), quiet=True)["epochs"]
    assert e[-1]["train_ppl"] < e[0]["train_ppl"] and e[-1]["valid_ppl"] < e[0]["valid_ppl"] < corpus.V
    assert np.array_equal(model.params["slot"], slot)  # training never moves the table
