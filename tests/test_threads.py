"""nplm_edu.numerics.threads: the output-block algorithm on the threads of one process, tested equal
(float64, to 1e-12) to one thread for the fused NPLM's update and probabilities and for the fast
recurrent networks' full softmax, their streams split among threads and their products by columns,
and the clipping and SGD step of a large parameter; the same thread count gives the same numbers."""

import threading
import time

import numpy as np
import pytest

from nplm_edu.models.nplm import NPLMConfig
from nplm_edu.models.rnn import RecurrentConfig
from nplm_edu.numerics import blas, recurrent, threads
from nplm_edu.numerics.fused import FusedNPLM
from nplm_edu.numerics.recurrent import _Fast, recurrent_model
from nplm_edu.training.backends import SerialBackend
from nplm_edu.training.trainer import TrainConfig
from nplm_edu.errors import UserError


@pytest.fixture(autouse=True)
def restore_threads(monkeypatch):
    """Every test may set the thread count and split small layers: both restored afterwards."""
    before, blas_before = threads._SET["threads"], blas.set_blas_threads(None)
    monkeypatch.setattr(FusedNPLM, "MIN_BLOCK_WORK", 0)
    monkeypatch.setattr(_Fast, "MIN_BLOCK_WORK", 0)
    yield
    threads._SET["threads"] = before
    if blas_before is not None:
        blas.set_blas_threads(blas_before)


def test_blocks_cover_the_units_in_order():
    for V, M in ((23, 3), (10, 4), (5, 8), (17_907, 2)):
        blocks = [threads.block_range(V, M, i) for i in range(M)]
        assert blocks[0][0] == 0 and blocks[-1][1] == V
        assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))


def test_reduce_combines_every_thread_in_a_fixed_order():
    rng = np.random.default_rng(0)
    parts = rng.standard_normal((3, 2, 50))  # thread i's two arrays

    def fn(i, reduce):
        mx, s = parts[i, 0].copy(), parts[i, 1].copy()
        reduce(mx, "MAX")
        reduce(s, "SUM")
        return mx, s, threading.get_ident(), threads.threads()

    out = threads.run_blocks(fn, 3)
    assert len({o[2] for o in out}) == 3  # three threads
    assert all(o[3] == 1 for o in out)  # each block runs alone (no nested threads)
    for mx, s, _, _ in out:
        assert np.array_equal(mx, parts[:, 0].max(axis=0))
        assert np.array_equal(s, (parts[0, 1] + parts[1, 1]) + parts[2, 1])  # bit for bit, in block order


def test_gather_hands_every_thread_all_arrays_in_block_order():
    rng = np.random.default_rng(1)
    parts = rng.standard_normal((3, 4, 5))

    def fn(i, reduce):
        first = reduce.gather(parts[i]).copy()
        again = reduce.gather(parts[i] + 1).copy()  # a second exchange does not mix with the first
        return first, again

    for first, again in threads.run_blocks(fn, 3):
        assert np.array_equal(first, parts) and np.array_equal(again, parts + 1)


def test_a_gather_in_two_halves_lets_work_run_between_and_does_not_mix_exchanges():
    """post hands over a part and returns at once; wait returns once every part is in. Thread 0
    is slow between the halves: the others' parts are there when it waits, and its own part
    reaches them; a second exchange right after does not mix with the first."""
    rng = np.random.default_rng(2)
    parts = rng.standard_normal((3, 4))

    def fn(i, reduce):
        every = reduce.post(parts[i])
        if i == 0:
            time.sleep(0.05)  # work between the halves, the others already waiting
        reduce.wait()
        first = every.copy()
        again = reduce.gather(parts[i] * 2).copy()
        return first, again

    for first, again in threads.run_blocks(fn, 3):
        assert np.array_equal(first, parts) and np.array_equal(again, parts * 2)


def test_a_thread_at_the_next_barrier_does_not_let_a_late_one_through():
    """Tokens are counted: the blocks meet at every barrier, however far one thread runs ahead."""
    seen = []

    def fn(i, reduce):
        out = []
        for k in range(50):
            buf = np.array([float(i + k)])
            reduce(buf, "SUM")
            out.append(buf[0])
        return out

    for out in threads.run_blocks(fn, 3):
        seen.append(out)
    assert all(out == [3.0 * k + 3.0 for k in range(50)] for out in seen)


