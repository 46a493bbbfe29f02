"""Tests of nplm_edu.data.corpus and nplm_edu.data.synthetic: Brown as the paper split it, vocabularies,
text files, caching, windows and the synthetic grammar."""

import time
import tracemalloc

import numpy as np
import pytest

import nplm_edu.data.corpus as corpus_module
from nplm_edu.data.corpus import (PARAGRAPH, TEXT, UNK, Vocabulary, brown_available, encode_stream,
                                  load_corpus, resolve_split, text_token_chunks, windows)
from nplm_edu.data.synthetic import CLASSES, generate
from nplm_edu.errors import UserError


needs_brown = pytest.mark.skipif(
    not brown_available(), reason="the Brown corpus is not in NLTK_DATA (python -m nltk.downloader brown)")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty corpus cache for the test."""
    d = tmp_path / "cache"
    monkeypatch.setenv("NPLM_EDU_CACHE", str(d))
    return d


@pytest.fixture(scope="module")
def brown():
    """Brown from the user's cache (built once if absent)."""
    return load_corpus("brown")


# --------------------------------------------------------------------------- Brown

@needs_brown
def test_brown_sizes_and_split(brown):
    # 1,161,192 NLTK words + 15,667 paragraph marks + 500 text marks = 1,177,359 tokens
    assert len(brown.ids) == 1_161_192 + 15_667 + 500 == 1_177_359
    # the paper's split: first 800,000 train, next 200,000 valid, the rest (177,359) test
    assert (len(brown.train), len(brown.valid), len(brown.test)) == (800_000, 200_000, 177_359)
    assert brown.V == 17_907
    assert brown.ids.dtype == np.int32
    for s in (brown.train, brown.valid, brown.test):
        assert s.dtype == np.int32 and np.shares_memory(s, brown.ids)


@needs_brown
def test_brown_vocabulary_and_marks(brown):
    v = brown.vocab
    assert UNK in v.index and v.words[v.unk] == UNK
    assert np.sum(brown.ids == v.index[PARAGRAPH]) == 15_667
    assert np.sum(brown.ids == v.index[TEXT]) == 500
    assert brown.ids[-1] == v.index[TEXT]  # every text ends with its mark
    assert brown.ids.min() >= 0 and brown.ids.max() < brown.V
    # kept words are seen at least 4 times; <unk> stands for many rare tokens
    kept = np.arange(brown.V) != v.unk
    assert v.counts[kept].min() >= 4
    assert v.counts[v.unk] > 10_000
    assert np.array_equal(np.bincount(brown.ids, minlength=brown.V), v.counts)
    assert v.decode(v.encode(["The", "of", "."])) == ["The", "of", "."]


@needs_brown
def test_brown_windows_zero_copy(brown):
    c, t = windows(brown.ids, 5)
    assert c.shape == (len(brown.ids) - 4, 4) and t.shape == (len(brown.ids) - 4,)
    assert np.shares_memory(c, brown.ids) and np.shares_memory(t, brown.ids)
    assert np.array_equal(c[10], brown.ids[10:14]) and t[10] == brown.ids[14]


@needs_brown
@pytest.mark.parametrize("n", [2, 3, 5])
def test_brown_valid_windows_score_every_token(brown, n):
    for split in ("valid", "test"):
        c, t = brown.windows(split, n)
        assert c.shape == (len(brown.split(split)), n - 1)
        assert np.array_equal(t, brown.split(split))  # every token of the split is a target
        assert np.shares_memory(c, brown.ids)
    start = brown.bounds[0]
    c, t = brown.windows("valid", n)
    assert np.array_equal(c[0], brown.ids[start - (n - 1):start])  # reaches back into train
    c, t = brown.windows("train", n)
    assert len(t) == 800_000 - (n - 1)


@needs_brown
def test_brown_cache_second_load_reads_the_cache_not_the_corpus(cache, brown_read_once, monkeypatch):
    first = load_corpus("brown")  # builds the cache (seconds)
    assert len(list(cache.glob("brown-*.npz"))) == 1

    def corpus_read_again():
        raise AssertionError("the second load parsed the corpus: the cache is not used")

    monkeypatch.setattr(corpus_module, "brown_tokens", corpus_read_again)
    second = load_corpus("brown")
    assert np.array_equal(first.ids, second.ids) and first.vocab.words == second.vocab.words


