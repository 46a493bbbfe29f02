"""Corpora as int32 id streams: Brown (section 4 of the paper), any text file, and a synthetic grammar.

The paper trains on the Brown corpus read as one long stream of tokens, "punctuation and case
kept, plus marks separating texts and paragraphs" (section 4). We read it with NLTK's corpus
reader, append ``<p>`` after every paragraph and ``<t>`` after every text, and split it as the
paper did: the first 800,000 tokens for training, the next 200,000 for validation, the rest for
testing. Words seen 3 times or fewer in the whole corpus become ``<unk>``.

Every corpus becomes a :class:`Corpus`: one id array ``ids`` for the whole stream and the three
splits as views of it, so a model can read its context across a split boundary and every token of
the validation and test sets is scored (see :meth:`Corpus.windows`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .files import atomic_write, atomic_writes, remove_stale_temporaries
from ..errors import UserError
from .sources import BROWN_FIX, brown_available, brown_reader, brown_source, brown_tokens, text_token_chunks, text_tokens
from .vocab import PARAGRAPH, TEXT, UNK, Vocabulary, encode_stream

__all__ = ["BROWN_FIX", "PARAGRAPH", "TEXT", "UNK", "Corpus", "CorpusSpec", "Vocabulary", "brown_available",
           "brown_reader", "brown_source", "brown_tokens", "encode_stream", "export", "load_corpus", "resolve_split",
           "text_token_chunks", "text_tokens", "windows"]

BROWN_SPLIT = (800_000, 200_000)  # section 4: train, validation; the rest is the test set
DEFAULT_SPLIT = (0.8, 0.1)  # for other corpora: fractions of the stream
CACHE_VERSION = 2  # 2: the vocabulary stored as UTF-8 bytes and lengths


def windows(ids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """All n-gram windows of an id stream as zero-copy views.

    Returns contexts (N, n-1) in chronological order (``contexts[:, -1]`` is w_{t-1}) and
    targets (N,), with N = len(ids) - n + 1.

    >>> c, t = windows(np.arange(5, dtype=np.int32), 3)
    >>> c.tolist(), t.tolist()
    ([[0, 1], [1, 2], [2, 3]], [2, 3, 4])
    """
    if n < 2:
        raise UserError(f"n must be at least 2 (one context word), got {n}")
    ids = np.asarray(ids)
    if len(ids) < n:
        raise UserError(f"a stream of {len(ids)} tokens has no window of {n} tokens")
    win = sliding_window_view(ids, n)  # (N, n), a view
    return win[:, :-1], win[:, -1]


@dataclass
class Corpus:
    """A tokenized corpus: the whole id stream, its vocabulary and the three splits (views)."""

    name: str
    vocab: Vocabulary
    ids: np.ndarray  # (T_total,) int32, the whole stream
    bounds: tuple[int, int]  # end of train, end of validation
    classes: dict[str, str] | None = field(default=None, repr=False)  # synthetic: word -> class

    @property
    def V(self) -> int:
        return len(self.vocab)

    @property
    def train(self) -> np.ndarray:
        return self.ids[: self.bounds[0]]

    @property
    def valid(self) -> np.ndarray:
        return self.ids[self.bounds[0] : self.bounds[1]]

    @property
    def test(self) -> np.ndarray:
        return self.ids[self.bounds[1] :]

    def split(self, name: str) -> np.ndarray:
        if name not in ("train", "valid", "test"):
            raise UserError(f"unknown split {name!r}: use train, valid or test")
        return getattr(self, name)

    def windows(self, split: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Contexts and targets that score every token of ``split`` (zero-copy views).

        Validation and test contexts reach back into the preceding split, so models of any order
        score exactly the same tokens; training starts at its n-th token.
        """
        self.split(split)
        start = {"train": 0, "valid": self.bounds[0], "test": self.bounds[1]}[split]
        end = {"train": self.bounds[0], "valid": self.bounds[1], "test": len(self.ids)}[split]
        first = start if split == "train" else start - (n - 1)
        if first < 0:
            raise UserError(f"the training set is shorter than the {n - 1} words of context")
        return windows(self.ids[first:end], n)

    def head(self, sizes: tuple, tag: str) -> "Corpus":
        """The first ``sizes`` = (train, valid, test) tokens of each split (None: the whole split), the
        vocabulary unchanged; named ``<name>[<tag>]``. Itself when no split is shortened."""
        parts = [self.split(s)[:k] for s, k in zip(("train", "valid", "test"), sizes)]
        if all(len(p) == len(self.split(s)) for p, s in zip(parts, ("train", "valid", "test"))):
            return self
        a, b = len(parts[0]), len(parts[0]) + len(parts[1])
        return Corpus(name=f"{self.name}[{tag}]", vocab=self.vocab, ids=np.concatenate(parts), bounds=(a, b))

    def info(self) -> dict:
        """Token counts per split, |V| and the unknown-word rate per split."""
        out = {"corpus": self.name, "V": self.V, "tokens": int(len(self.ids))}
        for s in ("train", "valid", "test"):
            ids = self.split(s)
            out[s] = {"tokens": int(len(ids)), "unk_rate": float(np.mean(ids == self.vocab.unk)) if len(ids) else 0.0}
        return out


