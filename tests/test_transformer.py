"""The Transformer language model (nplm_edu.models.transformer, .attention): hand-derived gradients
against central differences (float64), the causal mask, probabilities, learning, settings."""

import numpy as np
import pytest

from nplm_edu.errors import UserError
from nplm_edu.models.attention import causal_mask, layer_norm
from nplm_edu.models.gradcheck import gradcheck
from nplm_edu.models.transformer import Transformer, TransformerConfig


def tiny(tie=True, **kw):
    cfg = dict(V=13, n_ctx=5, m=8, heads=2, layers=2, d_ff=16, tie=tie, dtype="float64", seed=0)
    cfg.update(kw)
    return Transformer(TransformerConfig(**cfg))


def windows(K=3, T=5, V=13, seed=1):
    rng = np.random.default_rng(seed)
    return rng.integers(0, V, (K, T)), rng.integers(0, V, (K, T))


@pytest.mark.parametrize("tie", [True, False])
def test_every_gradient_equals_central_differences(tie):
    model = tiny(tie, m=6, d_ff=8)  # two layers, two heads of 3: every entry in seconds (at m=4 round-off nears 1e-7)
    X, Y = windows()
    errors = gradcheck(model, X, Y, max_entries=10**6)  # every entry of every parameter
    names = set(model.params) - ({"U"} if tie else set())
    assert set(errors) == names
    assert max(errors.values()) < 1e-7, errors


def test_tied_output_is_the_table():
    model = tiny(True)
    assert model.params["U"] is model.params["C"]
    assert model.num_params() == tiny(False).num_params() - 13 * 8
    _, grads = model.loss_and_grads(*windows())
    assert "U" not in grads


def test_a_later_word_does_not_change_earlier_positions():
    model = tiny(False)
    X, _ = windows(T=5)
    before = model.log_probs(X)  # (K, T, |V|)
    for t in range(5):
        X2 = X.copy()
        X2[:, t] = (X2[:, t] + 1) % 13
        after = model.log_probs(X2)
        np.testing.assert_allclose(after[:, :t], before[:, :t], rtol=0, atol=1e-13)
        assert np.abs(after[:, t:] - before[:, t:]).max(axis=-1).min() > 1e-6  # from t on it reads the change


def test_mask_is_the_future():
    assert causal_mask(3).tolist() == [[False, True, True], [False, False, True], [False, False, False]]


def test_probabilities_sum_to_one_at_every_position():
    for tie in (True, False):
        p = tiny(tie, dtype="float32").probs(windows(K=4)[0])
        assert p.shape == (4, 5, 13) and (p > 0).all()
        np.testing.assert_allclose(p.sum(axis=-1), 1, atol=1e-6)


def test_log_prob_reads_the_targets_from_log_probs():
    model = tiny(False)
    X, Y = windows()
    lp = model.log_probs(X)
    K, T = X.shape
    np.testing.assert_allclose(model.log_prob(X, Y), lp[np.arange(K)[:, None], np.arange(T), Y])
    loss, _ = model.loss_and_grads(X, Y)
    assert loss == pytest.approx(-model.log_prob(X, Y).mean())


def test_shorter_windows_use_the_first_positions():
    model = tiny(False)
    X, _ = windows(T=5)
    np.testing.assert_allclose(model.log_probs(X[:, :3]), model.log_probs(X)[:, :3], atol=1e-13)


def test_layer_norm_gives_mean_zero_variance_one():
    x = np.random.default_rng(0).normal(3, 5, (4, 6))
    y, _ = layer_norm(x, np.ones(6), np.zeros(6))
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=-1), 1, atol=1e-5)


def test_initialisation_comes_from_the_generator():
    cfg = TransformerConfig(V=13, n_ctx=5, m=8, heads=2, layers=2, d_ff=16)
    a = Transformer(cfg, np.random.default_rng(7)).params
    b = Transformer(cfg, np.random.default_rng(7)).params
    c = Transformer(cfg, np.random.default_rng(8)).params
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["0.Wq"], c["0.Wq"])
    d = Transformer(cfg).params  # no generator: default_rng(config.seed)
    assert all(np.array_equal(d[k], Transformer(cfg, np.random.default_rng(0)).params[k]) for k in d)


def test_a_tiny_model_learns_to_repeat_a_pattern():
    """Each window repeats three random words (a b c a b c ...): the first two next words cannot be
    known, every later one is the word three positions back, which only attention to the right
    earlier position finds. The floor of the mean loss is 2 log 13 / 9 = 0.570 nats."""
    V, T = 13, 9
    rng = np.random.default_rng(0)

    def batch(K):
        seq = np.tile(rng.integers(0, V, (K, 3)), 4)[:, :T + 1]  # (K, T + 1)
        return seq[:, :-1], seq[:, 1:]

    model = Transformer(TransformerConfig(V=V, n_ctx=T, m=16, heads=2, layers=1, d_ff=32, tie=False,
                                          dtype="float64"), np.random.default_rng(0))
    X, Y = batch(256)
    start = -model.log_prob(X, Y)[:, 2:].mean()
    for _ in range(300):  # plain SGD, learning rate 0.5, batches of 32 windows
        loss, grads = model.loss_and_grads(*batch(32))
        for k, g in grads.items():
            model.params[k] -= 0.5 * g
    copied = -model.log_prob(X, Y)[:, 2:].mean()  # held-out windows, the predictable positions only
    assert start > 2.0
    assert copied < 0.05, copied


