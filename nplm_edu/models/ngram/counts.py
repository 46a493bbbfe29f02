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
packed with their positions (:func:`sort_groups`) instead of an argsort, the highest order sorts
pairs of lower-order ids with no positions at all (:func:`group_pairs`), every order reuses one set
of work arrays (:class:`Workspace`), and ids and counts are int32: the tables of a 5-gram model of
80 million tokens take a few GiB, not tens.
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


def mark_runs(sorted_values: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Fill ``new`` (L,) bool with True where a run of equal values starts in ``sorted_values`` (L,)."""
    new[0] = True
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=new[1:])
    return new


def run_lengths(new: np.ndarray, dtype=np.int32):
    """Starts (N,) int64 and lengths (N,) ``dtype`` of the runs that ``new`` (L,) bool marks."""
    starts = np.flatnonzero(new)  # (N,)
    lengths = np.empty(len(starts), dtype)
    np.subtract(starts[1:], starts[:-1], out=lengths[:-1])
    lengths[-1] = len(new) - starts[-1]
    return starts, lengths


class Workspace:
    """The work arrays of one counting pass over L positions, allocated once and reused by every order.

    At scale, fresh memory costs more than the arithmetic done in it: a new array of 80 million
    entries is faulted in page by page, and writing it the first time took from 3 to over 30 times as
    long as a second pass over it on the 2-core machine of this book's benchmarks (the operating
    system's huge pages and the virtual machine decide which). :class:`NgramCounts` fills these same
    buffers for orders 2..n instead of allocating a set per order: ``key`` and ``perm`` (int64),
    ``new`` (bool), and ``ids_a`` and ``ids_b`` (``dtype``), the ids of the k-gram at each position,
    two so that one order reads while the next is written.
    """

    def __init__(self, L: int, dtype=np.int32):
        self.key, self.perm = np.empty(L, np.int64), np.empty(L, np.int64)
        self.new = np.empty(L, bool)
        self.ids_a, self.ids_b = np.empty(L, dtype), np.empty(L, dtype)


def sort_groups(key: np.ndarray, key_bits: int, pack_bits: int = 63, perm: np.ndarray | None = None,
                new: np.ndarray | None = None):
    """Sort ``key`` (L,) (non-negative int64 below 2**key_bits; overwritten) and group equal keys.

    Returns perm (L,) the positions in order of (key, position), new (L,) bool, True where a new
    key starts in that order, and keys (N,) the distinct keys, sorted. Each key is packed with its
    position into one int64, ``key << pos_bits | position``, and numpy's sort of plain integers
    (vectorized, in place) runs many times faster than an argsort. When key and position need more
    than 63 bits, a radix pass (a stable argsort of 8- or 16-bit integers, linear) first groups the
    positions by the top bits of their key, and each group is packed and sorted on its own.
    ``perm`` and ``new``: optional (L,) int64 and bool arrays to fill instead of allocating.
    ``pack_bits`` (63, the bits of a non-negative int64) is a parameter only for tests.
    """
    L = len(key)
    new = np.empty(L, bool) if new is None else new
    pos_bits = max((L - 1).bit_length(), 1)
    extra = max(key_bits + pos_bits - pack_bits, 0)  # top key bits that do not fit beside the position
    if extra > 16:  # a corpus far beyond memory: plain argsort
        perm = np.argsort(key, kind="stable")
        key.sort()
        return perm, mark_runs(key, new), key[new]
    low_bits = key_bits - extra
    buf = np.empty(L, np.int64) if perm is None else perm  # (L,) positions, or the packed keys of the radix pass
    if extra:
        bucket = np.right_shift(key, low_bits, out=buf).astype(np.uint8 if extra <= 8 else np.uint16)  # (L,)
        perm = np.argsort(bucket, kind="stable")  # (L,) radix sort: by bucket, positions ascending within
        edges = np.concatenate([[0], np.cumsum(np.bincount(bucket, minlength=1 << extra))])
        del bucket
    else:
        perm = buf
        new[:] = True  # positions 0..L-1 written into perm with no new array: a running count of True
        np.cumsum(new, dtype=np.int64, out=perm)
        perm -= 1
        edges = [0, L]
    keys = []
    for b in range(len(edges) - 1):
        lo, hi = int(edges[b]), int(edges[b + 1])
        if lo == hi:
            continue
        P = perm[lo:hi]  # (n,) a view: receives the positions in sorted order
        if extra:  # one group: the low bits of its keys, gathered into the free buffer
            packed = np.take(key, P, out=buf[lo:hi])
            packed &= (1 << low_bits) - 1
        else:  # all keys, in place
            packed = key
        packed <<= pos_bits
        packed |= P
        packed.sort()
        np.bitwise_and(packed, (1 << pos_bits) - 1, out=P)
        packed >>= pos_bits  # the low bits of the keys, sorted
        keys.append(packed[mark_runs(packed, new[lo:hi])])
        if extra:
            keys[-1] |= b << low_bits
    return perm, new, keys[0] if len(keys) == 1 else np.concatenate(keys)


def group_keys(prefix_ids: np.ndarray, last: np.ndarray, V: int, n_prefixes: int | None = None,
               dtype=np.int32, work: Workspace | None = None, inv_out=None):
    """Distinct keys ``prefix_ids * V + last`` of a stream and, for each, one position and its count.

    What ``np.unique(key, return_index=True, return_inverse=True, return_counts=True)`` gives, with
    :func:`sort_groups` in place of its argsort: several times faster on large streams, and in
    about half the memory. Returns keys (N,) int64 sorted, at (N,) int64 the first position of each,
    inverse (L,) the id of the key at every position and counts (N,), the last two of ``dtype``.
    ``n_prefixes``: a bound on the prefix ids (default: their maximum + 1).
    ``work``: a :class:`Workspace` of at least L positions whose ``key``, ``perm`` and ``new`` are used
    instead of new arrays; ``inv_out``: an (L,) ``dtype`` array to receive the inverse.
    """
    L = len(last)
    n_prefixes = int(prefix_ids.max()) + 1 if n_prefixes is None else n_prefixes
    if work is None:
        key, perm, new = prefix_ids.astype(np.int64), None, None  # (L,)
    else:
        key, perm, new = work.key[:L], work.perm[:L], work.new[:L]
        key[:] = prefix_ids
    key *= V
    key += last
    perm, new, keys = sort_groups(key, max((n_prefixes * V - 1).bit_length(), 1), perm=perm, new=new)
    starts, counts = run_lengths(new, dtype)
    gid = key.view(dtype)[:L] if work is not None else None  # the keys are no longer needed
    gid = np.cumsum(new, dtype=dtype, out=gid)  # (L,) 1 + id of the key at each sorted position
    gid -= 1
    inv = np.empty(L, dtype) if inv_out is None else inv_out
    inv[perm] = gid  # (L,) the scatter back to stream order
    at = np.take(perm, starts, out=starts, mode="clip")  # (N,) in place of starts: each key's first position
    return keys, at, inv, counts


def group_pairs(prefix_ids: np.ndarray, suffix_ids: np.ndarray, n_ids: int, dtype=np.int32,
                work: Workspace | None = None):
    """Distinct pairs (prefix id, suffix id) of two id streams, sorted, with their counts: no positions.

    The k-gram at position t is the (k-1)-gram at t (its prefix) followed by the last word of the
    (k-1)-gram at t+1 (its suffix). For a fixed prefix the suffix's first k-2 words are fixed too, so
    suffix ids rise with the last word (table k-1 is sorted by prefix, then last word): sorting the
    pairs sorts the k-grams by (prefix, last word), as :func:`group_keys` does. A pair packs into
    2 x bits(``n_ids``) <= 62 bits and needs no room for a position, so the highest order, which needs
    no inverse, is one plain sort at any corpus size. Returns prefix (N,) int64, suffix (N,) and
    counts (N,) of ``dtype``. ``n_ids``: a bound on both streams' ids.
    """
    L = len(prefix_ids)
    bits = max((n_ids - 1).bit_length(), 1)
    pair = np.empty(L, np.int64) if work is None else work.key[:L]  # (L,)
    pair[:] = prefix_ids
    pair <<= bits
    pair |= suffix_ids
    pair.sort()
    new = mark_runs(pair, np.empty(L, bool) if work is None else work.new[:L])
    counts = run_lengths(new, dtype)[1]
    prefix = pair[new]  # (N,) the packed pairs, then their prefixes
    suffix = (prefix & ((1 << bits) - 1)).astype(dtype)
    prefix >>= bits
    return prefix, suffix, counts


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
        work = Workspace(L, idt)  # one set of work arrays for all orders
        pos_id = ids  # id of the (k-1)-gram starting at each position  (L-k+2,)
        for k in range(2, order):  # keys: prefix id * |V| + last word, below size(k-1) * |V|
            keys, at, inv, cnt = group_keys(pos_id[: L - k + 1], ids[k - 1:], V, self.size(k - 1), idt, work,
                                            inv_out=(work.ids_a if k % 2 else work.ids_b)[: L - k + 1])
            self.keys.append(keys)
            self.counts.append(cnt)
            at += 1
            self.suffix.append(pos_id.take(at))  # (N_k,) the (k-1)-gram one position later
            pos_id = inv
        if order > 1:  # the highest order needs no ids per position: pairs of (k-1)-gram ids, no positions
            k = order
            prefix, suffix, cnt = group_pairs(pos_id[: L - k + 1], pos_id[1: L - k + 2], self.size(k - 1), idt, work)
            last = self.keys[k - 1].take(suffix)  # (N_k,) the suffix's key, then its last word
            last %= V
            prefix *= V
            prefix += last
            self.keys.append(prefix)
            self.counts.append(cnt)
            self.suffix.append(suffix)

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
