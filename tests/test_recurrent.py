"""The recurrent language models (models.rnn, models.lstm): backpropagation through time against central
differences in float64 over several time steps, with and without a carried-over state, resets and dropout;
the fast path (numerics.recurrent) equal to the reference; clipping; bad input in one line."""

import numpy as np
import pytest

from nplm_edu.errors import UserError
from nplm_edu.models.gradcheck import relative_error
from nplm_edu.models.lstm import LSTM
from nplm_edu.models.output import FullSoftmax, OutputLayer
from nplm_edu.models.rnn import ElmanRNN, RecurrentConfig, check_batch
from nplm_edu.numerics.recurrent import FastLSTM, FastRNN, recurrent_model
from nplm_edu.training.clip import check_clip, clip_grad_norm, grad_norm
from nplm_edu.training.optim import sgd_step

V, M, H, B, T = 11, 4, 5, 3, 6


def case(cell, seed=0, carried=False, extras=False):
    """A small float64 model and one batch; the keyword arguments of loss_and_grads."""
    rng = np.random.default_rng(seed)
    model = recurrent_model(RecurrentConfig(V=V, cell=cell, m=M, h=H, dtype="float64", seed=seed + 1), fast=False)
    X, Y = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
    kw = {}
    if carried:
        kw["state"] = tuple(rng.normal(size=(B, H)) * 0.7 for _ in range(model.n_state))
    if extras:
        kw["resets"] = rng.random((B, T)) < 0.2
        kw["mask_x"] = (rng.random((T, B, M)) >= 0.3) / 0.7
        kw["mask_a"] = (rng.random((T, B, H)) >= 0.3) / 0.7
    return model, X, Y, kw


def numerical(model, X, Y, kw, name, eps=1e-5):
    p = model.params[name]
    num = np.zeros_like(p)
    for i in range(p.size):
        idx = np.unravel_index(i, p.shape)
        old = p[idx]
        p[idx] = old + eps
        lp = model.loss_and_grads(X, Y, **kw)[0]
        p[idx] = old - eps
        lm = model.loss_and_grads(X, Y, **kw)[0]
        p[idx] = old
        num[idx] = (lp - lm) / (2 * eps)
    return num


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
@pytest.mark.parametrize("carried,extras", [(False, False), (True, False), (True, True)])
def test_bptt_against_central_differences(cell, carried, extras):
    model, X, Y, kw = case(cell, carried=carried, extras=extras)
    _, grads, _ = model.loss_and_grads(X, Y, **kw)
    for name in model.params:
        err = relative_error(grads[name], numerical(model, X, Y, kw, name))
        assert err < 1e-6, (cell, name, err)


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_a_backward_without_the_path_through_time_is_caught(cell):
    """The check can fail: the gradient that forgets the path through time (each step's loss
    differentiated with its incoming state held fixed, i.e. T = 1 truncation) is far from the numbers."""
    model, X, Y, kw = case(cell, carried=True)
    cache = model.forward(X, **kw)
    states = [cache["hs"]] + ([cache["ss"]] if cell == "lstm" else [])
    one_step = {k: np.zeros_like(p) for k, p in model.params.items()}
    for t in range(T):
        _, g, _ = model.loss_and_grads(X[:, t:t + 1], Y[:, t:t + 1], state=tuple(s[t] for s in states))
        for k in g:
            one_step[k] += g[k] / T  # the mean over T steps of each step's gradient
    assert relative_error(one_step["Wh"], numerical(model, X, Y, kw, "Wh")) > 1e-3
    assert relative_error(one_step["b"], numerical(model, X, Y, kw, "b")) < 1e-8  # b has no path through time


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_gradient_reaches_back_through_time(cell):
    """The first input word changes the loss at the last step: the state carries it (and BPTT sees it)."""
    model, X, Y, _ = case(cell)
    _, grads, _ = model.loss_and_grads(X, Y)
    first = np.unique(X[:, 0])
    only_first = [w for w in first if w not in X[:, 1:]]
    for w in only_first:
        assert np.abs(grads["C"][w]).sum() > 0


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
@pytest.mark.parametrize("carried,extras", [(False, False), (True, True)])
def test_fast_equals_reference(cell, carried, extras):
    ref, X, Y, kw = case(cell, seed=4, carried=carried, extras=extras)
    fast = recurrent_model(ref.config)
    assert isinstance(fast, FastLSTM if cell == "lstm" else FastRNN)
    l1, g1, s1 = ref.loss_and_grads(X, Y, **kw)
    l2, g2, s2 = fast.loss_and_grads(X, Y, **kw)
    assert abs(l1 - l2) <= 1e-12 * abs(l1)
    for k in g1:
        assert relative_error(g1[k], g2[k]) < 1e-10, k
    for a, b in zip(s1, s2):
        assert relative_error(a, b) < 1e-10


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_stream_scoring_fast_equals_reference_and_carries_state(cell):
    rng = np.random.default_rng(5)
    cfg = RecurrentConfig(V=30, cell=cell, m=6, h=7, dtype="float64", seed=2)
    ref, fast = recurrent_model(cfg, fast=False), recurrent_model(cfg)
    ids = rng.integers(0, 30, 700)
    resets = rng.random(699) < 0.05
    a = ref.log_prob_stream(ids[:-1], ids[1:], resets, chunk=100)
    b = fast.log_prob_stream(ids[:-1], ids[1:], resets, chunk=256)
    assert np.max(np.abs(a - b)) < 1e-10
    # chunks carry the state: any chunk length gives the same numbers, and log P is a log-probability
    c = fast.log_prob_stream(ids[:-1], ids[1:], resets, chunk=699)
    assert np.max(np.abs(c - b)) < 1e-10 and np.all(b < 0)
    # scoring without the state carried (reset before every word) is different
    d = fast.log_prob_stream(ids[:-1], ids[1:], np.ones(699, bool))
    assert np.max(np.abs(d - b)) > 1e-3


