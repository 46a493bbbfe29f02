"""The GRU language model (models.gru) and its fast path (numerics.recurrent.FastGRU): backpropagation
through time against central differences and against an independent reverse-mode AD of the equations in
float64, with and without a carried state, resets and dropout; the fast path equal to the reference (loss,
every gradient, the carried state, scoring a stream); the Elman special case; training on the stream
with the stream trainer."""

import numpy as np
import pytest

from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.models.gradcheck import relative_error
from nplm_edu.models.gru import GRU
from nplm_edu.models.rnn import ElmanRNN, RecurrentConfig
from nplm_edu.numerics.recurrent import FastGRU, recurrent_model
from nplm_edu.training.stream import StreamBackend, StreamConfig, recurrent_from_checkpoint, split_log_probs
from nplm_edu.training.guards import perplexity_of
from nplm_edu.training.trainer import TrainConfig, train

from test_recurrent import B, H, M, T, V, case as recurrent_case, numerical


def case(seed=0, carried=False, extras=False):
    """A small float64 GRU and one batch (test_recurrent's case): the model, X, Y, loss_and_grads' keywords."""
    return recurrent_case("gru", seed, carried, extras)


@pytest.mark.parametrize("carried,extras", [(False, False), (True, False), (True, True)])
def test_bptt_against_central_differences(carried, extras):
    model, X, Y, kw = case(carried=carried, extras=extras)
    _, grads, _ = model.loss_and_grads(X, Y, **kw)
    assert set(grads) == set(model.params) and model.params["Wx"].shape == (3 * H, M)
    for name in model.params:
        err = relative_error(grads[name], numerical(model, X, Y, kw, name))
        assert err < 1e-6, (name, err)


def test_a_backward_without_the_reset_gate_path_is_caught():
    """The check can fail: drop dL/dh_{t-1} through r_t h_{t-1} and Wh's error is of order 1e-2 or more."""
    model, X, Y, kw = case(seed=3, carried=True)
    model.params["Wh"] *= 3  # make the recurrent paths matter
    Wh = model.params["Wh"]

    class Broken(GRU):
        def backward(self, cache, ga):
            r = cache["gates"][:, :, H:2 * H].copy()
            cache["gates"][:, :, H:2 * H] = 0  # as if the candidate never read h_{t-1} ...
            out = super().backward(cache, ga)
            cache["gates"][:, :, H:2 * H] = r
            return out

    broken = Broken(model.config)
    broken.params = model.params
    _, grads, _ = broken.loss_and_grads(X, Y, **kw)
    assert relative_error(grads["Wh"], numerical(model, X, Y, kw, "Wh")) > 1e-2
    assert Wh is model.params["Wh"]


def autodiff_loss(model, X, Y, kw):
    """The loss written from the equations (Cho et al. 2014) with tests/autodiff.py's operations."""
    from autodiff import Var, concat_rows, mean_nll, rows, sigmoid, tanh

    P = {k: Var(v) for k, v in model.params.items()}
    h = Var(kw["state"][0] if "state" in kw else np.zeros((B, H)))
    resets = kw.get("resets", np.zeros((B, T), bool))
    WhT = P["Wh"].T  # (h, 3h)
    outs = []
    for t in range(T):
        keep = (~resets[:, t])[:, None].astype(np.float64)
        x = rows(P["C"], X[:, t])
        if "mask_x" in kw:
            x = x * kw["mask_x"][t]
        p = h * keep
        ax = x @ P["Wx"].T + P["d"]
        z = sigmoid(ax.cols(0, H) + p @ WhT.cols(0, H))  # z_t = sigma(W^z x + U^z h_{t-1} + b^z)
        r = sigmoid(ax.cols(H, 2 * H) + p @ WhT.cols(H, 2 * H))  # r_t
        n = tanh(ax.cols(2 * H, 3 * H) + (r * p) @ WhT.cols(2 * H, 3 * H))  # n_t = phi(W^n x + U^n (r h) + b^n)
        h = (1 - z) * n + z * p
        outs.append(h * kw["mask_a"][t] if "mask_a" in kw else h)
    a = concat_rows(outs)
    return mean_nll(a @ P["U"].T + P["b"], Y.T.reshape(-1)), P


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("carried,extras", [(False, False), (True, True)])
def test_bptt_equals_automatic_differentiation(carried, extras, fast):
    model, X, Y, kw = case(seed=7, carried=carried, extras=extras)
    if fast:
        model = same_parameters(FastGRU(model.config), model)
    loss, grads, _ = model.loss_and_grads(X, Y, **kw)
    L, P = autodiff_loss(model, X, Y, kw)
    L.backward()
    assert loss == pytest.approx(float(L.value), rel=1e-12)
    for k in model.params:
        np.testing.assert_allclose(grads[k], P[k].grad, rtol=1e-9, atol=1e-13, err_msg=k)


def same_parameters(model, like):
    model.params = {k: v.copy() for k, v in like.params.items()}
    return model


