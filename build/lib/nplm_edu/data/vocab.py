"""Words and ids: the marks every corpus shares, the vocabulary, and encoding a token stream.

Paragraph and text ends are kept as tokens (section 4 of the paper); words seen fewer than
``min_count`` times share the symbol ``<unk>``. Ids are in order of decreasing corpus frequency.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import repeat

import numpy as np

PARAGRAPH, TEXT, UNK = "<p>", "<t>", "<unk>"


class Vocabulary:
    """Words <-> ids. Ids are in order of decreasing corpus frequency, ``<unk>`` included by count.

    >>> v = Vocabulary.build(np.array("a b a c a b b d".split()), min_count=2)
    >>> v.words, v.unk
    (['a', 'b', '<unk>'], 2)
    >>> v.encode("a d b".split()).tolist(), v.decode([1, 0])
    ([0, 2, 1], ['b', 'a'])
    """

    def __init__(self, words, counts):
        self.words = [str(w) for w in words]
        self.counts = np.asarray(counts, dtype=np.int64)  # corpus frequency of each id
        self.index = {w: i for i, w in enumerate(self.words)}
        if UNK not in self.index:
            raise ValueError("a vocabulary needs the <unk> symbol")
        self.unk = self.index[UNK]

    @classmethod
    def build(cls, tokens, min_count: int = 4) -> "Vocabulary":
        """Keep words seen at least ``min_count`` times; the others share ``<unk>`` (section 4)."""
        return encode_stream([tokens], min_count)[1]

    @classmethod
    def from_counts(cls, words: list[str], counts, min_count: int = 4) -> "Vocabulary":
        """The vocabulary of distinct ``words`` seen ``counts`` times: most frequent first, ties in
        alphabetical (code point) order, words seen fewer than ``min_count`` times counted in ``<unk>``.

        Sorting is by Python string comparison, never through a numpy string array, whose memory
        would be the number of words times the longest word."""
        counts = np.asarray(counts, dtype=np.int64)  # (W,)
        rare = counts < min_count
        kept = [i for i in np.flatnonzero(~rare).tolist() if words[i] != UNK]
        unk_count = int(counts[rare].sum()) + sum(int(counts[i]) for i, w in enumerate(words)
                                                   if w == UNK and not rare[i])
        kw = [words[i] for i in kept] + [UNK]
        kc = np.append(counts[kept], unk_count)  # (|V|,)
        alpha = np.array(sorted(range(len(kw)), key=kw.__getitem__), dtype=np.int64)  # alphabetical
        order = alpha[np.argsort(-kc[alpha], kind="stable")]  # most frequent first, ties alphabetical
        return cls([kw[i] for i in order], kc[order])

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, tokens) -> np.ndarray:
        """Token strings to an int32 id array; unknown strings map to ``<unk>``."""
        get, unk = self.index.get, self.unk
        return np.fromiter(map(get, tokens, repeat(unk)), dtype=np.int32, count=len(tokens))

    def decode(self, ids) -> list[str]:
        """Ids back to strings."""
        return [self.words[i] for i in np.asarray(ids).ravel()]


def encode_stream(chunks: Iterable, min_count: int = 4) -> tuple[np.ndarray, Vocabulary]:
    """Token strings, chunk by chunk, to (int32 ids (T,), :class:`Vocabulary`) in one pass.

    Each chunk is numbered at once by order of first appearance (a dict lookup per token, in C),
    so only int32 ids and the distinct words are held, never the token strings; the counts of
    those ids give the vocabulary, and one gather renumbers them. Memory: 8 bytes per token plus
    the distinct words, whatever their length.

    >>> ids, v = encode_stream([["b", "a"], ["b", "c", "b"]], min_count=2)
    >>> ids.tolist(), v.words
    ([0, 1, 0, 1, 0], ['b', '<unk>'])
    """
    first = defaultdict()
    first.default_factory = first.__len__  # an unseen word gets the next id
    parts = [np.fromiter(map(first.__getitem__, toks), dtype=np.int32, count=len(toks)) for toks in chunks]
    words = [str(w) for w in first]  # (W,) distinct words, by first appearance
    del first
    counts = np.zeros(len(words), np.int64)  # (W,)
    for part in parts:
        counts += np.bincount(part, minlength=len(words))
    vocab = Vocabulary.from_counts(words, counts, min_count)
    remap = vocab.encode(words)  # (W,) first-appearance id -> vocabulary id
    ids = np.empty(int(counts.sum()), np.int32)  # (T,)
    pos = 0
    parts.reverse()
    while parts:  # renumber chunk by chunk, freeing each as it is copied
        part = parts.pop()
        ids[pos:pos + len(part)] = remap[part]
        pos += len(part)
    return ids, vocab
