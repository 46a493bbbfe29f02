"""Counting every n-gram of a token stream at once, with numpy: a trie of packed integer keys.

An n-gram of order k is one integer: the id of its first k-1 words (its *prefix*, an n-gram of
order k-1) times |V|, plus its last word. Sorting those keys and keeping the unique ones
(``np.unique``) gives the table of order k: the position of a key in the sorted table is the id
of that k-gram, which becomes the prefix of the (k+1)-grams. Order 1 is the identity (the id of
word w is w) and the empty context has id 0, so the keys of order 1 are just 0 * |V| + w.

Keys stay below (number of (k-1)-grams + 1) * |V|, which fits int64 for any corpus that fits in
memory, whatever the order. Looking up a batch of n-grams is one ``np.searchsorted`` per word:
no Python loop per token or per n-gram anywhere.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError


def check_ids(ids, V: int, what: str = "ids") -> np.ndarray:
    """Ids as an int64 array, every one in 0..V-1 (else UserError)."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= V):
        raise UserError(f"{what} must lie in 0..{V - 1} (the vocabulary), got {ids.min()}..{ids.max()}")
    return ids


def group_keys(prefix_ids: np.ndarray, last: np.ndarray, V: int, dtype=np.int32):
    """Distinct keys ``prefix_ids * V + last`` of a stream and, for each, one position and its count.

    What ``np.unique(key, return_index=True, return_inverse=True, return_counts=True)`` gives, in
    about half its memory: one argsort, then the keys sorted in place (no gathered copy). Returns
    keys (N,) int64 sorted, at (N,) the position of one occurrence of each, inverse (L,) the id
    of the key at every position and counts (N,), both of ``dtype`` (ids and counts are below L).
    """
    key = prefix_ids.astype(np.int64)  # (L,)
    key *= V
    key += last
    perm = np.argsort(key)  # (L,) any occurrence of a key will do, so no need for a stable sort
    key.sort()
    new = np.empty(len(key), bool)  # (L,) where a new key starts in sorted order
    new[0] = True
    np.not_equal(key[1:], key[:-1], out=new[1:])
    starts = np.flatnonzero(new)  # (N,)
    keys = key[starts]
    del key
    counts = np.diff(starts, append=len(new)).astype(dtype)
    gid = np.cumsum(new, dtype=dtype)  # (L,) 1 + id of the key at each sorted position
    gid -= 1
    inverse = np.empty(len(new), dtype)
    inverse[perm] = gid
    return keys, perm[starts], inverse, counts


class NgramCounts:
    """All n-grams of orders 1..n of one id stream, their counts and their trie links.

    For each order k (index k of every list; index 0 is the empty context)::

      keys[k]     sorted unique keys, prefix_id * |V| + last_word      (N_k,) int64
      counts[k]   how often each k-gram occurs in the stream             (N_k,) int32
      suffix[k]   id (in table k-1) of the k-gram without its first word (N_k,) int32

    ``counts[k][g]`` for the k-gram id g returned by :meth:`find`. Ids and counts never exceed the
    stream's length: int32 below 2**31 tokens (int64 above), half the memory of int64.
    """

    def __init__(self, ids, order: int, V: int):
        if order < 1:
            raise UserError(f"n-gram order must be at least 1, got {order}")
        ids = check_ids(ids, V, "training ids")
        L = len(ids)
        if L < order:
            raise UserError(f"training stream of {L} tokens is shorter than the order {order}")
        if float(L + 1) * V >= 2.0 ** 62:
            raise UserError(f"corpus too large to pack: {L} tokens x |V| = {V} overflows int64 keys")
        self.order, self.V, self.T = order, V, L
        idt = np.int32 if L < 2 ** 31 else np.int64  # n-gram ids and counts
        self.keys = [np.zeros(1, np.int64), np.arange(V, dtype=np.int64)]
        self.counts = [np.array([L], idt), np.bincount(ids, minlength=V).astype(idt)]
        self.suffix = [np.zeros(1, idt), np.zeros(V, idt)]  # a word's suffix is the empty context
        ids = pos_id = ids.astype(np.int32 if V < 2 ** 31 else np.int64)  # (L,) pos_id: id of the
        for k in range(2, order + 1):  # (k-1)-gram starting at each position, (L-k+2,)
            keys, at, inv, cnt = group_keys(pos_id[: L - k + 1], ids[k - 1:], V, idt)  # prefix id, last word
            self.keys.append(keys)
            self.counts.append(cnt)
            self.suffix.append(pos_id[at + 1])  # (N_k,) the (k-1)-gram one position later
            pos_id = inv

    def size(self, k: int) -> int:
        """Number of distinct k-grams (1 for the empty context k = 0, |V| for k = 1)."""
        return len(self.keys[k])

    def prefix(self, k: int) -> np.ndarray:
        """Id in table k-1 of the context (first k-1 words) of every k-gram: (N_k,), sorted."""
        return self.keys[k] // self.V

    def counts_of_counts(self, k: int, counts=None, up_to: int = 4) -> np.ndarray:
        """n_1..n_up_to: how many k-grams occur exactly once, twice, ... (index 0 unused)."""
        c = self.counts[k] if counts is None else counts
        return np.bincount(np.minimum(c, up_to + 1), minlength=up_to + 2)[: up_to + 1]

    def extend(self, k: int, prefix_ids: np.ndarray, words: np.ndarray) -> np.ndarray:
        """Ids of the k-grams (prefix, word) in table k, -1 where unseen (or the prefix is -1)."""
        keys = self.keys[k]
        q = np.where(prefix_ids >= 0, prefix_ids * self.V + words, -1)  # -1 is never a key
        i = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
        return np.where(keys[i] == q, i, -1)

    def find(self, grams: np.ndarray) -> np.ndarray:
        """Ids of a batch of k-grams (K, k), chronological order, -1 where unseen: one searchsorted per word."""
        grams = np.asarray(grams, dtype=np.int64)
        K, k = grams.shape
        idx = np.zeros(K, np.int64)  # the empty context
        for j in range(k):
            idx = self.extend(j + 1, idx, grams[:, j])
        return idx

    def ranges(self, k: int, prefix_ids: np.ndarray):
        """For contexts (ids in table k-1): flat (row, entry) pairs of every k-gram that extends them.

        Returns rows (M,) indexing prefix_ids and entries (M,) indexing table k; the keys of one
        context are contiguous in the sorted table, so this is two searchsorted and a repeat.
        """
        keys = self.keys[k]
        lo = np.searchsorted(keys, prefix_ids * self.V)
        hi = np.searchsorted(keys, prefix_ids * self.V + self.V)
        n = hi - lo  # (K,) k-grams per context
        rows = np.repeat(np.arange(len(prefix_ids)), n)
        starts = np.repeat(np.cumsum(n) - n, n)
        entries = np.arange(n.sum()) - starts + np.repeat(lo, n)
        return rows, entries
