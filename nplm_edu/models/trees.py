"""Binary trees over the vocabulary for the tree (hierarchical) softmax (section 5 of the paper:
"a tree-structured output", cost cut by about |V| / log|V|; Morin & Bengio 2005; Mnih & Hinton
2009).

A tree over |V| words has |V| leaves (the words, nodes 0..|V|-1) and |V| - 1 internal nodes, the
j-th made by joining two earlier nodes: ``merges[j] = (left, right)`` is node |V| + j, the last one
the root. Every word has one path from the root: the internal nodes it passes and, at each, whether
it goes left (+1) or right (-1). Two ways to build one:

* :func:`huffman_merges`: Huffman's code on the training counts (Mikolov et al. 2013): always join the
  two least frequent nodes, so frequent words sit near the root; the expected path length is
  within one step of the entropy of the unigram distribution, about 10 steps on Brown.
* :func:`cluster_merges`: recursive clustering: the exchange algorithm's classes (the class-based
  n-gram's, :func:`nplm_edu.models.ngram.classes.exchange_classes`) joined two by two as Brown et al.
  (1992) join words, always the pair whose union loses the least class-bigram log-likelihood, with
  a Huffman tree inside each class. Words that share contexts share the top of their paths.
"""

from __future__ import annotations

import heapq

import numpy as np

from ..errors import UserError
from .ngram.classes import xlogx


def huffman_merges(counts) -> np.ndarray:
    """Huffman's tree on word counts (|V|,): (|V| - 1, 2) merges. Ties go to the lower node id.

    >>> huffman_merges([5, 1, 1, 3]).tolist()   # 1+2 -> 4, 4+3 -> 5, 0+5 -> 6 (the root)
    [[1, 2], [4, 3], [0, 5]]
    """
    counts = np.asarray(counts, dtype=np.float64)
    V = len(counts)
    if V < 2 or not np.all(np.isfinite(counts)) or counts.min() < 0:
        raise UserError("a Huffman tree needs at least 2 words with finite counts >= 0")
    heap = [(float(c), i) for i, c in enumerate(counts)]
    heapq.heapify(heap)
    merges = np.empty((V - 1, 2), np.int64)
    for j in range(V - 1):
        (c1, n1), (c2, n2) = heapq.heappop(heap), heapq.heappop(heap)
        merges[j] = n1, n2
        heapq.heappush(heap, (c1 + c2, V + j))
    return merges


def merge_cost(M: np.ndarray) -> np.ndarray:
    """Loss of class-bigram log-likelihood F (see :mod:`nplm_edu.models.ngram.classes`) for joining
    each pair of classes (i, j): (c, c), +inf on the diagonal. M (c, c): bigram counts between classes."""
    NL, NR = M.sum(1), M.sum(0)  # (c,) N(g .), N(. h)
    # row and column parts over the other classes h: f(M[i,h] + M[j,h]) - f(M[i,h]) - f(M[j,h])
    fr = xlogx(M[:, None, :] + M[None, :, :]) - xlogx(M)[:, None, :] - xlogx(M)[None, :, :]  # (c, c, c)
    MT = M.T
    fc = xlogx(MT[:, None, :] + MT[None, :, :]) - xlogx(MT)[:, None, :] - xlogx(MT)[None, :, :]  # (c, c, c)
    i, j = np.meshgrid(np.arange(len(M)), np.arange(len(M)), indexing="ij")
    gain = fr.sum(2) + fc.sum(2)
    gain -= fr[i, j, i] + fr[i, j, j] + fc[i, j, i] + fc[i, j, j]  # h in {i, j} is the new diagonal
    d = np.diagonal(M)
    gain += (xlogx(d[:, None] + M + M.T + d[None, :]) - xlogx(d)[:, None] - xlogx(M) - xlogx(M.T)
             - xlogx(d)[None, :])
    gain -= xlogx(NL[:, None] + NL[None, :]) - xlogx(NL)[:, None] - xlogx(NL)[None, :]
    gain -= xlogx(NR[:, None] + NR[None, :]) - xlogx(NR)[:, None] - xlogx(NR)[None, :]
    cost = -gain
    np.fill_diagonal(cost, np.inf)
    return cost


