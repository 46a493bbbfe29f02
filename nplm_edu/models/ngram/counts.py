"""Counting every n-gram of a token stream at once, with numpy: a trie of packed integer keys.

An n-gram of order k is one integer: the id of its first k-1 words (its *prefix*, an n-gram of
order k-1) times |V|, plus its last word. The table of order k holds the distinct keys, sorted:
the position of a key in it is the id of that k-gram, which becomes the prefix of the
(k+1)-grams. Order 1 is the identity (the id of word w is w) and the empty context has id 0, so
the keys of order 1 are just 0 * |V| + w. Sorted keys put the k-grams in the lexicographic order
of their words. Keys stay below (number of (k-1)-grams + 1) * |V|, which fits int64 for any
corpus that fits in memory.

The k-grams that extend one (k-1)-gram p are contiguous in table k, sorted by their last word: the
slice ``offsets[k][p]:offsets[k][p + 1]``, the trie's pointers from a node to its children (the
layout of KenLM's and BerkeleyLM's tries). Looking up a batch of n-grams walks down the trie one
word at a time, each step a binary search of every query at once inside its own slice, mostly a
few entries long (:func:`search_slices`): no Python loop per token or per n-gram anywhere, and a
few reads of memory per lookup however large the table, where a search of the whole table takes
log2 of its size.

Building the tables needs no comparison sort at all. The k-gram at position t is the word at t
followed by the (k-1)-gram at t + 1. Given the positions sorted by their (k-1)-gram, shift each
back by one and sort *stably* by the word found there: positions end up sorted by (first word,
rest), which is the k-grams' order. That is a least-significant-digit radix sort, one word per
order, and sorting by a word (an integer below |V|) is numpy's radix sort of 16-bit digits
(:func:`word_order`): linear in the number of tokens. Ids and counts are int32: the tables of a
5-gram model of 80 million tokens take a few GiB.
"""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from ...progress import progress_bar
from .memory import retained_memory


def check_ids(ids, V: int, what: str = "ids", dtype=np.int64) -> np.ndarray:
    """Ids as an array of ``dtype``, every one in 0..V-1 (else UserError); no copy if they already are."""
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        ids = ids.astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= V):
        raise UserError(f"{what} must lie in 0..{V - 1} (the vocabulary), got {ids.min()}..{ids.max()}")
    return ids.astype(dtype, copy=False)


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


def word_order(words: np.ndarray, V: int) -> np.ndarray:
    """Stable argsort (L,) int64 of ``words`` (L,), integers in 0..V-1: a radix sort, linear in L.

    numpy sorts 16-bit integers by radix (``kind="stable"``); wider vocabularies take one pass per
    16-bit digit, least significant first, each stable, so ties keep their order throughout.
    """
    order = None
    for shift in range(0, max((V - 1).bit_length(), 1), 16):
        digit = words if order is None else words.take(order)
        digit = (digit >> shift if shift else digit).astype(np.uint16)  # (L,) this digit, wrapped to 16 bits
        step = np.argsort(digit, kind="stable")  # (L,)
        order = step if order is None else order.take(step)
    return order