@pytest.mark.parametrize("change, setting", [
    (dict(heads=3), "heads"), (dict(n_ctx=0), "n_ctx"), (dict(layers=0), "layers"),
    (dict(d_ff=0), "d_ff"), (dict(dtype="float16"), "dtype"), (dict(seed=-1), "seed")])
def test_settings_are_checked(change, setting):
    cfg = dict(V=13, n_ctx=5, m=8, heads=2, layers=2, d_ff=16)
    cfg.update(change)
    with pytest.raises(UserError) as e:
        Transformer(TransformerConfig(**cfg))
    assert e.value.setting == setting


def test_windows_are_checked():
    model = tiny()
    with pytest.raises(UserError, match="longer than n_ctx"):
        model.log_probs(np.zeros((2, 6), int))
    with pytest.raises(UserError, match="outside"):
        model.log_probs(np.full((2, 3), 13))


def autodiff_loss(model, X, Y):
    """The loss of a batch written from the equations, window by window and head by head, with the
    operations of tests/autodiff.py, an independent reverse-mode AD: (loss Var, parameter Vars)."""
    from autodiff import Var, concat_rows, exp, mean_nll, recip, rows, sqrt, sum_cols, tanh

    cfg = model.config
    P = {k: Var(v) for k, v in model.params.items()}
    if model.tied:
        P["U"] = P["C"]
    K, T = X.shape
    dh = cfg.m // cfg.heads
    future = np.where(np.triu(np.ones((T, T)), 1) > 0, -1e9, 0.0)  # exp(-1e9) is 0: the mask

    def norm(x, g, beta):  # layer normalization of each row
        xc = x + sum_cols(x) * (-1 / cfg.m)
        sigma = sqrt(sum_cols(xc * xc) * (1 / cfg.m) + 1e-5)
        return xc * recip(sigma) * g + beta

    def gelu(z):
        return z * (tanh((z + z * z * z * 0.044715) * np.sqrt(2 / np.pi)) + 1.0) * 0.5

    ys = []
    for k in range(K):
        x = rows(P["C"], X[k]) + rows(P["P"], np.arange(T))  # (T, m)
        for i in range(cfg.layers):
            p = {n: P[f"{i}.{n}"] for n in ("g1", "beta1", "Wq", "Wk", "Wv", "Wo", "g2", "beta2", "W1", "b1", "W2", "b2")}
            u = norm(x, p["g1"], p["beta1"])
            q, key, v = u @ p["Wq"].T, u @ p["Wk"].T, u @ p["Wv"].T
            for h in range(cfg.heads):
                lo, hi = h * dh, (h + 1) * dh
                S = q.cols(lo, hi) @ key.cols(lo, hi).T * (1 / np.sqrt(dh)) + future
                e = exp(S + (-S.value.max(axis=1, keepdims=True)))
                A = e * recip(sum_cols(e))
                x = x + (A @ v.cols(lo, hi)) @ p["Wo"].cols(lo, hi).T  # head h's share of Wo
            u = norm(x, p["g2"], p["beta2"])
            x = x + gelu(u @ p["W1"].T + p["b1"]) @ p["W2"].T + p["b2"]
        ys.append(norm(x, P["gf"], P["betaf"]) @ P["U"].T + P["b"])
    return mean_nll(concat_rows(ys), Y.ravel()), P


@pytest.mark.parametrize("tie", [True, False])
def test_backward_equals_automatic_differentiation(tie):
    """The hand-derived backward equals an independent reverse-mode AD of the equations."""
    model = tiny(tie, layers=2, heads=2)
    X, Y = windows(K=2, T=5, seed=3)
    loss, grads = model.loss_and_grads(X, Y)
    L, P = autodiff_loss(model, X, Y)
    L.backward()
    assert loss == pytest.approx(float(L.value), rel=1e-12)
    assert set(grads) == set(model.params) - ({"U"} if tie else set())
    for k in grads:
        np.testing.assert_allclose(grads[k], P[k].grad, rtol=1e-9, atol=1e-13, err_msg=k)


def test_float32_stays_float32():
    model = tiny(False, dtype="float32")
    loss, grads = model.loss_and_grads(*windows())
    assert all(g.dtype == np.float32 for g in grads.values()), {k: g.dtype for k, g in grads.items()}
    assert model.forward(windows()[0])["inputs"]["U"].dtype == np.float32


def test_read_as_a_window_model_and_sampled_like_a_recurrent_one():
    from nplm_edu.analysis.sampling import sample
    from nplm_edu.models.transformer import WindowReader

    model = tiny(False)
    lm = WindowReader(model)
    X, Y = windows()
    assert lm.order == 6 and lm.num_params() == model.num_params()
    np.testing.assert_allclose(lm.log_prob(X, Y[:, -1]), np.log(lm.probs(X)[np.arange(3), Y[:, -1]]), atol=1e-12)
    prompt = [3, 1, 4]  # shorter than the window of 5: the window grows, then slides
    drawn = sample(lm, prompt, np.random.default_rng(0), length=6, samples=2)
    assert np.asarray(drawn).shape == (2, 6)
    # by hand: each word drawn from the model's distribution after the last (at most 5) words read
    rng, words, first = np.random.default_rng(0), [list(prompt), list(prompt)], []
    for t in range(6):
        p = model.probs(np.array([w[-5:] for w in words]))[:, -1]  # (2, |V|)
        c = np.cumsum(p, axis=1)
        u = rng.random(2) * c[:, -1]
        w = np.minimum((c < u[:, None]).sum(axis=1), 12)
        for r in range(2):
            words[r].append(int(w[r]))
    assert [w[3:] for w in words] == [list(map(int, d)) for d in drawn]
