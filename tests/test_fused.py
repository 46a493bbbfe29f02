"""The fused NPLM (numerics.fused): shapes, parameter count, probabilities, and the hand-derived gradients
checked against an independent per-example implementation written with explicit loops."""

import numpy as np
import pytest

from nplm_edu.errors import UserError
from nplm_edu.models.nplm import NPLMConfig
from nplm_edu.numerics.blas import gemm_update, segment_sum, subtract_at
from nplm_edu.numerics.fused import FusedNPLM
from nplm_edu.training.optim import sgd_step

CONFIGS = [dict(h=5, direct=True), dict(h=5, direct=False), dict(h=0, direct=True)]


def make(V=11, n=4, m=3, h=5, direct=True, seed=0, scale=0.5):
    model = FusedNPLM(NPLMConfig(V=V, n=n, m=m, h=h, direct=direct, dtype="float64", seed=seed))
    rng = np.random.default_rng(seed + 100)
    for p in model.params.values():  # random parameters (nonzero biases too)
        p[...] = scale * rng.standard_normal(p.shape)
    return model


def batch(V=11, n=4, K=7, seed=1):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, V, (K, n - 1))
    c[0] = 3  # the same word in every slot of one context
    c[1, 0] = c[1, -1] = 3  # and again in another context: rows of C must accumulate
    return c, rng.integers(0, V, K)


def reference(P, contexts, targets, n, m, direct):
    """Independent forward/backward, one example at a time, straight from section 2's equations."""
    g = {k: np.zeros_like(v) for k, v in P.items()}
    K, loss = len(targets), 0.0
    for ctx, t in zip(contexts, targets):
        words = [ctx[-j] for j in range(1, n)]  # w_{t-1}, w_{t-2}, ..., w_{t-n+1}
        x = np.concatenate([P["C"][w] for w in words])
        a = np.tanh(P["d"] + P["H"] @ x)
        y = P["b"] + P["U"] @ a + (P["W"] @ x if direct else 0)
        p = np.exp(y - y.max()) / np.exp(y - y.max()).sum()
        loss -= np.log(p[t]) / K
        dy = p.copy()
        dy[t] -= 1
        dy /= K
        g["b"] += dy
        g["U"] += np.outer(dy, a)
        dx = np.zeros_like(x)
        if direct:
            g["W"] += np.outer(dy, x)
            dx += P["W"].T @ dy
        do = (1 - a ** 2) * (P["U"].T @ dy)
        g["d"] += do
        g["H"] += np.outer(do, x)
        dx += P["H"].T @ do
        for j, w in enumerate(words):
            g["C"][w] += dx[j * m:(j + 1) * m]
    return loss, g


@pytest.mark.parametrize("kw", CONFIGS)
def test_parameter_count_and_shapes(kw):
    V, n, m, h = 17, 5, 4, kw["h"]
    model = FusedNPLM(NPLMConfig(V=V, n=n, m=m, **kw))
    P = model.params
    assert P["C"].shape == (V, m) and P["H"].shape == (h, (n - 1) * m) and P["d"].shape == (h,)
    assert P["U"].shape == (V, h) and P["b"].shape == (V,)
    if kw["direct"]:
        assert P["W"].shape == (V, (n - 1) * m)
        # |V|(1 + nm + h) + h(1 + (n-1)m) = 17 * (1 + 20 + h) + h * (1 + 16)
        assert model.num_params() == V * (1 + n * m + h) + h * (1 + (n - 1) * m) == 17 * (21 + h) + 17 * h
    else:
        assert "W" not in P
        assert model.num_params() == V * (1 + m + h) + h * (1 + (n - 1) * m)
    assert all(p.dtype == np.float32 for p in P.values())


