"""The tree (hierarchical) softmax, exact (section 5 of the paper; Morin & Bengio 2005, with a tree
built with the help of WordNet; Mnih & Hinton 2009, with trees built by recursively splitting learned
word feature vectors): a word costs its path length, O(log|V|) for a tree of depth about log2|V|.

Each internal node j of a binary tree over the words (:mod:`nplm_edu.models.trees`) has a vector
U_j and a bias b_j and sends a context left with probability sigma(b_j + U_j . a), right with
sigma(-(b_j + U_j . a)). A word's probability is the product along its path from the root, with
s_d = +1 (left) or -1 (right) at step d:

    z_d = b_{j_d} + U_{j_d} . a                       (K, depth)
    log P(w | h) = sum_d log sigma(s_d z_d)            (K,)

At every node the two branches sum to the node's own probability (sigma(z) + sigma(-z) = 1), so
the leaves sum to 1 for every context. An example costs its path length in dot products: about
10 on Brown with a Huffman tree instead of 17,907.

The batch is vectorized: paths padded to the batch's longest with s = 0 (log sigma(0 z) = log 1/2
is masked out). Backward, with d/dz log sigma(s z) = s sigma(-s z):

    dL/dz_d = -s_d sigma(-s_d z_d) / K                (K, depth), 0 on padding
    dL/da   = sum_d dL/dz_d U_{j_d}                   (K, h)
    dL/dU_j = sum over (example, step) at node j of dL/dz_d a        (rows of the nodes used only)
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .sparse_output import Rows, SparseOutputLayer, check_sizes, check_targets
from .trees import Tree


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    """log sigma(x) = -log(1 + e^-x), without overflow for large |x|."""
    return -np.logaddexp(0, -x)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """sigma(x) = 1 / (1 + e^-x) for every x (e^-x may overflow to inf: 1 / inf = 0)."""
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


class TreeSoftmax(SparseOutputLayer):
    """P(w | h) = prod over w's path of sigma(s_d (b_j + U_j . a)) (see the module docstring).

    Parameters: ``U_node`` (|V| - 1, h) and ``b_node`` (|V| - 1,), one row per internal node, drawn like
    the full softmax's U (uniform in +-1/sqrt(h)), biases 0.

    >>> from nplm_edu.models.trees import huffman_merges
    >>> layer = TreeSoftmax(4, 3, Tree(huffman_merges([5, 1, 1, 3])))
    >>> P = layer.init_params(np.random.default_rng(0), np.float64)
    >>> a = np.random.default_rng(1).standard_normal((2, 3))
    >>> np.exp(layer.log_probs(P, {"U": a})).sum(axis=1).round(12).tolist()
    [1.0, 1.0]
    """

    name = "tree"

    def __init__(self, V: int, h: int, tree: Tree):
        check_sizes(V, h)
        if tree.V != V:
            raise UserError(f"the tree has {tree.V} leaves but the vocabulary {V} words")
        self.V, self.h, self.tree = V, h, tree
        self.widths = {"U": h}
        self.decayed = ("U_node",)

    def init_params(self, rng, dtype) -> dict:
        r = 1 / np.sqrt(self.h)
        return {"U_node": rng.uniform(-r, r, size=(self.V - 1, self.h)).astype(dtype),  # (|V| - 1, h)
                "b_node": np.zeros(self.V - 1, dtype)}

    def _paths(self, targets):
        """The targets' paths padded to the longest of them: nodes (K, D), signs (K, D)."""
        D = int(self.tree.depth[targets].max()) if len(targets) else 0
        return self.tree.nodes[targets, :D], self.tree.signs[targets, :D]

    def _z(self, P, a, nodes):
        """z = b_j + U_j . a at every step of every path: (K, D), and the gathered U_j (K, D, h)."""
        Uj = P["U_node"][nodes]  # (K, D, h)
        z = (Uj @ a[:, :, None])[:, :, 0] + P["b_node"][nodes]  # (K, D)
        return z, Uj

    def loss(self, params, inputs, targets):
        a = self.input(inputs)
        targets = check_targets(targets, self.V)
        nodes, signs = self._paths(targets)
        z, Uj = self._z(params, a, nodes)
        sz = signs * z  # (K, D) s_d z_d, 0 on padding
        logp = np.where(signs != 0, log_sigmoid(sz.astype(np.float64)), 0.0).sum(axis=1)  # (K,)
        return float(-logp.mean()), {"a": a, "nodes": nodes, "signs": signs, "sz": sz, "Uj": Uj}

    def backward_sparse(self, params, cache):
        a, nodes, signs, sz, Uj = cache["a"], cache["nodes"], cache["signs"], cache["sz"], cache["Uj"]
        K, h = a.shape
        gz = (-signs * sigmoid(-sz) / K).astype(a.dtype)  # (K, D) dL/dz = -s sigma(-s z) / K, 0 on padding
        ga = (gz[:, None, :] @ Uj)[:, 0, :]  # (K, h) dL/da = sum_d dL/dz_d U_{j_d}
        k, d = np.nonzero(signs)  # the (example, step) pairs on real paths, padding left out
        rows, gzl = nodes[k, d], gz[k, d]  # (P,) node and dL/dz of each pair
        gU = gzl[:, None] * a[k]  # (P, h) one row per pair: dL/dz_d a
        return {"U": ga}, {"U_node": Rows(rows, gU), "b_node": Rows(rows, gzl)}

    # ----------------------------------------------------------------- probabilities
    def log_prob(self, params, inputs, targets):
        """log P(target | h) along its path only: (K,) float64, O(depth) per example."""
        a = self.input(inputs)
        targets = check_targets(targets, self.V)
        nodes, signs = self._paths(targets)
        z, _ = self._z(params, a, nodes)
        return np.where(signs != 0, log_sigmoid((signs * z).astype(np.float64)), 0.0).sum(axis=1)

    def log_probs(self, params, inputs):
        """log P(w | h) of every word: (K, |V|) float64, the tree walked top-down one depth at a time
        (every internal node scored once: one product with all of U_node)."""
        a = self.input(inputs)
        V, t = self.V, self.tree
        z = (a @ params["U_node"].T + params["b_node"]).astype(np.float64)  # (K, |V| - 1)
        left, right = log_sigmoid(z), log_sigmoid(-z)  # log of going left / right at each node
        L = np.zeros((len(a), 2 * V - 1))  # (K, nodes) log P(reaching the node); the root is 1
        for js in t.levels:  # internal nodes at depth 0, 1, ...
            up = L[:, V + js]  # (K, n) their own log-probabilities
            L[:, t.merges[js, 0]] = up + left[:, js]
            L[:, t.merges[js, 1]] = up + right[:, js]
        return L[:, :V]