@needs_brown
def test_brown_cache_depends_on_min_count(cache, brown, brown_read_once):
    other = load_corpus("brown", min_count=10)
    assert other.V < brown.V
    assert len(list(cache.glob("brown-*.npz"))) == 1  # a cache entry for these options
    again = load_corpus("brown")  # min_count 4 in the same private cache: its own entry, not min_count 10's
    assert len(list(cache.glob("brown-*.npz"))) == 2
    assert again.V == brown.V and len(other.ids) == len(brown.ids)


@needs_brown
def test_brown_ids_identical_to_a_numpy_string_array_reader(brown, brown_read_once):
    # the reader before streaming: one numpy string array of every token, np.unique, lexsort
    ids, vocab = reference_reader(brown_read_once(), 4)
    assert brown.vocab.words == vocab.words and brown.vocab.counts.tolist() == vocab.counts.tolist()
    assert np.array_equal(brown.ids, ids)


# --------------------------------------------------------------------------- vocabulary

def reference_reader(tokens, min_count):
    """The former reader, kept here as the reference: a numpy string array of all tokens (its memory
    is tokens x the longest token), np.unique counts, then most frequent first, ties alphabetical."""
    arr = np.array(tokens)
    words, counts = np.unique(arr, return_counts=True)
    keep = (counts >= min_count) & (words != UNK)
    unk_count = int(counts[~keep].sum())
    words, counts = np.append(words[keep], UNK), np.append(counts[keep], unk_count)
    order = np.lexsort((words, -counts))
    vocab = Vocabulary(words[order], counts[order])
    return vocab.encode(arr.tolist()), vocab


def test_encode_stream_matches_the_reference_reader():
    rng = np.random.default_rng(5)
    pool = ["a", "b", "B", "é", "ß", "<unk>", "<p>", "zz", "a1", "日本", "ab", "aa"] + [f"w{i}" for i in range(40)]
    toks = [pool[i] for i in rng.zipf(1.4, size=4000) % len(pool)]
    for min_count in (1, 3, 50):
        chunks = [toks[i:i + 333] for i in range(0, len(toks), 333)]
        ids, vocab = encode_stream(chunks, min_count)
        ref_ids, ref = reference_reader(toks, min_count)
        assert vocab.words == ref.words and vocab.counts.tolist() == ref.counts.tolist()
        assert ids.dtype == np.int32 and np.array_equal(ids, ref_ids)
        assert np.array_equal(np.bincount(ids, minlength=len(vocab)), vocab.counts)



def test_vocabulary_hand_example():
    # counts: the 4, cat 3, sat 2, on 1, mat 1; min_count 2 keeps the, cat, sat;
    # <unk> gets on + mat = 2 and ties with sat: ties are alphabetical and "<" < "s".
    toks = np.array("the cat sat on the mat the cat the sat cat".split())
    v = Vocabulary.build(toks, min_count=2)
    assert v.words == ["the", "cat", "<unk>", "sat"]
    assert v.counts.tolist() == [4, 3, 2, 2]
    assert v.unk == 2 and len(v) == 4
    ids = v.encode(["the", "mat", "sat", "dog"])
    assert ids.dtype == np.int32 and ids.tolist() == [0, 2, 3, 2]
    assert v.decode(ids) == ["the", UNK, "sat", UNK]


def test_vocabulary_round_trip_and_rare_words():
    rng = np.random.default_rng(0)
    toks = np.array([f"w{i}" for i in rng.zipf(1.5, size=5000) % 300])
    v = Vocabulary.build(toks, min_count=4)
    words, counts = np.unique(toks, return_counts=True)
    kept = set(words[counts >= 4])
    assert set(v.words) == kept | {UNK}
    assert v.counts[v.unk] == counts[counts <= 3].sum()
    ids = v.encode(toks.tolist())
    back = v.decode(ids)
    assert back == [t if t in kept else UNK for t in toks]
    assert v.encode(v.decode(ids)).tolist() == ids.tolist()


def test_vocabulary_requires_unk():
    with pytest.raises(ValueError):
        Vocabulary(["a", "b"], [2, 1])


# --------------------------------------------------------------------------- windows and splits