def test_an_error_in_one_block_is_raised_and_the_others_do_not_wait_forever():
    def fn(i, reduce):
        if i == 1:
            raise ValueError("block 1 failed")
        reduce(np.zeros(3), "SUM")

    with pytest.raises(ValueError, match="block 1 failed"):
        threads.run_blocks(fn, 3)
    assert threads.run_blocks(lambda i, reduce: i, 3) == [0, 1, 2]  # the team still works


def test_ctrl_c_while_the_caller_waits_leaves_nothing_for_the_next_call():
    """Ctrl-C (a SIGALRM handler raising KeyboardInterrupt) while the calling thread waits for two
    slower workers: the call raises it, and the next call returns its own results, not the old ones."""
    import signal
    import time

    def interrupt(*_):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)  # the caller's block is done; the workers still sleep
        with pytest.raises(KeyboardInterrupt):
            threads.run_blocks(lambda i, reduce: (time.sleep(1.0 if i else 0), ("first", i))[1], 3)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert threads.run_blocks(lambda i, reduce: ("second", i), 3) == [("second", i) for i in range(3)]


def test_blas_runs_on_one_thread_inside_the_blocks_and_on_T_outside():
    threads.set_threads(2)
    if blas.blas_info()["threads"] is None:
        pytest.skip("numpy's BLAS does not say its thread count")
    assert blas.blas_info()["threads"] == 2
    inside = threads.run_blocks(lambda i, reduce: blas.blas_info()["threads"], 2)
    assert inside == [1, 1]
    assert blas.blas_info()["threads"] == 2


def test_thread_count_setting_is_checked_and_given_to_the_process():
    with pytest.raises(UserError, match="threads must be at least 1"):
        TrainConfig(threads=0).validate()
    model = FusedNPLM(NPLMConfig(V=20, n=3, m=2, h=3))
    SerialBackend(model, TrainConfig(threads=3))
    assert threads.threads() == 3


def _nplm_run(T, direct, K):
    threads.set_threads(T)
    model = FusedNPLM(NPLMConfig(V=300, n=4, m=5, h=6, direct=direct, seed=0, dtype="float64"))
    rng = np.random.default_rng(1)
    losses = []
    for _ in range(3):
        c, t = rng.integers(0, 300, (K, 3)), rng.integers(0, 300, K)
        losses.append(model.sgd_update(c, t, 0.5, 1e-3))
    return np.array(losses), {k: v.copy() for k, v in model.params.items()}, model.log_prob(c, t)


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("K", [1, 40])
def test_fused_update_on_T_threads_equals_one_thread(direct, K):
    losses1, params1, lp1 = _nplm_run(1, direct, K)
    for T in (2, 3):
        losses, params, lp = _nplm_run(T, direct, K)
        np.testing.assert_allclose(losses, losses1, rtol=0, atol=1e-12)
        np.testing.assert_allclose(lp, lp1, rtol=0, atol=1e-12)
        for k in params1:
            np.testing.assert_allclose(params[k], params1[k], rtol=0, atol=1e-12, err_msg=k)
        again = _nplm_run(T, direct, K)  # the same thread count: the same numbers, bit for bit
        assert np.array_equal(again[0], losses) and all(np.array_equal(again[1][k], params[k]) for k in params)