@pytest.mark.parametrize("kw", CONFIGS)
def test_probabilities(kw):
    model = make(**kw)
    c, t = batch()
    p = model.probs(c)
    assert p.shape == (7, 11) and np.allclose(p.sum(axis=1), 1.0) and np.all(p > 0)
    assert np.allclose(model.log_prob(c, t), np.log(p[np.arange(7), t]))
    assert np.allclose(model.log_probs(c), np.log(p))
    loss, _ = model.loss_and_grads(c, t)
    assert np.isclose(loss, -np.mean(np.log(p[np.arange(7), t])))


def test_context_order_follows_the_paper():
    """x = (C(w_{t-1}), C(w_{t-2})): with W reading only the first block, only w_{t-1} matters."""
    model = make(n=3, h=0, direct=True)
    model.params["W"][:, 3:] = 0  # columns of C(w_{t-2})
    c = np.array([[1, 2], [5, 2], [1, 7]])  # chronological: c[:, -1] is w_{t-1}
    p = model.probs(c)
    assert np.allclose(p[0], p[1]) and not np.allclose(p[0], p[2])


@pytest.mark.parametrize("kw", CONFIGS)
def test_gradients_match_independent_loop_implementation(kw):
    model = make(**kw)
    c, t = batch()
    loss, grads = model.loss_and_grads(c, t)
    ref_loss, ref = reference({k: v.copy() for k, v in model.params.items()}, c, t, 4, 3, kw["direct"])
    assert np.isclose(loss, ref_loss, rtol=1e-12)
    assert grads.keys() == model.params.keys()
    for k in model.params:
        assert grads[k].shape == model.params[k].shape
        np.testing.assert_allclose(grads[k], ref[k], rtol=1e-9, atol=1e-12, err_msg=k)
    assert np.any(grads["C"][3] != 0)


def test_large_logits_are_stable():
    model = make()
    model.params["b"][2] = 1e4  # exp(1e4) overflows without the max subtracted
    c, t = batch()
    loss, grads = model.loss_and_grads(c, t)
    assert np.isfinite(loss) and all(np.all(np.isfinite(g)) for g in grads.values())
    assert np.allclose(model.probs(c)[:, 2], 1.0)


@pytest.mark.parametrize("kw", CONFIGS)
def test_fused_update_equals_gradient_step(kw):
    """sgd_update (gradients consumed as found) == loss_and_grads + sgd_step (the reference rule)."""
    a, b = make(**kw), make(**kw)
    c, t = batch()
    for lr, wd in [(0.1, 0.0), (0.05, 0.01)]:
        _, g = b.loss_and_grads(c, t)
        sgd_step(b.params, g, lr, wd, b.decayed)
        a.sgd_update(c, t, lr, wd)
        for k in a.params:
            np.testing.assert_allclose(a.params[k], b.params[k], rtol=1e-12, atol=1e-14, err_msg=k)


def test_replaced_params_are_used():
    model = make()
    c, t = batch()
    before = model.log_prob(c, t)
    model.params["W"] = np.zeros_like(model.params["W"])  # replace the array, not its contents
    after = model.log_prob(c, t)
    assert not np.allclose(before, after)
    ref = make()
    ref.params["W"][...] = 0
    assert np.allclose(after, ref.log_prob(c, t))


def test_float32_close_to_float64():
    m64 = make()
    m32 = FusedNPLM(NPLMConfig(V=11, n=4, m=3, h=5, dtype="float32"))
    for k in m32.params:
        m32.params[k][...] = m64.params[k]
    c, t = batch()
    assert np.allclose(m32.log_prob(c, t), m64.log_prob(c, t), atol=1e-5)