def test_windows_small_and_errors():
    ids = np.arange(6, dtype=np.int32)
    c, t = windows(ids, 3)
    assert c.tolist() == [[0, 1], [1, 2], [2, 3], [3, 4]] and t.tolist() == [2, 3, 4, 5]
    assert np.shares_memory(c, ids)
    with pytest.raises(UserError):
        windows(ids, 1)
    with pytest.raises(UserError):
        windows(ids, 0)
    with pytest.raises(UserError):
        windows(ids[:2], 3)


def test_resolve_split():
    assert resolve_split(1000, 0.8, 0.1) == (800, 900)
    assert resolve_split(1000, 600, 300) == (600, 900)
    for bad in [(0.95, 0.1), (900, 100), (2000, 10), (0, 10), (1.5, 0.1), (-0.2, 0.1), (1e-9, 0.1)]:
        with pytest.raises(UserError):
            resolve_split(1000, *bad)


# --------------------------------------------------------------------------- text files

def test_text_file_tokens_and_paragraphs(cache, tmp_path):
    f = tmp_path / "t.txt"
    # line = paragraph, whitespace tokens, blank lines ignored
    f.write_text("a b  a\n\n  c\ta b\n", encoding="utf-8")
    c = load_corpus(str(f), min_count=1, train=3, valid=2)
    assert c.vocab.decode(c.ids) == ["a", "b", "a", PARAGRAPH, "c", "a", "b", PARAGRAPH]
    assert (len(c.train), len(c.valid), len(c.test)) == (3, 2, 3)
    c = load_corpus(str(f), min_count=1, train=0.5, valid=0.25)  # fractions of the 8 tokens
    assert (len(c.train), len(c.valid), len(c.test)) == (4, 2, 2)
    c = load_corpus(str(f), min_count=3)  # a: 3 times, kept; everything else -> <unk>
    assert c.vocab.decode(c.ids) == ["a", UNK, "a", UNK, UNK, "a", UNK, UNK]


def test_text_file_bom_crlf_and_form_feed(cache, tmp_path):
    f = tmp_path / "t.txt"
    # a byte-order mark (Windows editors write one), CRLF line ends, and a form feed inside a line:
    # the mark is not part of "a", "\r" is whitespace, and only "\n" ends a paragraph
    f.write_bytes("\ufeffa b\r\nc\x0cd\r\n".encode("utf-8"))
    c = load_corpus(str(f), min_count=1, train=2, valid=2)
    assert c.vocab.decode(c.ids) == ["a", "b", PARAGRAPH, "c", "d", PARAGRAPH]


def reference_text_tokens(path):
    """The text reader written plainly: the whole file as one string, split into lines, then words,
    and a paragraph mark after each non-empty line unless it already ends in one (or in a text mark)."""
    tokens = []
    for line in path.read_text(encoding="utf-8-sig").split("\n"):
        words = line.split()
        if words:
            tokens.extend(words + ([] if words[-1] in (PARAGRAPH, TEXT) else [PARAGRAPH]))
    return tokens


def test_reading_a_text_file_shows_its_progress_when_asked(tmp_path, monkeypatch):
    from progress_bars import recorded_bars

    f = tmp_path / "t.txt"
    f.write_text("a b c\n" * 5000 + "dé fin", encoding="utf-8")
    bars = recorded_bars(monkeypatch)
    assert [t for c in text_token_chunks(f, read_bytes=1000) for t in c] == reference_text_tokens(f)
    assert [b["shown"] for b in bars] == [False]  # none unless asked
    assert [t for c in text_token_chunks(f, read_bytes=1000, progress=True) for t in c] == reference_text_tokens(f)
    bar = bars[-1]
    assert bar["shown"] and bar["desc"] == "reading t.txt" and bar["n"] == bar["total"] == f.stat().st_size


def test_streaming_text_reader_matches_the_whole_file_reader(cache, tmp_path):
    rng = np.random.default_rng(0)
    # words with multi-byte characters, every kind of whitespace, long and empty lines, no final newline
    pieces = ["a", "b", "é", "日本語", "x" * 50, " ", "  ", "\t", "\n", "\n\n", "\r\n", "\x0c", "\u2028", "\u3000",
              "<unk>", "ß", " <p>", " <t>", " <p> <t>"]
    text = "\ufeff" + "".join(pieces[i] for i in rng.integers(len(pieces), size=6000)) + " tail"
    f = tmp_path / "t.txt"
    f.write_text(text, encoding="utf-8")
    ref = reference_text_tokens(f)
    for read_bytes in (1, 2, 3, 7, 64, 1000, 1 << 22):  # reads cut characters, words and lines anywhere
        got = [t for chunk in text_token_chunks(f, read_bytes) for t in chunk]
        assert got == ref, read_bytes
    c = load_corpus(str(f), min_count=2)
    ref_ids, ref_vocab = reference_reader(ref, 2)
    assert c.vocab.words == ref_vocab.words and np.array_equal(c.ids, ref_ids)
    again = load_corpus(str(f), min_count=2)  # from the cache: the same words, however long or exotic
    assert again.vocab.words == ref_vocab.words and np.array_equal(again.ids, ref_ids)