def test_output_blocks_with_frequent_targets_equal_one_thread():
    """Most targets in the first block, many repeating (Zipf, as words are): each block subtracts
    its targets' rows of A from dL/dU (repeats in order); the gradients equal one thread's."""
    rng = np.random.default_rng(7)
    V = 300
    X = rng.integers(0, V, (4, 30))
    Y = np.minimum(rng.zipf(1.5, (4, 30)) - 1, V - 1)  # word 0 most often
    got = {}
    for T in (1, 2, 3):
        threads.set_threads(T)
        model = recurrent_model(RecurrentConfig(V=V, m=5, h=7, cell="lstm", seed=0, dtype="float64"))
        model.MIN_BLOCK_WORK = 0
        loss, grads, _ = model.loss_and_grads(X, Y)
        got[T] = loss, {k: g.copy() for k, g in grads.items()}
    assert np.bincount(Y.ravel()).max() > 20  # a target repeated many times in block 0
    for T in (2, 3):
        assert abs(got[T][0] - got[1][0]) <= 1e-12
        for k in got[1][1]:
            np.testing.assert_allclose(got[T][1][k], got[1][1][k], rtol=0, atol=1e-12, err_msg=k)


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_recurrent_full_softmax_on_T_threads_equals_one_thread(cell):
    rng = np.random.default_rng(1)
    X, Y = rng.integers(0, 200, (4, 6)), rng.integers(0, 200, (4, 6))
    got = {}
    for T in (1, 2, 3):
        threads.set_threads(T)
        model = recurrent_model(RecurrentConfig(V=200, m=5, h=7, cell=cell, seed=0, dtype="float64"))
        loss, grads, _ = model.loss_and_grads(X, Y)
        lp, _ = model.chunk_log_prob(X, Y, None)
        got[T] = loss, {k: g.copy() for k, g in grads.items()}, lp
    for T in (2, 3):
        assert abs(got[T][0] - got[1][0]) <= 1e-12
        np.testing.assert_allclose(got[T][2], got[1][2], rtol=0, atol=1e-12)
        for k in got[1][1]:
            np.testing.assert_allclose(got[T][1][k], got[1][1][k], rtol=0, atol=1e-12, err_msg=k)


def test_a_product_split_by_columns_equals_one_product():
    rng = np.random.default_rng(3)
    a, W = rng.standard_normal((6, 9)), rng.standard_normal((13, 9))
    for b in (W.T, rng.standard_normal((9, 13))):  # a transposed view (the forward's Wh^T) and a plain array
        want = a @ b
        for T in (1, 2, 3, 5):
            big = np.full((6, 20), np.nan)
            out = threads.matmul_columns(a, b, big[:, 4:17], T)  # into a strided block of a larger array
            np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-14)
            assert np.isnan(big[:, :4]).all() and np.isnan(big[:, 17:]).all()


