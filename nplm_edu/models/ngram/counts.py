"""Counting every n-gram of a token stream at once, with numpy: a trie of packed integer keys.

An n-gram of order k is one integer: the id of its first k-1 words (its *prefix*, an n-gram of
order k-1) times |V|, plus its last word. Sorting those keys and keeping the unique ones
(``np.unique``) gives the table of order k: the position of a key in the sorted table is the id
of that k-gram, which becomes the prefix of the (k+1)-grams. Order 1 is the identity (the id of
word w is w) and the empty context has id 0, so the keys of order 1 are just 0 * |V| + w.

Keys stay below (number of (k-1)-grams + 1) * |V|, which fits int64 for any corpus that fits in
memory, whatever the order. Looking up a batch of n-grams is one ``np.searchsorted`` per word:
no Python loop per token or per n-gram anywhere.

At scale (100 million tokens), :func:`group_keys` does ``np.unique``'s work with a sort of keys
packed with their positions (:func:`sort_groups`) instead of an argsort, and ids and counts are
int32: the tables of a 5-gram model of 80 million tokens take a few GiB, not tens.
"""

from __future__ import annotations

import numpy as np

from ...errors import UserError


def check_ids(ids, V: int, what: str = "ids") -> np.ndarray:
    """Ids as an int64 array, every one in 0..V-1 (else UserError)."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= V):
        raise UserError(f"{what} must lie in 0..{V - 1} (the vocabulary), got {ids.min()}..{ids.max()}")
    return ids


def sort_groups(key: np.ndarray, key_bits: int, pack_bits: int = 63):
    """Sort ``key`` (L,) (non-negative int64 below 2**key_bits; overwritten) and group equal keys.

    Returns perm (L,) the positions in order of (key, position), new (L,) bool, True where a new
    key starts in that order, and keys (N,) the distinct keys, sorted. Each key is packed with its
    position into one int64, ``key << pos_bits | position``, and numpy's sort of plain integers
    (vectorized, in place) runs many times faster than an argsort. When key and position need more
    than 63 bits, a radix pass (a stable argsort of 16-bit integers, linear) first groups the
    positions by the top bits of their key, and each group is packed and sorted on its own.
    ``pack_bits`` (63, the bits of a non-negative int64) is a parameter only for tests.
    """
    L = len(key)
    pos_bits = max((L - 1).bit_length(), 1)
    extra = max(key_bits + pos_bits - pack_bits, 0)  # top key bits that do not fit beside the position
    if extra > 16:  # a corpus far beyond memory: plain argsort
        perm = np.argsort(key, kind="stable")
        key.sort()
        new = np.empty(L, bool)
        new[0] = True
        np.not_equal(key[1:], key[:-1], out=new[1:])
        return perm, new, key[new]
    low_bits = key_bits - extra
    if extra:
        bucket = (key >> low_bits).astype(np.uint16)  # (L,)
        perm = np.argsort(bucket, kind="stable")  # (L,) radix sort: by bucket, positions ascending within
        edges = np.concatenate([[0], np.cumsum(np.bincount(bucket, minlength=1 << extra))])
        del bucket
    else:
        perm, edges = np.arange(L), [0, L]
    new, keys = np.empty(L, bool), []
    for b in range(len(edges) - 1):
        lo, hi = int(edges[b]), int(edges[b + 1])
        if lo == hi:
            continue
        P = perm[lo:hi]  # (n,) a view: receives the positions in sorted order
        packed = key[P] & ((1 << low_bits) - 1) if extra else key  # (n,) one group, or all keys in place
        packed <<= pos_bits
        packed |= P
        packed.sort()
        np.bitwise_and(packed, (1 << pos_bits) - 1, out=P)
        packed >>= pos_bits  # the low bits of the keys, sorted
        nb = new[lo:hi]
        nb[0] = True
        np.not_equal(packed[1:], packed[:-1], out=nb[1:])
        keys.append(packed[nb] | (b << low_bits))
    return perm, new, np.concatenate(keys)


def group_keys(prefix_ids: np.ndarray, last: np.ndarray, V: int, n_prefixes: int | None = None,
               dtype=np.int32, inverse: bool = True):
    """Distinct keys ``prefix_ids * V + last`` of a stream and, for each, one position and its count.

    What ``np.unique(key, return_index=True, return_inverse=True, return_counts=True)`` gives, with
    :func:`sort_groups` in place of its argsort: several times faster on large streams, and in
    about half the memory. Returns keys (N,) int64 sorted, at (N,) the first position of each,
    inverse (L,) the id of the key at every position (None with ``inverse=False``) and counts (N,), the
    last three of ``dtype``. ``n_prefixes``: a bound on the prefix ids (default: their maximum + 1).
    """
    n_prefixes = int(prefix_ids.max()) + 1 if n_prefixes is None else n_prefixes
    key = prefix_ids.astype(np.int64)  # (L,)
    key *= V
    key += last
    perm, new, keys = sort_groups(key, max((n_prefixes * V - 1).bit_length(), 1))
    del key
    starts = np.flatnonzero(new)  # (N,)
    counts = np.diff(starts, append=len(new)).astype(dtype)
    if not inverse:  # the caller does not need it (the highest order): skip the scatter over every position
        return keys, perm[starts].astype(dtype), None, counts
    gid = np.cumsum(new, dtype=dtype)  # (L,) 1 + id of the key at each sorted position
    gid -= 1
    inv = np.empty(len(new), dtype)
    inv[perm] = gid
    return keys, perm[starts].astype(dtype), inv, counts


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
        ids = ids.astype(np.int32 if V < 2 ** 31 else np.int64)  # (L,)
        pos_id = ids  # id of the (k-1)-gram starting at each position  (L-k+2,)
        for k in range(2, order + 1):  # keys: prefix id * |V| + last word, below size(k-1) * |V|
            keys, at, inv, cnt = group_keys(pos_id[: L - k + 1], ids[k - 1:], V, self.size(k - 1), idt,
                                            inverse=k < order)  # the highest order's ids are never read
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
        q = np.where(prefix_ids >= 0, prefix_ids * self.V + words, -1)  # (K,) -1 is never a key
        order = np.argsort(q)  # sorted queries walk neighbouring paths of the binary search: a large
        i = np.empty(len(q), np.int64)  # table is then read from cache, not from memory at random
        i[order] = np.searchsorted(keys, q[order])
        i = np.minimum(i, len(keys) - 1)
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