def test_one_long_line_is_read_in_pieces(cache, tmp_path):
    f = tmp_path / "one_line.txt"
    f.write_text(" ".join(f"w{i % 97}" for i in range(20_000)), encoding="utf-8")  # no newline at all
    chunks = list(text_token_chunks(f, read_bytes=1000))
    assert len(chunks) > 30 and max(len(c) for c in chunks) < 600  # never the whole line at once
    assert [t for c in chunks for t in c] == reference_text_tokens(f)


def test_a_20000_character_token_costs_no_memory(cache, tmp_path):
    # a 0.5 MB file with one token of 20,000 characters: a numpy string array of all tokens would
    # need tokens x 20,000 x 4 bytes (about 16 GB); the streaming reader needs the file's size
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in rng.integers(5000, size=95_000)]
    words[50_000] = "L" * 20_000
    lines = [" ".join(words[i:i + 20]) for i in range(0, len(words), 20)]
    f = tmp_path / "long_token.txt"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert 450_000 < f.stat().st_size < 600_000
    t0 = time.perf_counter()
    c = load_corpus(str(f), min_count=1, cache=False)
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.0, f"took {elapsed:.2f} s"
    assert "L" * 20_000 in c.vocab.index and len(c.ids) == 95_000 + len(lines)
    tracemalloc.start()
    try:
        load_corpus(str(f), min_count=1)  # with the cache written, then read back
        load_corpus(str(f), min_count=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20e6, f"peak {peak / 1e6:.1f} MB"


def test_text_file_cache_sees_changes(cache, tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("one two three four five six seven eight nine ten\n", encoding="utf-8")
    a = load_corpus(str(f), min_count=1)
    assert "five" in a.vocab.index
    f.write_text("uno dos tres cuatro cinco seis siete ocho nueve diez\n", encoding="utf-8")
    b = load_corpus(str(f), min_count=1)
    assert "cinco" in b.vocab.index and "five" not in b.vocab.index
    assert len(list(cache.glob("text-*.npz"))) == 2


@pytest.mark.parametrize("content", [b"", b"  \n\t \n\n", b"\xff\xfe abc\n"])
def test_text_file_bad_content(cache, tmp_path, content):
    f = tmp_path / "bad.txt"
    f.write_bytes(content)
    with pytest.raises(UserError):
        load_corpus(str(f))


def test_missing_file_and_bad_options(cache, tmp_path):
    with pytest.raises(UserError):
        load_corpus(str(tmp_path / "nope.txt"))
    with pytest.raises(UserError):
        load_corpus(str(tmp_path))  # a folder
    with pytest.raises(UserError):
        load_corpus("synthetic", min_count=0)
    with pytest.raises(UserError):
        load_corpus("synthetic", train=0.95, valid=0.1)
    with pytest.raises(UserError):
        load_corpus("synthetic", synthetic_tokens=0)
    with pytest.raises(UserError):
        load_corpus("synthetic").split("dev")


# --------------------------------------------------------------------------- synthetic

def test_synthetic_seeded_and_fast():
    t0 = time.perf_counter()
    a = load_corpus("synthetic", seed=0)
    elapsed = time.perf_counter() - t0
    assert len(a.ids) >= 30_000
    assert elapsed < 0.5, f"synthetic corpus took {elapsed:.2f} s"
    b = load_corpus("synthetic", seed=0)
    c = load_corpus("synthetic", seed=1)
    assert np.array_equal(a.ids, b.ids) and a.vocab.words == b.vocab.words
    assert not np.array_equal(a.ids, c.ids)
    assert a.ids.dtype == np.int32
    assert (len(a.train), len(a.valid), len(a.test)) == (24_000, 3_000, 3_000)  # 0.8 / 0.1 / 0.1


def test_synthetic_classes_cover_vocabulary():
    c = load_corpus("synthetic", seed=0)
    all_words = {w for ws in CLASSES.values() for w in ws}
    assert set(c.vocab.words) - {UNK} == all_words  # every grammar word occurs in 30,000 tokens
    assert set(c.classes) == all_words
    assert c.vocab.counts[c.vocab.unk] == 0


def _sentences(tokens):
    out, cur = [], []
    for w in tokens:
        if w in (PARAGRAPH, TEXT):
            continue
        cur.append(w)
        if w == ".":
            out.append(cur)
            cur = []
    return out


def test_synthetic_grammar_agreements():
    tokens, classes = generate(30_000, seed=3)
    assert len(tokens) == 30_000
    sents = _sentences(tokens)  # generation starts at a sentence; a cut last one has no "."
    assert len(sents) > 2500
    aux = set(CLASSES["aux-present"] + CLASSES["aux-past"])
    n_plural = n_past_time = 0
    for s in sents:
        assert len(s) in (8, 9) and s[-1] == "."
        i = next(k for k, w in enumerate(s) if w in aux)
        noun, a = s[i - 1], s[i]
        if classes[noun] == "animal-plural":  # plural noun -> are/were
            assert a in ("are", "were"), s
            n_plural += 1
        else:
            assert classes[noun] == "animal" and a in ("is", "was"), s
        if s[0] in CLASSES["time-past"]:  # "yesterday"/"then" -> past auxiliary
            assert a in CLASSES["aux-past"], s
            n_past_time += 1
        if s[0] in CLASSES["time-present"]:
            assert a in CLASSES["aux-present"], s
    assert n_plural > 500 and n_past_time > 300  # both branches were exercised


def test_generate_cuts_to_length():
    for n in (1, 7, 1000, 12_345):
        assert len(generate(n, seed=0)[0]) == n
    with pytest.raises(UserError):
        generate(0)


def test_a_cache_write_removes_what_a_killed_writer_left(cache, tmp_path):
    """A temporary cache file no process has written for a minute is a killed writer's: the next cache
    write removes it; one written to just now may be another process's, and stays."""
    import os

    cache.mkdir()
    old, fresh = cache / f"text-{'0' * 20}.npz.k1ll3d.tmp", cache / f"text-{'1' * 20}.npz.wr1t1ng.tmp"
    theirs = [cache / "thesis.tmp", cache / "notes.npz.backup.tmp"]  # not the cache's: never touched
    for p in [old, fresh, *theirs]:
        p.write_bytes(b"some bytes")
    for p in [old, *theirs]:
        os.utime(p, (time.time() - 120, time.time() - 120))
    text = tmp_path / "t.txt"
    text.write_text("a b c a b c d\n" * 50)
    load_corpus(str(text))
    assert not old.exists() and fresh.exists() and all(p.exists() for p in theirs)
    assert len(list(cache.glob("text-*.npz"))) == 1


def test_without_brown_a_notebook_shows_one_line_not_a_traceback(cache, monkeypatch, tmp_path):
    """A chapter run without the corpus: the package's one line in its first cell, for the corpus
    and for NLTK's reader alike, not NLTK's LookupError with its frames."""
    import nltk.data
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    import nltk.corpus
    from nltk.corpus.reader import CategorizedTaggedCorpusReader
    from nltk.corpus.util import LazyCorpusLoader

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "no_nltk_data")])
    monkeypatch.setattr(nltk.corpus, "brown", LazyCorpusLoader(  # a reader not yet loaded in this process
        "brown", CategorizedTaggedCorpusReader, r"c[a-z]\d\d", cat_file="cats.txt", tagset="brown", encoding="ascii"))
    shell = InteractiveShell.instance()
    try:
        for cell in ("from nplm_edu.data.corpus import load_corpus\nload_corpus('brown')",
                     "from nplm_edu.data.corpus import brown_reader\nbrown_reader()"):
            with capture_output() as out:
                result = shell.run_cell(cell)
            assert isinstance(result.error_in_exec, UserError)
            shown = (out.stdout + out.stderr).strip()
            assert shown == "UserError: the Brown corpus is not in NLTK_DATA; fix: python -m nltk.downloader brown", shown
    finally:
        InteractiveShell.clear_instance()