def test_carried_state_is_the_last_state():
    """Two batches of T steps with the state carried = one batch of 2T steps (forward)."""
    for cell in ("rnn", "lstm"):
        model, X, Y, _ = case(cell)
        whole = model.forward(np.concatenate([X, X], axis=1))
        first = model.forward(X)
        second = model.forward(X, state=first["state"])
        assert np.allclose(whole["inputs"]["U"][B * T:], second["inputs"]["U"], rtol=0, atol=1e-13)
        for a, b in zip(whole["state"], second["state"]):
            assert np.allclose(a, b, rtol=0, atol=1e-13)


def test_lstm_forget_gate_starts_open_and_float32_runs():
    model = LSTM(RecurrentConfig(V=9, cell="lstm", m=3, h=4))
    assert np.all(model.params["d"][4:8] == 1) and np.all(model.params["d"][:4] == 0)
    assert model.params["C"].dtype == np.float32
    fast = FastLSTM(RecurrentConfig(V=9, cell="lstm", m=3, h=4))
    loss, grads, state = fast.loss_and_grads(np.zeros((2, 3), int), np.ones((2, 3), int))
    assert abs(loss - np.log(9)) < 0.5 and grads["U"].dtype == np.float32 and state[0].dtype == np.float32


def test_another_output_layer_plugs_in():
    """Any OutputLayer works: the fast path calls it through the interface (here a FullSoftmax subclass)."""

    class Plain(FullSoftmax):
        pass

    cfg = RecurrentConfig(V=V, cell="lstm", m=M, h=H, dtype="float64", seed=3)
    rng = np.random.default_rng(0)
    X, Y = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
    a = FastLSTM(cfg).loss_and_grads(X, Y)
    b = FastLSTM(cfg, Plain(V, {"U": H})).loss_and_grads(X, Y)
    assert isinstance(Plain(V, {"U": H}), OutputLayer)
    assert abs(a[0] - b[0]) < 1e-12 and all(relative_error(a[1][k], b[1][k]) < 1e-10 for k in a[1])


def test_clip_grad_norm():
    rng = np.random.default_rng(0)
    g = {"a": rng.normal(size=(3, 4)), "b": rng.normal(size=5)}
    before = grad_norm(g)
    direction = np.concatenate([v.ravel() for v in g.values()]) / before
    assert clip_grad_norm(g, 10 * before) == before and abs(grad_norm(g) - before) < 1e-12  # under: unchanged
    assert clip_grad_norm(g, 0.5) == pytest.approx(before)
    assert grad_norm(g) == pytest.approx(0.5)
    assert np.allclose(np.concatenate([v.ravel() for v in g.values()]) / 0.5, direction)  # same direction


def test_sgd_step_decays_weights_not_biases():
    P = {"U": np.ones(2), "b": np.ones(2)}
    sgd_step(P, {"U": np.zeros(2), "b": np.zeros(2)}, lr=0.5, weight_decay=0.1, decayed=("U",))
    assert P["U"].tolist() == [0.95, 0.95] and P["b"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "x"])
def test_bad_clip_is_one_line(bad):
    with pytest.raises(UserError, match="clip norm"):
        check_clip(bad)


