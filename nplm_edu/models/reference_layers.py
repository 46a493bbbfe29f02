"""The class-factored and tree softmaxes written to be read: one example at a time, plain loops.

These are the references for :class:`~nplm_edu.models.class_softmax.ClassSoftmax` and
:class:`~nplm_edu.models.tree_softmax.TreeSoftmax`, which compute the same loss and gradients for a
whole batch at once (grouping the examples by class, padding the tree paths), arranged for speed.
Each function returns the batch's mean negative log-likelihood L, dL/da (K, h) and the gradients of
the layer's parameters, with the parameters in word-id order: row w of ``U`` is word w's.
"""

from __future__ import annotations

import numpy as np

from .output import log_softmax
from .tree_softmax import log_sigmoid, sigmoid


def class_softmax_reference(U_class, b_class, U, b, labels, a, targets):
    """log P(w | x) = log P(g(w) | x) + log P(w | g(w), x), example by example.

    ``U_class`` (n_classes, h), ``b_class`` (n_classes,), ``U`` (|V|, h), ``b`` (|V|,), ``labels``
    (|V|,) the class g(w) of every word, ``a`` (K, h) the hidden layer, ``targets`` (K,)."""
    K = len(targets)
    loss, ga = 0.0, np.zeros_like(a)  # (K, h) dL/da
    g = {"U_class": np.zeros_like(U_class), "b_class": np.zeros_like(b_class),
         "U": np.zeros_like(U), "b": np.zeros_like(b)}
    for k, w in enumerate(targets):
        c = labels[w]  # the target's class
        words = np.flatnonzero(labels == c)  # (|c|,) the words of that class
        t = np.searchsorted(words, w)  # the target's place among them
        x = a[k:k + 1]  # (1, h) this example's hidden layer
        lpc = log_softmax(x @ U_class.T + b_class)[0]  # (n_classes,) log P(c | x)
        lpw = log_softmax(x @ U[words].T + b[words])[0]  # (|c|,) log P(w' | c, x)
        loss -= (lpc[c] + lpw[t]) / K
        # backward through both softmaxes: dL/dy = (P - 1[target]) / K
        gyc = np.exp(lpc)
        gyc[c] -= 1
        gyw = np.exp(lpw)
        gyw[t] -= 1
        gyc, gyw = gyc / K, gyw / K
        g["U_class"] += np.outer(gyc, a[k])
        g["b_class"] += gyc
        g["U"][words] += np.outer(gyw, a[k])  # only the rows of the target's class
        g["b"][words] += gyw
        ga[k] = gyc @ U_class + gyw @ U[words]
    return loss, ga, g


def tree_softmax_reference(tree, U_node, b_node, a, targets):
    """log P(w | x) = sum over the nodes j of w's path of log sigma(s (b_j + U_j . a)), node by node.

    ``tree`` a :class:`~nplm_edu.models.trees.Tree` (its ``nodes``, ``signs`` and ``depth``: the path
    of every word from the root, +1 for a left turn, -1 for a right turn), ``U_node`` (|V| - 1, h),
    ``b_node`` (|V| - 1,), ``a`` (K, h), ``targets`` (K,)."""
    K = len(targets)
    loss, ga = 0.0, np.zeros_like(a)  # (K, h) dL/da
    gU, gb = np.zeros_like(U_node), np.zeros_like(b_node)
    for k, w in enumerate(targets):
        for d in range(tree.depth[w]):  # the nodes on w's path, root first
            j, s = tree.nodes[w, d], tree.signs[w, d]
            z = b_node[j] + U_node[j] @ a[k]  # the node's score
            loss -= log_sigmoid(s * z) / K
            # backward through log sigma(s z): d/dz = s sigma(-s z)
            gz = -s * sigmoid(-s * z) / K
            gU[j] += gz * a[k]
            gb[j] += gz
            ga[k] += gz * U_node[j]
    return loss, ga, {"U_node": gU, "b_node": gb}