def test_work_after_a_split_product_runs_on_each_block_after_its_columns():
    """matmul_columns' ``then(lo, hi)``: once per block, on that block's thread, after its columns
    of the product are in (here it doubles them: the result is 2 a b, each column once)."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((6, 9)), rng.standard_normal((9, 13))
    for T in (1, 2, 3):
        out, seen = np.empty((6, 13)), []

        def then(lo, hi):
            seen.append((lo, hi, threads.threads()))
            out[:, lo:hi] *= 2

        threads.matmul_columns(a, b, out, T, then)
        np.testing.assert_allclose(out, 2 * (a @ b), rtol=1e-12)
        assert sorted(s[:2] for s in seen) == [threads.block_range(13, T, i) for i in range(T)]
        assert all(s[2] == 1 for s in seen)  # each on its block's thread


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_recurrent_streams_and_products_split_equal_one_thread(cell, monkeypatch):
    """Only the recurrence split (the output layer on one thread): the streams among the threads
    through all T steps, the products over all positions by columns. Loss, every gradient and the
    state from a carried state with resets and dropout, on 2 and 3 threads as on one."""
    monkeypatch.setattr(_Fast, "MIN_STEP_WORK", 0)
    monkeypatch.setattr(_Fast, "MIN_BLOCK_WORK", 1 << 60)
    calls, streams = [], []
    real, real_blocks = threads.matmul_columns, threads.run_blocks
    monkeypatch.setattr(recurrent, "matmul_columns", lambda *a: calls.append(a[3]) or real(*a))
    monkeypatch.setattr(recurrent, "run_blocks", lambda fn, n: streams.append(n) or real_blocks(fn, n))
    rng = np.random.default_rng(4)
    B, T, h, m = 3, 5, 6, 4
    X, Y = rng.integers(0, 50, (B, T)), rng.integers(0, 50, (B, T))
    kw = {"state": tuple(rng.normal(size=(B, h)) for _ in range(2 if cell == "lstm" else 1)),
          "resets": rng.random((B, T)) < 0.2, "mask_x": (rng.random((T, B, m)) > 0.3) / 0.7,
          "mask_a": (rng.random((T, B, h)) > 0.3) / 0.7}
    got = {}
    for n in (1, 2, 3):
        threads.set_threads(n)
        model = recurrent_model(RecurrentConfig(V=50, m=m, h=h, cell=cell, seed=0, dtype="float64"))
        model.params["Wh"] *= 3  # the recurrent paths matter
        loss, grads, state = model.loss_and_grads(X, Y, **kw)
        got[n] = loss, {k: g.copy() for k, g in grads.items()}, [s.copy() for s in state]
    assert set(calls) == {2, 3} and set(streams) == {2, 3}  # products and streams split, on 2 and 3 threads
    for n in (2, 3):
        assert abs(got[n][0] - got[1][0]) <= 1e-12 * got[1][0]
        for k in got[1][1]:
            np.testing.assert_allclose(got[n][1][k], got[1][1][k], rtol=1e-12, atol=1e-15, err_msg=k)
        for s, s1 in zip(got[n][2], got[1][2]):
            np.testing.assert_allclose(s, s1, rtol=1e-12, atol=1e-15)


def test_float32_update_on_two_threads_stays_close_to_one_thread():
    """The speed path (float32): the blocks' sums differ from one thread's only by rounding."""
    out = []
    for T in (1, 2):
        threads.set_threads(T)
        model = FusedNPLM(NPLMConfig(V=2000, n=3, m=8, h=16, seed=0))
        rng = np.random.default_rng(2)
        out.append([model.sgd_update(rng.integers(0, 2000, (64, 2)), rng.integers(0, 2000, 64), 0.1, 1e-4)
                    for _ in range(5)])
    np.testing.assert_allclose(out[1], out[0], rtol=1e-5)


def test_a_split_step_runs_blas_on_one_thread_throughout(monkeypatch):
    """BLAS's own threads, once woken, poll for work on the cores the blocks need: a step whose output
    layer is split keeps BLAS on one thread from start to end, and gives the count back after."""
    from nplm_edu.numerics import fused

    threads.set_threads(2)
    if blas.blas_info()["threads"] is None:
        pytest.skip("numpy's BLAS does not say its thread count")
    seen = []
    real = fused.features

    def spy(*args, **kw):
        seen.append(blas.blas_info()["threads"])
        return real(*args, **kw)

    monkeypatch.setattr(fused, "features", spy)
    model = FusedNPLM(NPLMConfig(V=300, n=3, m=4, h=5, seed=0))
    model.sgd_update(np.array([[1, 2], [3, 4]]), np.array([5, 6]), 0.1, 0.0)
    model.log_prob(np.array([[1, 2]]), np.array([5]))
    assert seen == [1, 1] and blas.blas_info()["threads"] == 2


def test_processes_sharing_the_cores_take_a_share_each(monkeypatch):
    # 2 usable cores: 1 process takes both, 2 take one each, 3 or more still one each (never 0)
    from nplm_edu.numerics import threads as th

    monkeypatch.setattr(th, "usable_cores", lambda: 2)
    assert [th.threads_per_process(P) for P in (1, 2, 3, 8)] == [2, 1, 1, 1]
    monkeypatch.setattr(th, "usable_cores", lambda: 8)
    assert [th.threads_per_process(P) for P in (1, 2, 3, 4)] == [8, 4, 2, 2]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_clipping_and_sgd_pieces_on_T_threads_equal_numpy_on_one(dtype, monkeypatch):
    """The clipping's sum of squares and scaling and the SGD step of a large parameter, split among
    threads by rows and in cache-sized pieces: the same entries as numpy's whole-array expressions."""
    monkeypatch.setattr(threads, "MIN_ROWWISE", 0)
    rng = np.random.default_rng(5)
    for shape in ((300, 700), (37, 11), (5,), (0, 3)):
        p0, g = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
        for T in (1, 2, 3):
            threads.set_threads(T)
            for wd in (0.0, 1e-3):
                p = p0.copy()
                threads.sgd_inplace(p, g, 0.1, wd)
                assert np.array_equal(p, p0 - 0.1 * (g + wd * p0) if wd else p0 - 0.1 * g)
            a = g.copy()
            threads.scale_inplace(a, 0.3)
            assert np.array_equal(a, g * g.dtype.type(0.3))
            want = float(np.dot(g.ravel().astype(np.float64), g.ravel().astype(np.float64)))
            assert threads.sum_of_squares(g) == pytest.approx(want, rel=1e-12 if dtype == "float64" else 1e-5)