def test_bad_batches_are_one_line():
    model = ElmanRNN(RecurrentConfig(V=5, cell="rnn", m=2, h=2))
    for X in (np.zeros((2, 0), int), np.zeros((0, 3), int), np.zeros(3, int)):
        with pytest.raises(UserError, match="B >= 1 streams of T >= 1"):
            model.loss_and_grads(X, X)
    with pytest.raises(UserError, match="outside"):
        check_batch(np.full((1, 2), 7), None, 5)
    with pytest.raises(UserError, match="carried state"):
        model.loss_and_grads(np.zeros((2, 3), int), np.zeros((2, 3), int), state=(np.zeros((3, 2)),))
    with pytest.raises(UserError, match="cell"):
        RecurrentConfig(V=5, cell="gated").validate()
    with pytest.raises(UserError, match="cannot have cell"):
        LSTM(RecurrentConfig(V=5, cell="rnn"))


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_gradient_through_time_against_finite_differences(cell):
    """||dL_t/dh_{t-k}|| of the measurement equals the norm of the numerical gradient of L_t with respect
    to the state h_{t-k} carried into the last k steps (the LSTM's cell s_{t-k} held fixed)."""
    from nplm_edu.analysis.recurrent import gradient_through_time

    cfg = RecurrentConfig(V=20, cell=cell, m=4, h=6, dtype="float64", seed=2)
    model = recurrent_model(cfg)
    ids = np.random.default_rng(1).integers(0, 20, 40)
    K, warmup = 4, 3
    got = gradient_through_time(model, ids, K=K, positions=1, warmup=warmup)
    W = warmup + K + 1
    X = ids[None, :W]
    cache = model.forward(X)
    for k in range(K + 1):
        start = W - 1 - k  # h_{t-k} is the output of this step
        state = [s[start + 1].copy() for s in ([cache["hs"]] + ([cache["ss"]] if cell == "lstm" else []))]
        rest, target = X[:, start + 1:], ids[W]

        def loss(h):
            st = tuple([h] + state[1:])
            if rest.shape[1] == 0:
                hT = h
            else:
                hT = model.forward(rest, state=st)["state"][0]
            return -model.output.log_prob(model.params, {"U": hT}, np.array([target]))[0]

        num = np.zeros(cfg.h)
        for j in range(cfg.h):
            e = np.zeros((1, cfg.h))
            e[0, j] = 1e-6
            num[j] = (loss(state[0] + e) - loss(state[0] - e)) / 2e-6
        assert got[k] == pytest.approx(np.linalg.norm(num), rel=1e-3), k  # 4 significant digits


def test_distance_to_the_paragraph_mark():
    from nplm_edu.analysis.recurrent import by_distance, distance_to_mark

    d = distance_to_mark(np.array([5, 9, 1, 9, 9, 1]), mark=9, start=100)
    assert d.tolist() == [100, 1, 2, 1, 1, 2]
    rows = by_distance(d, {"a": np.log(np.full(6, 0.5))})
    assert rows[0]["bin"] == "1" and rows[0]["tokens"] == 3 and rows[0]["a"] == 2.0
    assert sum(r["tokens"] for r in rows) == 6


def test_sampling_a_recurrent_model_reads_what_it_drew():
    from nplm_edu.analysis.sampling import sample

    model = recurrent_model(RecurrentConfig(V=V, cell="lstm", m=M, h=H, seed=3))
    a = sample(model, [1, 2], np.random.default_rng(0), length=12, samples=3)
    assert a == sample(model, [1, 2], np.random.default_rng(0), length=12, samples=3)  # seeded
    assert all(len(s) == 12 and all(0 <= w < V for w in s) for s in a) and a[0] != a[1]
    # greedy: each word is the most probable one after the context and every word drawn before it,
    # recomputed here from a zero state over the whole prefix (so the sampler's carried state is right)
    g = sample(model, [1, 2], np.random.default_rng(0), length=8, temperature=0, samples=2)
    assert g[0] == g[1]
    seq = [1, 2] + g[0]
    for t in range(2, len(seq)):
        cache = model.forward(np.array([seq[:t]]))
        lp = model.output.log_probs(model.params, {"U": cache["inputs"]["U"][-1:]})[0]  # (|V|,)
        assert seq[t] == int(np.argmax(lp)), t
    # a stop word ends a chain at its first appearance and is kept
    first = g[0].index(g[0][3])
    assert sample(model, [1, 2], np.random.default_rng(0), length=8, temperature=0, stop=[g[0][3]]) == [g[0][:first + 1]]
    with pytest.raises(UserError, match="at least 1 word"):
        sample(model, [], np.random.default_rng(0))


