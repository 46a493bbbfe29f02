"""The softmax-NLL head: the mean NLL and dL/dy of the reference output layer, in place, and the same
numbers when the output units are split into column blocks whose max and sum are combined."""

import numpy as np
import pytest

from nplm_edu.models.output import log_softmax
from nplm_edu.numerics.head import nll, softmax_nll
from nplm_edu.numerics.threads import block_range, run_blocks


def scores(K=7, V=11, seed=0):
    rng = np.random.default_rng(seed)
    return 3 * rng.standard_normal((K, V)), rng.integers(0, V, K)


def test_the_head_is_the_reference_layers_loss_and_gradient():
    """NLL = -log softmax(y)_{w_t} (the reference's log_softmax) and dL/dy = (p - onehot) / K."""
    y, t = scores()
    lp = log_softmax(y)
    gy = np.exp(lp)
    gy[np.arange(7), t] -= 1
    gy /= 7
    work = y.copy()
    own, yt, mx, s = softmax_nll(work, t)
    assert own.tolist() == list(range(7)) and np.array_equal(yt, y[np.arange(7), t])
    np.testing.assert_allclose(nll(yt, mx, s), -lp[np.arange(7), t], rtol=1e-13)
    np.testing.assert_allclose(work, gy, rtol=1e-12, atol=1e-15)


def test_without_grad_it_leaves_exp_of_the_shifted_scores():
    y, t = scores(seed=1)
    work = y.copy()
    _, _, mx, s = softmax_nll(work, t, grad=False)
    np.testing.assert_allclose(work, np.exp(y - y.max(axis=1, keepdims=True)), rtol=1e-13)
    np.testing.assert_allclose(s, work.sum(axis=1), rtol=1e-13)


@pytest.mark.parametrize("cuts", [(0, 4, 11), (0, 1, 5, 6, 11), (0, 11, 11)])
def test_column_blocks_combined_give_the_whole_layers_numbers(cuts):
    """Each block of units lo..hi-1 on its own columns, its max and sum combined with the other blocks'
    (here: by a reduce that computes them over all blocks first): its columns of dL/dy, and its
    examples' target scores, are the whole layer's."""
    y, t = scores(seed=2)
    whole = y.copy()
    _, yt_all, mx_all, s_all = softmax_nll(whole, t)
    blocks = [y[:, lo:hi].copy() for lo, hi in zip(cuts, cuts[1:])]

    def reduce(buf, op):  # what Allreduce over the blocks returns: the max, the sum over all |V| units
        gm = y.max(axis=1)
        buf[:] = gm if op == "MAX" else np.exp(y - gm[:, None]).sum(axis=1)

    seen = []
    for (lo, hi), blk in zip(zip(cuts, cuts[1:]), blocks):
        own, yt, mx, s = softmax_nll(blk, t, lo, reduce)
        np.testing.assert_allclose(blk, whole[:, lo:hi], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(s, s_all, rtol=1e-13)
        assert np.array_equal(mx, mx_all) and np.array_equal(yt, y[own, t[own]])
        seen += own.tolist()
    assert sorted(seen) == list(range(7))  # every example's target is in exactly one block


@pytest.mark.parametrize("cuts", [(0, 4, 11), (0, 11, 11), (0, 2, 2, 9, 11)])
def test_blocks_add_their_biases_and_sum_their_columns_as_the_whole_layer(cuts):
    """A block given its biases b and a buffer gb: y + b's head, and gb = dL/db (the column sums of
    dL/dy), as the whole layer's on y + b; the target scores include b."""
    y, t = scores(K=40, seed=3)
    b = np.random.default_rng(4).standard_normal(11)
    t[:3] = t[0]  # a target repeated: its -1/K counted each time
    whole = y + b
    _, yt_all, mx_all, s_all = softmax_nll(whole, t)

    def reduce(buf, op):
        gm = (y + b).max(axis=1)
        buf[:] = gm if op == "MAX" else np.exp(y + b - gm[:, None]).sum(axis=1)

    for lo, hi in zip(cuts, cuts[1:]):
        blk, gb = y[:, lo:hi].copy(), np.full(hi - lo, np.nan)
        own, yt, mx, s = softmax_nll(blk, t, lo, reduce, True, b[lo:hi], gb)
        np.testing.assert_allclose(blk, whole[:, lo:hi], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(gb, whole[:, lo:hi].sum(axis=0), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(s, s_all, rtol=1e-13)
        assert np.array_equal(mx, mx_all) and np.array_equal(yt, (y + b)[own, t[own]])


def test_one_exchange_of_the_blocks_max_and_sum_equals_two_reductions():
    """On threads the blocks exchange their (max, sum) once (``reduce.gather``); MPI's two Allreduce
    calls (MAX, then SUM) give the same numbers bit for bit."""
    y, t = scores(K=40, V=23, seed=5)
    b = np.random.default_rng(6).standard_normal(23)

    def run(gathers):
        def block(i, reduce):
            lo, hi = block_range(23, 3, i)
            blk, gb = y[:, lo:hi].copy(), np.empty(hi - lo)
            two = lambda buf, op: reduce(buf, op)  # noqa: E731 -- the reduce without gather
            assert hasattr(reduce, "gather")
            out = softmax_nll(blk, t, lo, reduce if gathers else two, True, b[lo:hi], gb)
            return out, blk, gb

        return run_blocks(block, 3)

    for (one, blk1, gb1), (two, blk2, gb2) in zip(run(True), run(False)):
        assert all(np.array_equal(p, q) for p, q in zip(one, two))
        assert np.array_equal(blk1, blk2) and np.array_equal(gb1, gb2)