@pytest.mark.parametrize("cell", ["rnn", "lstm", "gru"])
def test_recurrent_training_steps_on_T_threads_equal_one_thread(cell, monkeypatch):
    """The trainer's whole update (forward, output blocks, BPTT, every product split by columns,
    clipping and SGD with weight decay split by rows) on 2 and 3 threads as on one (float64, 1e-12)."""
    from nplm_edu.training.stream import StreamBackend, StreamConfig

    monkeypatch.setattr(threads, "MIN_ROWWISE", 0)
    monkeypatch.setattr(_Fast, "MIN_STEP_WORK", 0)
    rng = np.random.default_rng(6)
    batches = [(rng.integers(0, 60, (3, 5)), rng.integers(0, 60, (3, 5))) for _ in range(3)]
    got = {}
    for T in (1, 2, 3):
        model = recurrent_model(RecurrentConfig(V=60, m=4, h=6, cell=cell, seed=0, dtype="float64"))
        backend = StreamBackend(model, TrainConfig(batch=3, lr=0.5, weight_decay=1e-3, threads=T),
                                StreamConfig(T=5, clip=0.05))
        losses = [backend.update(X, Y, None, i == 0, 0.5) for i, (X, Y) in enumerate(batches)]
        got[T] = losses, {k: v.copy() for k, v in model.params.items()}, backend.norms.copy()
    assert got[1][2][2] == 3  # every update was clipped
    for T in (2, 3):
        np.testing.assert_allclose(got[T][0], got[1][0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(got[T][2], got[1][2], rtol=1e-12)
        for k in got[1][1]:
            np.testing.assert_allclose(got[T][1][k], got[1][1][k], rtol=0, atol=1e-12, err_msg=k)


def test_one_stream_is_read_with_blas_on_one_thread(monkeypatch):
    """Evaluation reads one stream (B = 1): its recurrence cannot be split, and BLAS's threads, woken
    for its small products, would poll for work on the cores the output blocks use; it runs on one."""
    threads.set_threads(2)
    if blas.blas_info()["threads"] is None:
        pytest.skip("numpy's BLAS does not say its thread count")
    seen = []
    real = recurrent.FastLSTM._recur_streams

    def spy(self, *args, **kw):
        seen.append(blas.blas_info()["threads"])
        return real(self, *args, **kw)

    monkeypatch.setattr(recurrent.FastLSTM, "_recur_streams", spy)
    model = recurrent_model(RecurrentConfig(V=40, m=4, h=5, cell="lstm", seed=0))
    lp = model.log_prob_stream(np.arange(30) % 40, (np.arange(30) + 1) % 40, chunk=10)
    assert lp.shape == (30,) and seen == [1, 1, 1] and blas.blas_info()["threads"] == 2


def _class_layer(V, h, n_classes=4):
    from nplm_edu.models.class_softmax import ClassSoftmax, frequency_classes

    return ClassSoftmax(V, h, frequency_classes(1.0 / np.arange(1, V + 1), n_classes))


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrent_class_softmax_steps_on_T_threads_equal_one_thread_and_repeat(cell, monkeypatch):
    """A cheap output layer: the trainer's whole update on 2 and 3 threads as on one (float64, 1e-12),
    and the same bits when run again on the same thread count."""
    from nplm_edu.training.stream import StreamBackend, StreamConfig

    monkeypatch.setattr(threads, "MIN_ROWWISE", 0)
    monkeypatch.setattr(_Fast, "MIN_STEP_WORK", 0)
    rng = np.random.default_rng(7)
    batches = [(rng.integers(0, 60, (3, 5)), rng.integers(0, 60, (3, 5))) for _ in range(3)]

    def train(T):
        model = recurrent_model(RecurrentConfig(V=60, m=4, h=6, cell=cell, seed=0, dtype="float64"), _class_layer(60, 6))
        backend = StreamBackend(model, TrainConfig(batch=3, lr=0.5, weight_decay=1e-3, threads=T),
                                StreamConfig(T=5, clip=0.05))
        losses = [backend.update(X, Y, None, i == 0, 0.5) for i, (X, Y) in enumerate(batches)]
        return losses, {k: v.copy() for k, v in model.params.items()}

    got = {T: train(T) for T in (1, 2, 3)}
    for T in (2, 3):
        np.testing.assert_allclose(got[T][0], got[1][0], rtol=0, atol=1e-12)
        for k in got[1][1]:
            np.testing.assert_allclose(got[T][1][k], got[1][1][k], rtol=0, atol=1e-12, err_msg=k)
    again = train(2)
    assert again[0] == got[2][0] and all(np.array_equal(again[1][k], got[2][1][k]) for k in got[2][1])


def test_a_cheap_output_layer_runs_blas_on_one_thread_on_several_threads(monkeypatch):
    """The class-factored layer's products (one per class present) on BLAS's own threads cost far more
    CPU than they save (its threads poll for work afterwards): on several threads, a recurrent step and
    the NPLM's step with a cheap output layer keep BLAS on one thread throughout and give the count back."""
    from nplm_edu.models.class_softmax import ClassSoftmax
    from nplm_edu.numerics.sparse import SparseNPLM

    threads.set_threads(2)
    if blas.blas_info()["threads"] is None:
        pytest.skip("numpy's BLAS does not say its thread count")
    seen = []
    real = ClassSoftmax.backward_sparse

    def spy(self, *args, **kw):
        seen.append(blas.blas_info()["threads"])
        return real(self, *args, **kw)

    monkeypatch.setattr(ClassSoftmax, "backward_sparse", spy)
    rec = recurrent_model(RecurrentConfig(V=40, m=4, h=5, cell="lstm", seed=0), _class_layer(40, 5))
    rec.loss_and_sparse_grads(np.arange(12).reshape(2, 6), np.arange(1, 13).reshape(2, 6))
    nplm = SparseNPLM(NPLMConfig(V=40, n=3, m=4, h=5, seed=0, direct=False), _class_layer(40, 5))
    nplm.sgd_update(np.array([[1, 2], [3, 4]]), np.array([5, 6]), 0.1, 1e-4)
    assert seen == [1, 1] and blas.blas_info()["threads"] == 2
    threads.set_threads(1)
    nplm.sgd_update(np.array([[1, 2], [3, 4]]), np.array([5, 6]), 0.1, 1e-4)
    assert seen[-1] == 1


def test_the_transformers_cheap_output_layer_and_the_nplms_scoring_run_blas_on_one_thread(monkeypatch):
    """As the class layer's steps above: on several threads the Transformer's step and scoring with a
    cheap output layer, and SparseNPLM.log_prob, keep BLAS on one thread and give the count back."""
    from nplm_edu.models.class_softmax import ClassSoftmax
    from nplm_edu.models.transformer import TransformerConfig
    from nplm_edu.numerics.sparse import SparseNPLM
    from nplm_edu.numerics.transformer import FastTransformer

    threads.set_threads(2)
    if blas.blas_info()["threads"] is None:
        pytest.skip("numpy's BLAS does not say its thread count")
    seen = []
    for name in ("loss", "log_prob"):
        real = getattr(ClassSoftmax, name)
        monkeypatch.setattr(ClassSoftmax, name, lambda self, *a, _real=real, **kw: (
            seen.append((_real.__name__, blas.blas_info()["threads"])), _real(self, *a, **kw))[1])
    tr = FastTransformer(TransformerConfig(V=40, n_ctx=3, m=6, heads=2, layers=1, d_ff=8, tie=False, seed=0))
    tr.output = _class_layer(40, 6)
    tr.params.update(tr.output.init_params(np.random.default_rng(0), tr.params["U"].dtype))
    X = np.arange(6).reshape(2, 3)
    tr.loss_and_grads(X, X + 1)
    tr.next_log_prob(X, np.array([4, 5]))
    nplm = SparseNPLM(NPLMConfig(V=40, n=3, m=4, h=5, seed=0, direct=False), _class_layer(40, 5))
    nplm.log_prob(np.array([[1, 2], [3, 4]]), np.array([5, 6]))
    assert seen == [("loss", 1), ("log_prob", 1), ("log_prob", 1)] and blas.blas_info()["threads"] == 2
