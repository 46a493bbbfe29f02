"""Rare and unknown words in the recurrent table: what the ``char-lstm`` row's seeds measure beside
the protocol's perplexities (:mod:`nplm_edu.analysis.recurrent_words`), stored in each seed's row as
``words``.

- ``by_frequency``: the test perplexity per bin of the training slice's count of the word predicted
  and of the word read last, of the character-aware LSTM and of the word-level LSTM of the same seed
  (the ``lstm`` row's best parameters, read from its run folder at its chosen learning rate, when that
  row is in the results file, which the command line checks before it trains: the column is missing only
  when that run folder's checkpoint is not at hand, and ``word_level`` then says why).
- ``oov``: the test stream read again with every word the vocabulary rule turned into ``<unk>`` read
  by its own spelling (the original words of Brown's test split; other corpora have none at hand).

Only the rows named in ``ANALYSES`` get these fields; every other row computes what it did before.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ..analysis.recurrent_words import frequency_table, oov_reading
from ..data.corpus import load_corpus
from ..data.sources import brown_tokens
from ..errors import UserError
from ..training.stream import recurrent_from_checkpoint, split_log_probs, split_stream
from .protocol import run_dir
from .skeleton import read_results

WORD_LEVEL = "lstm"  # the row the character-aware LSTM is compared with


def vocabulary_rule(vocab) -> str:
    """The rule that made the vocabulary, as its counts show it."""
    known = np.delete(vocab.counts, vocab.unk)
    return (f"every word seen at least {int(known.min())} times in the whole corpus has its own id, the others "
            "are <unk>; the bins count the training slice")


def original_test_words(corpus) -> list | None:
    """The original token of every test target of ``corpus`` (a Brown corpus whose test split starts
    where the paper's does), or None when they are not at hand."""
    if not corpus.name.startswith("brown"):
        return None
    try:
        full = load_corpus("brown")
        raw = brown_tokens()
    except UserError:
        return None
    start, n = full.bounds[1], len(corpus.test)
    words = raw[start:start + n]
    if full.vocab.words != corpus.vocab.words or not np.array_equal(corpus.vocab.encode(words), corpus.test):
        return None
    return words


def word_level_rows(out) -> dict:
    """{seed: row} of the ``lstm`` rows in the results file ``out`` (none when there is no file yet)."""
    doc = read_results(out, "recurrent") if out is not None and Path(out).exists() else None
    return {r.get("seed"): r for r in (doc or {}).get("runs", []) if r.get("method") == WORD_LEVEL}


def needs_word_level(names, out, seeds) -> None:
    """Refuse (a settings error) to train the ``char-lstm`` row of ``names`` when a seed of ``seeds`` has no
    ``lstm`` row in the results file ``out`` and ``names`` does not train it first: the character-aware
    row is compared with the word-level LSTM of the same seed, so that row's seeds come first."""
    if "char-lstm" not in names or WORD_LEVEL in names:
        return
    have = set(word_level_rows(out))
    missing = [s for s in seeds if s not in have]
    if missing:
        raise UserError(f"models char-lstm is compared with the {WORD_LEVEL} row of the same seed, and "
                        f"{Path(out).name} has none for seed {', '.join(map(str, missing))}: train {WORD_LEVEL}'s "
                        "seeds first", setting="models")


def word_level_model(runs, out, seed: int):
    """(the ``lstm`` row's model of ``seed`` with its best parameters, None) or (None, why not)."""
    row = word_level_rows(out).get(seed)
    if row is None:
        return None, f"the {WORD_LEVEL} row of seed {seed} is not in the results file"
    path = run_dir(runs, WORD_LEVEL, row["lr"], seed) / "checkpoint.npz"
    if not path.exists():
        return None, f"the {WORD_LEVEL} row of seed {seed} has no checkpoint at hand"
    return recurrent_from_checkpoint(path), None


def char_words(model, corpus, runs, out) -> dict:
    """The ``words`` field of a ``char-lstm`` seed's row (see the module docstring)."""
    inputs, targets = split_stream(corpus, "test")
    logs = {"char-lstm": split_log_probs(model, corpus, "test")}
    word, why = word_level_model(runs, out, model.config.seed)
    if word is not None:
        logs[WORD_LEVEL] = split_log_probs(word, corpus, "test")
    counts = np.bincount(corpus.train, minlength=corpus.V)  # (|V|,) the training slice's counts
    unk = corpus.vocab.unk
    raw = original_test_words(corpus)
    inputs_words = None if raw is None else [None] + list(raw[:-1])  # inputs[0] is the split before's last
    oov = (oov_reading(model, inputs, targets, inputs_words, unk) if inputs_words is not None
           else {"skipped": "the corpus's original words are not at hand"})
    return {"vocabulary_rule": vocabulary_rule(corpus.vocab), "word_level": why or f"the {WORD_LEVEL} row, same seed",
            "by_frequency": frequency_table(counts, unk, inputs, targets, logs), "oov": oov}


ANALYSES = {"char-lstm": char_words}


def with_analysis(method, name: str, runs, out):
    """``method`` (a row's protocol Method) whose seeds' rows also hold ``ANALYSES[name]``'s ``words``."""
    more = ANALYSES.get(name)
    if more is None:
        return method
    extra = method.extra
    return replace(method, extra=lambda m, c: {**(extra(m, c) if extra else {}), "words": more(m, c, runs, out)})