def test_segment_sum_counts_repeats():
    ids = np.array([4, 1, 4, 4, 0])
    rows = np.arange(10.0).reshape(5, 2)
    words, sums = segment_sum(ids, rows)
    assert words.tolist() == [0, 1, 4]
    # word 4: rows 0, 2, 3 -> [0+4+6, 1+5+7]
    assert sums.tolist() == [[8, 9], [2, 3], [10, 13]]
    words, sums = segment_sum(ids[:0], rows[:0])  # no slot (a thread whose block holds no word of the batch)
    assert words.shape == (0,) and sums.shape == (0, 2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_subtract_at_equals_numpys_ufunc_at_exactly(dtype):
    """out[idx[j]] -= rows[j] in order, repeats included: the very numbers of np.subtract.at (the same
    subtractions in the same order), into a block of rows of a larger array as the output blocks do."""
    rng = np.random.default_rng(0)
    for n, K in ((0, 5), (1, 5), (40, 3), (1000, 60)):
        idx = rng.zipf(1.3, n) % K  # some indices repeat many times, as frequent words do
        rows = rng.standard_normal((n, 7)).astype(dtype)
        big = rng.standard_normal((K + 4, 7)).astype(dtype)
        want = big.copy()
        np.subtract.at(want[2:K + 2], idx, rows)
        subtract_at(big[2:K + 2], idx, rows)
        assert np.array_equal(big, want), (n, K)
    assert n == 0 or np.bincount(idx).max() > 20  # the last case has a heavily repeated index


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gemm_update_blas_and_fallback_agree(dtype):
    rng = np.random.default_rng(0)
    Cm = rng.standard_normal((9, 6)).astype(dtype)
    A = rng.standard_normal((4, 9)).astype(dtype)
    B = rng.standard_normal((4, 8)).astype(dtype)[:, :6]
    want = 0.9 * Cm - 0.1 * (A.T @ B)
    fast = Cm.copy()
    gemm_update(fast, A, B, -0.1, 0.9)
    slow = np.asfortranarray(Cm)  # not C-contiguous: the numpy fallback
    gemm_update(slow, A, B, -0.1, 0.9)
    tol = 1e-5 if dtype == "float32" else 1e-12
    assert np.allclose(fast, want, atol=tol) and np.allclose(slow, want, atol=tol)


@pytest.mark.parametrize("bad", [dict(m=0), dict(n=1), dict(h=-1), dict(h=0, direct=False), dict(V=1),
                                 dict(dtype="float16"), dict(seed=-1), dict(seed=1.5)])
def test_bad_config(bad):
    kw = dict(V=10, n=3, m=2, h=2, direct=True)
    kw.update(bad)
    with pytest.raises(UserError):
        FusedNPLM(NPLMConfig(**kw))


def test_bad_context_shape():
    model = make()
    with pytest.raises(UserError):
        model.log_prob(np.zeros((2, 2), int), np.zeros(2, int))


@pytest.mark.parametrize("contexts, targets, says", [
    ([[1, -1]], [2], "outside"),   # a negative id would silently read the last row of C
    ([[1, 2]], [10], "outside"),   # |V| = 10: ids 0..9
    ([[1.0, 2.0]], [1], "integer"),
])
def test_word_ids_out_of_range_are_one_clear_error(contexts, targets, says):
    model = FusedNPLM(NPLMConfig(V=10, n=3, m=2, h=3))
    for call in (lambda: model.loss_and_grads(np.array(contexts), np.array(targets)),
                 lambda: model.log_prob(np.array(contexts), np.array(targets))):
        with pytest.raises(UserError, match=says):
            call()


def test_threaded_rows_match_one_thread(monkeypatch):
    """Big batches run the softmax rows on several threads: same numbers as one thread."""

    V, K = 5000, 128  # K |V| = 640,000 >= 2^19: the threaded path
    c = np.random.default_rng(0).integers(0, V, (K, 2))
    t = np.random.default_rng(1).integers(0, V, K)
    results = []
    for threads in ("2", "1"):
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
        model = FusedNPLM(NPLMConfig(V=V, n=3, m=4, h=3, seed=0))
        results.append(model.loss_and_grads(c, t))
    assert results[0][0] == results[1][0]
    for k in results[0][1]:
        assert np.array_equal(results[0][1][k], results[1][1][k]), k
    m64 = FusedNPLM(NPLMConfig(V=V, n=3, m=4, h=3, seed=0, dtype="float64"))
    assert np.isclose(results[0][0], m64.loss_and_grads(c, t)[0], rtol=1e-5)