def cluster_merges(train_ids, labels, counts) -> np.ndarray:
    """The recursive-clustering tree (module docstring): classes ``labels`` (|V|,) joined two by two by
    the least loss of class-bigram likelihood on ``train_ids``, a Huffman tree on ``counts`` inside each."""
    labels = np.asarray(labels)
    counts = np.asarray(counts, dtype=np.float64)
    V, C = len(labels), int(labels.max()) + 1
    merges, root_of = [], np.empty(C, np.int64)
    for c in range(C):  # a Huffman subtree inside each class
        words = np.flatnonzero(labels == c)
        if len(words) == 0:
            raise UserError(f"class {c} has no word")
        if len(words) == 1:
            root_of[c] = words[0]
            continue
        sub = huffman_merges(counts[words])  # local node ids: words 0..n-1, internal n..
        local = np.r_[words, V + len(merges) + np.arange(len(words) - 1)]  # local id -> global node id
        merges.extend(local[sub].tolist())
        root_of[c] = local[-1]
    t = np.asarray(train_ids)
    g = labels[t]
    M = np.bincount(g[:-1] * C + g[1:], minlength=C * C).reshape(C, C).astype(np.float64)  # (c, c)
    alive = list(range(C))  # rows of M still in use
    while len(alive) > 1:  # join the cheapest pair, like Brown et al. (1992) join words
        sub = M[np.ix_(alive, alive)]
        i, j = np.unravel_index(np.argmin(merge_cost(sub)), sub.shape)
        a, b = alive[min(i, j)], alive[max(i, j)]
        merges.append([int(root_of[a]), int(root_of[b])])
        root_of[a] = V + len(merges) - 1
        M[a, :] += M[b, :]
        M[:, a] += M[:, b]
        alive.remove(b)
    return np.asarray(merges, np.int64).reshape(-1, 2)


class Tree:
    """A checked binary tree over |V| words and every word's path (see the module docstring).

    ``nodes`` (|V|, depth) internal-node index (0..|V|-2) at each step from the root, ``signs``
    (|V|, depth) +1 (left) or -1 (right), 0 past the word's own depth; ``depth`` (|V|,).

    >>> t = Tree(huffman_merges([5, 1, 1, 3]))
    >>> t.depth.tolist(), t.nodes[1].tolist(), t.signs[1].tolist()
    ([1, 3, 3, 2], [2, 1, 0], [-1.0, 1.0, 1.0])
    """

    def __init__(self, merges, V: int | None = None):
        merges = np.asarray(merges)
        V = len(merges) + 1 if V is None else V
        if merges.shape != (V - 1, 2) or merges.dtype.kind not in "iu":
            raise UserError(f"a tree over |V| = {V} words needs {V - 1} merges of two node ids, got shape "
                            f"{merges.shape}")
        late = np.flatnonzero((merges < 0).any(1) | (merges >= V + np.arange(V - 1)[:, None]).any(1))
        if len(late):
            j = int(late[0])
            raise UserError(f"merge {j} joins nodes {merges[j].tolist()}: a merge may only join earlier nodes")
        seen = np.bincount(merges.ravel(), minlength=2 * V - 1)  # times each node is a child
        bad = np.flatnonzero(seen[:-1] != 1)
        if len(bad):
            w = int(bad[0])
            what = f"word {w}" if w < V else f"internal node {w}"
            raise UserError(f"the tree does not cover the vocabulary: {what} is reached {seen[w]} times, not once")
        self.V, self.merges = V, merges.astype(np.int64)
        depth = np.zeros(2 * V - 1, np.int64)
        parent, side = np.full(2 * V - 1, -1), np.zeros(2 * V - 1)
        for j in range(V - 2, -1, -1):  # from the root down
            for k, child in enumerate(self.merges[j]):
                depth[child] = depth[V + j] + 1
                parent[child], side[child] = j, 1.0 - 2.0 * k  # left child +1, right child -1
        self.depth = depth[:V]
        D = int(self.depth.max())
        self.nodes = np.zeros((V, D), np.int64)  # (|V|, D) padded with the root (sign 0)
        self.signs = np.zeros((V, D))
        node = np.arange(V)
        for step in range(D):  # walk up from every leaf at once, filling paths from their ends
            live = parent[node] >= 0
            col = self.depth - 1 - step  # position of this step on the path
            idx = np.flatnonzero(live)
            self.nodes[idx, col[idx]] = parent[node[idx]]
            self.signs[idx, col[idx]] = side[node[idx]]
            node = np.where(live, V + parent[node], node)
        # internal nodes by depth, for evaluating all |V| words top-down
        inner_depth = depth[V:]
        self.levels = [np.flatnonzero(inner_depth == d) for d in range(D)]

    def mean_depth(self, counts) -> float:
        """Expected path length under word counts (|V|,): the cost of an example in dot products."""
        counts = np.asarray(counts, dtype=np.float64)
        return float((self.depth * counts).sum() / max(counts.sum(), 1.0))
