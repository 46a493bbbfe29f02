"""The readable, example-by-example class and tree softmaxes equal the fast batched layers (float64)."""

import numpy as np
import pytest

from nplm_edu.models.class_softmax import ClassSoftmax
from nplm_edu.models.reference_layers import class_softmax_reference, tree_softmax_reference
from nplm_edu.models.tree_softmax import TreeSoftmax
from nplm_edu.models.trees import Tree, huffman_merges

V, h, K = 23, 5, 17


def batch(seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((K, h))
    targets = rng.integers(0, V, K)
    targets[:3] = targets[3]  # repeated targets: their gradients must add up
    return rng, a, targets


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_class_softmax_reference_equals_the_fast_layer(seed):
    rng, a, targets = batch(seed)
    labels = rng.integers(0, 6, V)
    layer = ClassSoftmax(V, h, labels)
    P = layer.init_params(rng, np.float64)
    P["b"] += rng.standard_normal(V)
    P["b_class"] += rng.standard_normal(layer.n_classes)
    loss, cache = layer.loss(P, {"U": a}, targets)
    g_in, grads = layer.backward(P, cache)
    # the fast layer stores U class by class (word w at row pos[w]); the reference reads word order
    ref_loss, ref_ga, ref = class_softmax_reference(P["U_class"], P["b_class"], P["U"][layer.pos], P["b"][layer.pos],
                                                    layer.labels, a, targets)
    assert abs(ref_loss - loss) < 1e-12
    np.testing.assert_allclose(ref_ga, g_in["U"], atol=1e-13)
    for name in ("U_class", "b_class"):
        np.testing.assert_allclose(ref[name], grads[name], atol=1e-13)
    np.testing.assert_allclose(ref["U"], grads["U"][layer.pos], atol=1e-13)
    np.testing.assert_allclose(ref["b"], grads["b"][layer.pos], atol=1e-13)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tree_softmax_reference_equals_the_fast_layer(seed):
    rng, a, targets = batch(seed)
    tree = Tree(huffman_merges(rng.integers(1, 50, V)))
    layer = TreeSoftmax(V, h, tree)
    P = layer.init_params(rng, np.float64)
    P["b_node"] += rng.standard_normal(V - 1)
    loss, cache = layer.loss(P, {"U": a}, targets)
    g_in, grads = layer.backward(P, cache)
    ref_loss, ref_ga, ref = tree_softmax_reference(tree, P["U_node"], P["b_node"], a, targets)
    assert abs(ref_loss - loss) < 1e-12
    np.testing.assert_allclose(ref_ga, g_in["U"], atol=1e-13)
    for name in ("U_node", "b_node"):
        np.testing.assert_allclose(ref[name], grads[name], atol=1e-13)


def test_a_wrong_reference_would_fail():
    """The comparison can fail: a tree walked with one turn flipped gives another loss."""
    rng, a, targets = batch(0)
    tree = Tree(huffman_merges(rng.integers(1, 50, V)))
    layer = TreeSoftmax(V, h, tree)
    P = layer.init_params(rng, np.float64)
    loss, _ = layer.loss(P, {"U": a}, targets)
    tree.signs[targets[0], 0] *= -1
    assert abs(tree_softmax_reference(tree, P["U_node"], P["b_node"], a, targets)[0] - loss) > 1e-6