@pytest.mark.parametrize("carried,extras", [(False, False), (True, False), (True, True)])
def test_fast_equals_reference(carried, extras):
    """Loss, every gradient (dense, and C's nonzero rows alone) and the carried state, to rounding."""
    ref, X, Y, kw = case(seed=4, carried=carried, extras=extras)
    ref.params["Wh"] *= 3  # the recurrent paths matter
    fast = same_parameters(recurrent_model(ref.config), ref)
    assert isinstance(fast, FastGRU)
    l1, g1, s1 = ref.loss_and_grads(X, Y, **kw)
    l2, g2, s2 = fast.loss_and_grads(X, Y, **kw)
    assert abs(l1 - l2) <= 1e-12 * abs(l1)
    for k in g1:
        assert relative_error(g1[k], g2[k]) < 1e-12, k
    assert relative_error(s1[0], s2[0]) < 1e-12
    l3, g3, _, words = fast.loss_and_sparse_grads(X, Y, kw.get("state"), kw.get("mask_x"), kw.get("mask_a"),
                                                  kw.get("resets"))
    assert l3 == l2 and np.array_equal(words, np.unique(X))
    assert relative_error(g1["C"][words], g3["C"]) < 1e-12 and not g1["C"][np.setdiff1d(range(V), words)].any()


def test_fast_stream_scoring_equals_reference_and_float32_runs():
    rng = np.random.default_rng(5)
    cfg = RecurrentConfig(V=30, cell="gru", m=6, h=7, dtype="float64", seed=2)
    ref, fast = recurrent_model(cfg, fast=False), recurrent_model(cfg)
    ids, resets = rng.integers(0, 30, 700), rng.random(699) < 0.05
    a = ref.log_prob_stream(ids[:-1], ids[1:], resets, chunk=100)
    b = fast.log_prob_stream(ids[:-1], ids[1:], resets, chunk=256)
    assert np.max(np.abs(a - b)) < 1e-12 * np.max(np.abs(a)) and np.all(b < 0)
    small = recurrent_model(RecurrentConfig(V=9, cell="gru", m=3, h=4))  # float32: big pre-activations
    small.params["Wx"] *= 1e3  # saturate the gates (exp overflows to inf, sigma to 0)
    loss, grads, _ = small.loss_and_grads(rng.integers(0, 9, (2, 5)), rng.integers(0, 9, (2, 5)))
    assert np.isfinite(loss) and all(np.all(np.isfinite(g)) for g in grads.values())


def test_update_gate_closed_and_reset_open_is_the_elman_network():
    """z_t = 0 and r_t = 1 (gate biases -inf / +inf) leave h_t = tanh(W^n x_t + U^n h_{t-1} + b^n)."""
    model, X, Y, kw = case(seed=2, carried=True)
    P = model.params
    P["d"][:H], P["d"][H:2 * H] = -1e3, 1e3
    elman = ElmanRNN(RecurrentConfig(V=V, cell="rnn", m=M, h=H, dtype="float64"))
    elman.params.update(C=P["C"], Wx=P["Wx"][2 * H:], Wh=P["Wh"][2 * H:], d=P["d"][2 * H:], U=P["U"], b=P["b"])
    assert model.loss_and_grads(X, Y, **kw)[0] == pytest.approx(elman.loss_and_grads(X, Y, **kw)[0], rel=1e-12)


def test_the_factory_builds_a_gru_and_bad_states_are_one_line():
    model = recurrent_model(RecurrentConfig(V=V, cell="gru", m=M, h=H, seed=1))
    assert isinstance(model, FastGRU) and isinstance(model, GRU) and model.n_state == 1 and model.params["Wh"].dtype == np.float32
    with pytest.raises(UserError, match="carried state"):
        model.loss_and_grads(np.zeros((2, 3), int), np.zeros((2, 3), int), state=(np.zeros((3, H)),))
    with pytest.raises(UserError, match="cell must be one of"):
        RecurrentConfig(V=V, cell="gated").validate()


def test_stream_trainer_trains_a_gru(tmp_path):
    corpus = load_corpus("synthetic", synthetic_tokens=12_000, seed=3)
    cfg = TrainConfig(epochs=3, batch=4, lr=1.0, decay_rate=0.0, lr_decay=0.8, weight_decay=1e-5,
                      dropout_x=0.1, dropout_a=0.2, seed=2, patience=3)
    model = GRU(RecurrentConfig(V=corpus.V, cell="gru", m=8, h=12, seed=1))
    hist = train(model, corpus, cfg, out_dir=tmp_path, quiet=True,
                 backend=StreamBackend(model, cfg, StreamConfig(T=9, clip=0.5)))
    e = hist["epochs"]
    assert e[-1]["train_ppl"] < e[0]["train_ppl"] and e[-1]["valid_ppl"] < e[0]["valid_ppl"]
    assert e[-1]["valid_ppl"] < 0.5 * corpus.V  # far below the uniform model's |V|
    assert hist["best_valid_ppl"] == pytest.approx(perplexity_of(split_log_probs(model, corpus, "valid")))
    back = recurrent_from_checkpoint(tmp_path / "checkpoint.npz")  # read back as a GRU, its best parameters
    assert isinstance(back, GRU) and all(np.array_equal(back.params[k], model.params[k]) for k in model.params)