def search_slices(table: np.ndarray, q: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each query, the first i in ``lo..hi`` (K,) with ``table[i] >= q`` (K,) (``hi`` if none):
    a binary search inside each sorted slice ``table[lo:hi]``, all queries at once.

    Each round halves every slice still longer than one, so a slice of s entries takes about
    log2(s) rounds; the queries whose slices are down to one entry leave once they are half of
    those still searching, so the work follows the slices' lengths, not the table's.
    """
    base, n = lo.astype(np.int64), (hi - lo).astype(np.int64)  # (K,) the answer lies in base..base + n
    act = np.flatnonzero(n > 1)  # (A,) queries whose slice is longer than one
    b, m, qa = base[act], n[act], q[act]  # (A,)
    while len(act):
        half = m >> 1  # (A,)
        probe = b + half
        np.copyto(b, probe, where=table.take(probe) < qa)  # the answer lies past the probe
        m -= half
        open_ = m > 1
        if 2 * np.count_nonzero(open_) <= len(act):  # half of them are down to one entry: write back
            base[act], n[act] = b, m
            act, b, m, qa = act[open_], b[open_], m[open_], qa[open_]
    one = np.flatnonzero(n == 1)  # the last entry: the answer is it or the one after
    base[one] += table.take(base[one]) < q[one]
    return base


class NgramCounts:
    """All n-grams of orders 1..n of one id stream, their counts and their trie links.

    For each order k (index k of every list; index 0 is the empty context)::

      keys[k]     sorted unique keys, prefix_id * |V| + last_word      (N_k,) int64
      counts[k]   how often each k-gram occurs in the stream             (N_k,) int32
      suffix[k]   id (in table k-1) of the k-gram without its first word (N_k,) int32
      offsets[k]  where the k-grams extending each (k-1)-gram start      (N_{k-1} + 1,) int32
                  in table k: those of id p are offsets[k][p]:offsets[k][p + 1]

    ``counts[k][g]`` for the k-gram id g returned by :meth:`find`. Ids and counts never exceed the
    stream's length: int32 below 2**31 tokens (int64 above), half the memory of int64.
    """

    def __init__(self, ids, order: int, V: int, progress: bool = False):
        if order < 1:
            raise UserError(f"n-gram order must be at least 1, got {order}")
        ids = check_ids(ids, V, "training ids", np.int32 if V < 2 ** 31 else np.int64)  # (L,) copied if need be
        L = len(ids)
        if L < order:
            raise UserError(f"training stream of {L} tokens is shorter than the order {order}")
        if float(L + 1) * V >= 2.0 ** 62:
            raise UserError(f"corpus too large to pack: {L} tokens x |V| = {V} overflows int64 keys")
        self.order, self.V, self.T = order, V, L
        idt = np.int32 if L < 2 ** 31 else np.int64  # positions, n-gram ids and counts
        self.keys = [np.zeros(1, np.int64), np.arange(V, dtype=np.int64)]
        self.counts = [np.array([L], idt), np.bincount(ids, minlength=V).astype(idt)]
        self.suffix = [np.zeros(1, idt), np.zeros(V, idt)]  # a word's suffix is the empty context
        self.offsets = [None, np.array([0, V], idt)]  # the empty context is followed by every word
        with retained_memory():  # the temporaries of one order reuse the pages of the order before
            self._count(ids, idt, progress)

    def _count(self, ids: np.ndarray, idt, progress: bool = False) -> None:
        """Orders 2..n of ``ids`` (L,), each from the one below it (:meth:`_add_order`); with
        ``progress``, a bar over the orders (shown once counting has taken a second)."""

        L = len(ids)
        # work arrays, allocated once for every order: at scale, writing fresh memory costs more than
        # the arithmetic done in it. Positions and ids twice: one is read while the other is written.
        work = {"pos": [np.empty(L, idt), np.empty(L, idt)], "gid": [np.empty(L, idt), np.empty(L, idt)],
                "first": np.empty(L, ids.dtype), "new": np.empty(L, bool)}
        pos, gid = work["pos"][0], work["gid"][0]  # (L,)
        pos[:] = word_order(ids, self.V)  # positions sorted by their word (order 1) ...
        np.take(ids, pos, out=gid)  # ... and the word there: its id in table 1, nondecreasing
        for k in progress_bar(range(2, self.order + 1), desc=f"counting n-grams of {L:,} tokens", unit="order", delay=1,
                      leave=False, disable=not progress):
            pos, gid = self._add_order(k, ids, pos, gid, work, need_ids=k < self.order)

    def _add_order(self, k: int, ids: np.ndarray, pos: np.ndarray, gid: np.ndarray, work: dict,
                   need_ids: bool):
        """Table k from ``pos`` (L-k+2,), the positions sorted by their (k-1)-gram, and ``gid``, the id
        of that (k-1)-gram; returns the same two for order k (None, None unless ``need_ids``). Writes
        into ``pos`` and into the arrays of ``work`` that ``pos`` and ``gid`` are not."""
        V, L, m = self.V, self.T, len(pos)
        spare = next(b for b in work["pos"] if not np.shares_memory(b, pos))
        # table k-1 also holds the (k-1)-gram at the last position, which no word follows
        last_gram = int(gid[np.flatnonzero(pos == L - k + 1)[0]])
        zero = int(np.flatnonzero(pos == 0)[0])  # and one no word precedes
        pos -= 1  # the k-grams at t = (k-1)-gram position - 1, sorted by all their words but the first
        first = np.take(ids, pos, out=work["first"][:m], mode="wrap")  # (m,) the k-gram's first word
        first[zero] = V  # at t = -1 there is no k-gram: a word after every word, sorted last, dropped
        by_first = word_order(first, V + 1)[: m - 1]  # (L-k+1,) stable: equal first words stay in suffix order
        if need_ids:  # (L-k+1,) the k-grams' positions, sorted: the next order starts from them
            start = np.take(pos, by_first, out=spare[: m - 1])
        suf = np.take(gid, by_first, out=work["gid"][1][: m - 1])  # (L-k+1,) each one's suffix, in table k-1
        del by_first  # and their first words, sorted: each word as often as it occurs (no gather needed)
        first = np.repeat(np.arange(V + 1, dtype=ids.dtype), np.bincount(first, minlength=V + 1))[: m - 1]
        new = mark_runs(first, work["new"][: m - 1])  # (L-k+1,) a new k-gram starts where the first
        new[1:] |= suf[1:] != suf[:-1]  # word or the suffix changes
        starts, counts = run_lengths(new, gid.dtype)  # (N_k,)
        suffix = suf.take(starts)  # (N_k,)
        key = self.keys[k - 1].take(suffix)  # (N_k,) each suffix's key ...
        last = key % V  # ... ends with the k-gram's last word
        first = first.take(starts)  # (N_k,)
        del starts
        if k == 2:  # the prefix is the first word, its own id in table 1
            prefix = first.astype(np.int64)  # (N_k,)
        else:  # table k is sorted by prefix: its id rises by one where the first word or the suffix's
            key //= V  # own prefix (its first k-2 words, an id in table k-2) changes
            pnew = mark_runs(key, np.empty(len(key), bool))  # (N_k,)
            pnew[1:] |= first[1:] != first[:-1]
            prefix = np.cumsum(pnew, dtype=np.int64)  # (N_k,)
            prefix -= 1
            if self.counts[k - 1][last_gram] == 1:  # the last (k-1)-gram occurs only there: it is no
                prefix[prefix >= last_gram] += 1  # k-gram's prefix, and the ids from it on move up by one
        del first, key
        self.offsets.append(self._offsets(prefix, len(self.keys[k - 1]), gid.dtype))
        prefix *= V
        prefix += last  # (N_k,) the keys, sorted
        self.keys.append(prefix)
        self.counts.append(counts)
        self.suffix.append(suffix)
        if not need_ids:
            return None, None
        gid = np.cumsum(new, dtype=gid.dtype, out=gid[: m - 1])  # (L-k+1,) id of the k-gram at each
        gid -= 1  # sorted position
        return start, gid

    @staticmethod
    def _offsets(prefix: np.ndarray, n: int, dtype) -> np.ndarray:
        """(n + 1,) start of each prefix id's run in ``prefix`` (N,), sorted ids in 0..n-1."""
        offsets = np.zeros(n + 1, dtype)
        np.cumsum(np.bincount(prefix, minlength=n), out=offsets[1:])  # how many k-grams precede each run
        return offsets

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
        """Ids of the k-grams (prefix, word) in table k, -1 where unseen (or the prefix is -1): a
        binary search for each key among the k-grams extending its prefix (:func:`search_slices`)."""
        prefix_ids = np.asarray(prefix_ids, np.int64)
        if k == 1:  # order 1 is the identity: the id of word w is w
            return np.where(prefix_ids == 0, words, -1)
        keys, offsets = self.keys[k], self.offsets[k]
        p = np.maximum(prefix_ids, 0)  # (K,)
        q = p * self.V + words  # (K,) the keys sought
        lo = offsets.take(p)  # (K,) the prefix's children: keys[lo:hi]
        hi = np.where(prefix_ids >= 0, offsets.take(p + 1), lo)  # (K,) none for an unseen prefix
        i = search_slices(keys, q, lo, hi)  # (K,)
        found = i < hi
        found[found] = keys.take(i[found]) == q[found]
        return np.where(found, i, -1)

    def find(self, grams: np.ndarray) -> np.ndarray:
        """Ids of a batch of k-grams (K, k), chronological order, -1 where unseen: one step down the trie per word."""
        grams = np.asarray(grams, dtype=np.int64)
        K, k = grams.shape
        idx = np.zeros(K, np.int64)  # the empty context
        for j in range(k):
            idx = self.extend(j + 1, idx, grams[:, j])
        return idx

    def ranges(self, k: int, prefix_ids: np.ndarray):
        """For contexts (ids in table k-1): flat (row, entry) pairs of every k-gram that extends them.

        Returns rows (M,) indexing prefix_ids and entries (M,) indexing table k; the keys of one
        context are contiguous in the sorted table (``offsets``), so this is two gathers and a repeat.
        """
        prefix_ids = np.asarray(prefix_ids)
        lo, hi = self.offsets[k].take(prefix_ids), self.offsets[k].take(prefix_ids + 1)  # (K,) each
        n = hi - lo  # (K,) k-grams per context
        rows = np.repeat(np.arange(len(prefix_ids)), n)
        starts = np.repeat(np.cumsum(n) - n, n)
        entries = np.arange(n.sum()) - starts + np.repeat(lo, n)
        return rows, entries
