"""The differentiated softmax (models.differentiated_softmax): gradients against central differences and
against an independent reverse-mode AD of Chen et al.'s equations (tests/autodiff.py) in float64,
probabilities summing to 1 over the vocabulary, each band reading its own slice of the hidden layer,
training through the trainer, bad settings in one line."""

import numpy as np
import pytest

from nplm_edu.errors import UserError
from nplm_edu.models.differentiated_softmax import DifferentiatedSoftmax
from nplm_edu.models.output import FullSoftmax

from test_adaptive_softmax import COUNTS, H, V, check_layer, layer_against_autodiff, layer_case, model_and_batch, \
    train_a_little

BANDS = [([4, 9], [10, 4, 2]), ([6], [15, 1]), ([1, 2, 3], [4, 4, 4, 4])]  # (cutoffs, widths)


@pytest.mark.parametrize("cutoffs,widths", BANDS)
def test_gradients_and_probabilities(cutoffs, widths):
    check_layer(DifferentiatedSoftmax(V, H, cutoffs, widths, COUNTS))


def differentiated_autodiff_loss(P, a, targets, widths):
    """Chen, Grangier and Auli's (2016) mean NLL written with tests/autodiff.py's operations: y_w = b_w +
    U_j[w] . a_j for w in band j (a_j band j's slice of a; band j's words are U_j's rows, by rank), one
    softmax over the |V| words."""
    from autodiff import concat_cols, logsumexp, pick, rows, total

    order = np.argsort(-COUNTS, kind="stable")  # (|V|,) the words from the most frequent, ties by id
    rank = np.argsort(order)  # (|V|,) each word's rank
    lo = np.r_[0, np.cumsum(widths)]  # a_j = a[:, lo[j-1]:lo[j]]
    y = concat_cols([a.cols(lo[j - 1], lo[j]) @ P[f"U_{j}"].T for j in range(1, len(widths) + 1)])  # (K, |V|) by rank
    y = y + rows(P["b"], order)  # b in rank order
    return total(pick(y - logsumexp(y), rank[targets])) * (-1.0 / len(targets))


@pytest.mark.parametrize("cutoffs,widths", BANDS)
def test_backward_equals_automatic_differentiation(cutoffs, widths):
    """The hand-derived backward (every band's U_j, b, dL/da) equals an independent reverse-mode AD."""
    layer = DifferentiatedSoftmax(V, H, cutoffs, widths, COUNTS)
    P, a, t = layer_case(layer)
    layer_against_autodiff(layer, P, a, t, lambda P, a, t: differentiated_autodiff_loss(P, a, t, widths))


def test_each_band_reads_only_its_slice():
    layer = DifferentiatedSoftmax(V, H, [4, 9], [10, 4, 2], COUNTS)
    model, c, t = model_and_batch(layer)
    P = model.params
    assert [P[f"U_{j}"].shape for j in (1, 2, 3)] == [(4, 10), (5, 4), (4, 2)]
    a = np.random.default_rng(5).standard_normal((3, H))
    before = layer.log_probs(P, {"U": a})
    a2 = a.copy()
    a2[:, 14:] += 1.0  # change band 3's slice only: only band 3's scores move
    y1, y2 = layer.scores(P, a), layer.scores(P, a2)
    assert np.array_equal(y1[:, :9], y2[:, :9]) and not np.allclose(y1[:, 9:], y2[:, 9:])
    assert np.allclose(np.exp(before).sum(axis=1), 1.0)


def test_it_is_the_full_softmax_with_a_block_diagonal_matrix():
    """The paper's layer y = b + U a with U zero outside the bands' blocks gives the same probabilities."""
    layer = DifferentiatedSoftmax(V, H, [V - 1], [H - 1, 1])
    full = FullSoftmax(V, {"U": H})
    P = layer.init_params(np.random.default_rng(0), np.float64)
    U = np.zeros((V, H))
    U[:V - 1, :H - 1], U[V - 1:, H - 1:] = P["U_1"], P["U_2"]  # the block-diagonal output matrix
    a = np.random.default_rng(1).standard_normal((4, H))
    assert np.allclose(layer.log_probs(P, {"U": a}), full.log_probs({"U": U, "b": P["b"]}, {"U": a}), atol=1e-12)


@pytest.mark.parametrize("widths", [[10, 4], [10, 4, 3], [16, 0, 0], [8.0, 4, 4]])
def test_bad_widths_are_one_line(widths):
    with pytest.raises(UserError, match="widths must be 3 whole numbers"):
        DifferentiatedSoftmax(V, H, [4, 9], widths)


def test_trains_through_the_trainer():
    corpus, hist = train_a_little(lambda V, h, counts: DifferentiatedSoftmax(V, h, [V // 8, V // 3], [10, 4, 2],
                                                                             counts))
    e = hist["epochs"]
    assert e[-1]["train_ppl"] < e[0]["train_ppl"] and e[-1]["valid_ppl"] < e[0]["valid_ppl"] < corpus.V
