"""Word features fixed in advance from co-occurrence counts, and nearest neighbours in a feature table.

Section 1.2 of the paper reports a negative result: using as fixed word features the first principal
components of each word's co-occurrence frequencies with the words around it did not work as well
as learning the features jointly with the model. :func:`pca_features` builds such a table:

    row w of X   = sqrt(frequency of each context word c at offset o, given w)   o in -2, -1, +1, +2
    features     = the first m principal components of X (rows centred)          (|V|, m)

The context words are the ``contexts`` most frequent ids (all of them on a small vocabulary); the
square root (the Hellinger distance between the rows, Lebret & Collobert 2014) keeps a few very
frequent context words from dominating. X is never stored whole: X^T X and the column sums are
accumulated over blocks of rows, so a Brown-sized table costs a few hundred MB at most.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError

OFFSETS = (-2, -1, 1, 2)


def cooccurrence(ids: np.ndarray, V: int, contexts: int, offsets=OFFSETS):
    """Sparse co-occurrence counts: (rows, cols, counts) sorted by row, cols in 0..len(offsets)*K-1
    (block j holds the K = min(contexts, V) most frequent ids seen at offset offsets[j])."""
    ids = np.asarray(ids, np.int64)
    if ids.ndim != 1 or len(ids) <= max(abs(o) for o in offsets):
        raise UserError("co-occurrence counts need a token stream longer than the window")
    K = min(int(contexts), V)
    rank = np.full(V, -1, np.int64)
    rank[np.argsort(-np.bincount(ids, minlength=V), kind="stable")[:K]] = np.arange(K)
    rows, cols = [], []
    for j, o in enumerate(offsets):
        w = ids[max(0, -o): len(ids) - max(0, o)]  # the word at t
        c = rank[ids[max(0, o): len(ids) + min(0, o)]]  # its neighbour at t + o, as a context rank
        keep = c >= 0
        rows.append(w[keep])
        cols.append(j * K + c[keep])
    key = np.concatenate(rows) * (len(offsets) * K) + np.concatenate(cols)
    key, counts = np.unique(key, return_counts=True)  # sorted: by row, then column
    return key // (len(offsets) * K), key % (len(offsets) * K), counts, len(offsets) * K


def pca_features(ids: np.ndarray, V: int, m: int, contexts: int = 1000, block: int = 2048) -> np.ndarray:
    """A (|V|, m) float64 table: the first m principal components of the words' co-occurrence rows
    (see the module docstring), computed from the token stream ``ids`` alone. Words never seen get
    the row of an all-zero X row (centred), the same for all of them."""
    rows, cols, counts, D = cooccurrence(ids, V, contexts)
    if m > min(V, D):
        raise UserError(f"m = {m} features need at least m words and m context columns")
    total = np.bincount(rows, weights=counts, minlength=V)  # (|V|,) co-occurrences of each word
    vals = np.sqrt(counts / total[rows])  # Hellinger: sqrt of the frequencies given the word
    starts = np.searchsorted(rows, np.arange(0, V + block, block))

    def dense(b):  # rows b*block .. of X, (block, D)
        lo, hi = starts[b], starts[b + 1]
        X = np.zeros((min(block, V - b * block), D))
        X[rows[lo:hi] - b * block, cols[lo:hi]] = vals[lo:hi]
        return X

    n_blocks = -(-V // block)
    G, s = np.zeros((D, D)), np.zeros(D)
    for b in range(n_blocks):
        X = dense(b)
        G += X.T @ X  # (D, D)
        s += X.sum(axis=0)
    mu = s / V  # (D,) column means
    cov = G / V - np.outer(mu, mu)  # covariance of the columns
    w, vecs = np.linalg.eigh(cov)
    P = vecs[:, np.argsort(w)[::-1][:m]]  # (D, m) the first m principal directions
    P *= np.sign(P[np.argmax(np.abs(P), axis=0), np.arange(m)])  # a fixed sign for each direction
    return np.concatenate([(dense(b) - mu) @ P for b in range(n_blocks)])  # (|V|, m)


def nearest_neighbours(C: np.ndarray, words: np.ndarray, k: int, block: int = 512) -> np.ndarray:
    """The k nearest other words of each of ``words`` by cosine similarity in the table C (|V|, m):
    (len(words), k) ids, nearest first."""
    C = np.asarray(C, np.float64)
    if k >= len(C):
        raise UserError(f"k = {k} neighbours need more than {k} words")
    Cn = C / np.maximum(np.linalg.norm(C, axis=1, keepdims=True), 1e-12)  # (|V|, m) unit rows
    words = np.asarray(words, np.int64)
    out = np.empty((len(words), k), np.int64)
    for i in range(0, len(words), block):
        w = words[i:i + block]
        S = Cn[w] @ Cn.T  # (B, |V|) cosines
        S[np.arange(len(w)), w] = -np.inf  # not the word itself
        top = np.argpartition(-S, k, axis=1)[:, :k]  # (B, k) unordered
        order = np.argsort(-np.take_along_axis(S, top, axis=1), axis=1, kind="stable")
        out[i:i + block] = np.take_along_axis(top, order, axis=1)
    return out
