"""LightRNN's output and input layers (models.lightrnn): gradients against central differences in float64,
probabilities summing to 1 over the vocabulary whatever the table, empty slots never predicted, the
table checked, training through the trainer."""

import numpy as np
import pytest

from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.models.gradcheck import gradcheck, relative_error
from nplm_edu.models.input import WithInput
from nplm_edu.models.lightrnn import LightInput, LightOutput, table_shape
from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.training.trainer import TrainConfig, train

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