# --------------------------------------------------------------------------- caching

def cache_dir() -> Path:
    """``$NPLM_EDU_CACHE`` or ``~/.cache/nplm_edu``: processed corpora live here, outside git."""
    return Path(os.environ.get("NPLM_EDU_CACHE", Path.home() / ".cache" / "nplm_edu"))


def _fingerprint(kind: str, source: Path | None, min_count: int) -> str:
    h = hashlib.sha256(f"{CACHE_VERSION}|{kind}|{min_count}".encode())
    if source is not None:
        if source.is_file() and kind != "brown":
            with open(source, "rb") as f:
                h.update(hashlib.file_digest(f, "sha256").digest())  # read in blocks, not held whole
        else:  # brown: its location, size and modification time
            st = source.stat()
            h.update(f"{source.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:20]


def _save_cache(path: Path, ids: np.ndarray, vocab: Vocabulary) -> None:
    """Write ids and vocabulary atomically; the words as UTF-8 bytes and their lengths."""
    enc = [w.encode("utf-8") for w in vocab.words]
    atomic_write(path, lambda f: np.savez(f, ids=ids, counts=vocab.counts,
                                          word_bytes=np.frombuffer(b"".join(enc), np.uint8),
                                          word_lengths=np.array([len(b) for b in enc], np.int64)))


def _read_cache(path: Path) -> tuple[np.ndarray, Vocabulary]:
    with np.load(path, allow_pickle=False) as z:
        data, ends = z["word_bytes"].tobytes(), np.cumsum(z["word_lengths"]).tolist()
        words = [data[a:b].decode("utf-8") for a, b in zip([0] + ends[:-1], ends)]
        return z["ids"], Vocabulary(words, z["counts"])


def _load_stream(kind: str, source: Path | None, min_count: int, read, cache: bool):
    """(ids, vocabulary) from the cache, or read (``read()``: token lists), encode and cache them."""
    path = cache_dir() / f"{kind}-{_fingerprint(kind, source, min_count)}.npz"
    if cache and path.exists():
        try:
            return _read_cache(path)
        except Exception:
            pass  # a damaged cache file is rebuilt below
    ids, vocab = encode_stream(read(), min_count)
    if cache:
        # what a process killed while writing a cache file left: the temporary file of one of ours
        # (<kind>-<20 hex digits>.npz) that no writer has touched for a minute (another process may
        # be writing its own now); nothing else in the folder
        remove_stale_temporaries(cache_dir() / f"*-{'[0-9a-f]' * 20}.npz", older_than=60)
        _save_cache(path, ids, vocab)
    return ids, vocab


# --------------------------------------------------------------------------- splits and loading

def resolve_split(total: int, train: float | int, valid: float | int) -> tuple[int, int]:
    """Split sizes as counts (ints) or fractions (floats in (0, 1)) -> (end of train, end of valid).

    >>> resolve_split(1000, 0.8, 0.1)
    (800, 900)
    >>> resolve_split(1000, 600, 300)
    (600, 900)
    """
    def count(x, what):
        if isinstance(x, float):
            if not 0 < x < 1:
                raise UserError(f"the {what} fraction must be between 0 and 1, got {x}")
            if round(x * total) < 1:
                raise UserError(f"a {what} fraction of {x} leaves no {what} tokens in a corpus of {total} tokens")
            return int(round(x * total))
        if x <= 0:
            raise UserError(f"the {what} split must be positive, got {x}")
        return int(x)

    a, v = count(train, "training"), count(valid, "validation")
    if a + v >= total:
        raise UserError(f"splits of {a} training and {v} validation tokens leave no test set "
                        f"in a corpus of {total} tokens")
    return a, a + v


def end_of_test(total: int, valid_end: int, test: float | int | None) -> int:
    """Where the test split ends: the end of the corpus (``test`` None: the rest), or after ``test`` tokens
    (an int) or that fraction of the corpus (a float) following the validation split.

    >>> end_of_test(1000, 900, None), end_of_test(1000, 900, 50), end_of_test(1000, 800, 0.1)
    (1000, 950, 900)
    """
    if test is None:
        return total
    n = int(round(test * total)) if isinstance(test, float) and 0 < test < 1 else test
    if isinstance(test, float) and not 0 < test < 1 or n < 1 or n > total - valid_end:
        raise UserError(f"test_size must be a positive count or fraction of at most the {total - valid_end} tokens "
                        f"after the validation split, got {test}", setting="test_size")
    return valid_end + int(n)


def load_corpus(name: str = "synthetic", *, train=None, valid=None, test=None, min_count: int = 4,
                seed: int = 0, synthetic_tokens: int = 30_000, cache: bool = True, progress: bool = False) -> Corpus:
    """Load ``"brown"``, ``"synthetic"`` or a UTF-8 text file as a :class:`Corpus`.

    ``train`` and ``valid`` are token counts (int) or fractions (float); the test set is the rest, or
    ``test`` tokens (or that fraction) after them (the corpus is then named ``<name>[test <tokens>]``: not
    the paper's split; the vocabulary is still the whole corpus's).
    Defaults: the paper's 800,000 / 200,000 on Brown, 0.8 / 0.1 elsewhere. ``min_count``: words
    seen fewer times in the whole corpus become ``<unk>`` (4, i.e. "3 times or fewer", as the
    paper did). ``progress``: a bar while a text file is read (not from the cache) for over a second.
    """
    if min_count < 1:
        raise UserError(f"min_count must be at least 1, got {min_count}", setting="min_count")
    classes = None
    if name == "synthetic":
        from .synthetic import generate

        tokens, classes = generate(synthetic_tokens, seed)
        ids, vocab = encode_stream([tokens], min_count=1)
        default = DEFAULT_SPLIT
    elif name == "brown":
        ids, vocab = _load_stream("brown", brown_source(), min_count, lambda: [brown_tokens()], cache)
        default = BROWN_SPLIT
    else:
        path = Path(name).expanduser()
        if not path.exists():
            raise UserError(f"no such corpus: {name!r} is not 'brown', 'synthetic' or an existing file")
        ids, vocab = _load_stream("text", path, min_count, lambda: text_token_chunks(path, progress=progress), cache)
        default = DEFAULT_SPLIT
    bounds = resolve_split(len(ids), default[0] if train is None else train,
                          default[1] if valid is None else valid)
    end = end_of_test(len(ids), bounds[1], test)
    if end < len(ids):
        name, ids = f"{name}[test {end - bounds[1]}]", ids[:end]
    return Corpus(name=name, vocab=vocab, ids=ids, bounds=bounds, classes=classes)


@dataclass
class CorpusSpec:
    """Which corpus and how to split it: the arguments of :func:`load_corpus` as one value (the
    command line builds it from its options; experiments take it instead of options)."""

    corpus: str = "synthetic"  # brown, synthetic or the path of a UTF-8 text file
    train_size: float | int | None = None  # tokens (int) or fraction (float); None: the default split
    valid_size: float | int | None = None
    test_size: float | int | None = None  # None: the rest of the corpus
    min_count: int = 4
    corpus_seed: int = 0  # seed of the synthetic corpus
    synthetic_tokens: int = 30_000

    def load(self, progress: bool = False) -> Corpus:
        return load_corpus(self.corpus, train=self.train_size, valid=self.valid_size, test=self.test_size,
                           min_count=self.min_count,
                           seed=self.corpus_seed, synthetic_tokens=self.synthetic_tokens, progress=progress)


def export(corpus: Corpus, out: Path) -> dict[str, Path]:
    """Write train.txt, valid.txt, test.txt: the streams the models see, ``<unk>`` mapped, one line
    per paragraph (the marks stay in as tokens), so outside toolkits score the very same data."""
    words = np.array(corpus.vocab.words, dtype=object)

    def lines_of(split: str):
        def write(f):
            toks = words[corpus.split(split)]
            is_p, is_t = toks == PARAGRAPH, toks == TEXT
            next_is_t = np.append(is_t[1:], False)
            ends = np.flatnonzero((is_p & ~next_is_t) | is_t) + 1  # a <t> stays on its paragraph's line
            for chunk in np.split(toks, ends):
                if len(chunk):
                    f.write((" ".join(chunk) + "\n").encode("utf-8"))
        return write

    paths = {s: Path(out) / f"{s}.txt" for s in ("train", "valid", "test")}
    remove_stale_temporaries(*paths.values())  # of an export killed mid-write
    atomic_writes({paths[s]: lines_of(s) for s in paths})  # all three or none, never a file cut short
    return paths