def autodiff_loss(model, X, Y, kw):
    """The loss of a batch written from the equations (Elman 1990; Hochreiter and Schmidhuber 1997, Gers et al. 2000) with the
    operations of tests/autodiff.py, an independent reverse-mode AD: (loss Var, parameter Vars)."""
    from autodiff import Var, concat_rows, mean_nll, rows, sigmoid, tanh

    P = {k: Var(v) for k, v in model.params.items()}
    state = kw.get("state") or tuple(np.zeros((B, H)) for _ in range(model.n_state))
    h, s = Var(state[0]), (Var(state[1]) if model.n_state == 2 else None)
    resets = kw.get("resets", np.zeros((B, T), bool))
    outs = []
    for t in range(T):
        keep = (~resets[:, t])[:, None].astype(np.float64)  # a reset zeroes the state before step t
        x = rows(P["C"], X[:, t])  # x_t = C(w_t)
        if "mask_x" in kw:
            x = x * kw["mask_x"][t]
        z = x @ P["Wx"].T + (h * keep) @ P["Wh"].T + P["d"]
        if model.kind == "rnn":
            h = tanh(z)  # h_t = tanh(Wx x_t + Wh h_{t-1} + d)
        else:
            i, f, o = sigmoid(z.cols(0, H)), sigmoid(z.cols(H, 2 * H)), sigmoid(z.cols(2 * H, 3 * H))
            g = tanh(z.cols(3 * H, 4 * H))
            s = g * i + (s * keep) * f  # s_t = g_t i_t + s_{t-1} f_t
            h = o * tanh(s)  # h_t = o_t tanh(s_t)
        outs.append(h * kw["mask_a"][t] if "mask_a" in kw else h)
    a = concat_rows(outs)  # (T B, h) time-major
    return mean_nll(a @ P["U"].T + P["b"], Y.T.reshape(-1)), P


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("carried,extras", [(False, False), (True, True)])
def test_bptt_equals_automatic_differentiation(cell, fast, carried, extras):
    """Hand-derived BPTT (reference and fast) equals an independent reverse-mode AD of the equations
    over T = 6 steps: from zeros, and from a carried state with resets and dropout masks."""
    model, X, Y, kw = case(cell, seed=7, carried=carried, extras=extras)
    if fast:
        fast_model = recurrent_model(model.config, fast=True)
        fast_model.params = {k: v.copy() for k, v in model.params.items()}
        model = fast_model
    loss, grads, _ = model.loss_and_grads(X, Y, **kw)
    grads = {k: v.copy() for k, v in grads.items()}
    L, P = autodiff_loss(model, X, Y, kw)
    L.backward()
    assert loss == pytest.approx(float(L.value), rel=1e-12)
    for k in model.params:
        np.testing.assert_allclose(grads[k], P[k].grad, rtol=1e-9, atol=1e-13, err_msg=k)


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_bptt_equals_pytorch_autograd(cell):
    """The same against PyTorch's autograd, when PyTorch is installed (an optional check: the
    package never needs it); the GRU's reset gate before its matrix, as Cho et al. (2014) write it."""
    torch = pytest.importorskip("torch")
    model, X, Y, kw = case(cell, seed=8, carried=True, extras=True)
    if cell == "gru":
        ref, model = model, recurrent_model(model.config)  # the fast GRU (the reference: test_gru)
        model.params = {k: v.copy() for k, v in ref.params.items()}
    loss, grads, _ = model.loss_and_grads(X, Y, **kw)
    P = {k: torch.tensor(v, requires_grad=True) for k, v in model.params.items()}
    h = torch.tensor(kw["state"][0])
    s = torch.tensor(kw["state"][1]) if cell == "lstm" else None
    outs = []
    for t in range(T):
        keep = torch.tensor((~kw["resets"][:, t])[:, None].astype(np.float64))
        x = P["C"][torch.tensor(X[:, t])] * torch.tensor(kw["mask_x"][t])
        z = x @ P["Wx"].T + (h * keep) @ P["Wh"].T + P["d"]
        if cell == "gru":
            p, ax = h * keep, x @ P["Wx"].T + P["d"]
            zg, r = torch.sigmoid(z[:, :H]), torch.sigmoid(z[:, H:2 * H])
            n = torch.tanh(ax[:, 2 * H:] + (r * p) @ P["Wh"][2 * H:].T)  # U^n (r_t h_{t-1})
            h = (1 - zg) * n + zg * p
        elif cell == "rnn":
            h = torch.tanh(z)
        else:
            i, f, o, g = torch.sigmoid(z[:, :H]), torch.sigmoid(z[:, H:2 * H]), torch.sigmoid(z[:, 2 * H:3 * H]), \
                torch.tanh(z[:, 3 * H:])
            s = g * i + (s * keep) * f
            h = o * torch.tanh(s)
        outs.append(h * torch.tensor(kw["mask_a"][t]))
    y = torch.cat(outs) @ P["U"].T + P["b"]
    L = torch.nn.functional.cross_entropy(y, torch.tensor(Y.T.reshape(-1)))
    L.backward()
    assert loss == pytest.approx(L.item(), rel=1e-12)
    for k in model.params:
        np.testing.assert_allclose(grads[k], P[k].grad.numpy(), rtol=1e-9, atol=1e-13, err_msg=k)
