"""What a recurrent model reading words by their spelling does with rare and unknown words (Kim et al.
2016), measured on a split read as one stream (aggregates only, never per-token data).

- :func:`frequency_table`: perplexity per bin of the training count (the bins of chapter 8's table,
  ``evaluation.FREQ_BINS``) of the word predicted, and of the word read just before it, for several
  models scored on the same tokens: where a character-aware input should pay, the word-level model
  has seen the word read (or predicted) a few times only.
- :func:`spelled_stream`: a word the vocabulary rule turned into ``<unk>`` read as itself: each
  ``<unk>`` input whose original word is known is read through that word's spelling instead of
  ``<unk>``'s vector (the words predicted stay the |V| outcomes, ``<unk>`` among them), the state
  carried through the whole stream; :func:`oov_reading` sums up the difference it makes.
"""

from __future__ import annotations

import numpy as np

from .evaluation import FREQ_BINS
from .recurrent import ppl
from .spelling import _char_input


def frequency_masks(train_counts: np.ndarray, unk: int, ids: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """("unk", ids == unk), then one boolean mask of ``ids`` per bin of their training counts."""
    c = train_counts[ids]
    known = ids != unk
    return [("unk", ~known)] + [(name, known & (c >= lo) & ((c <= hi) if hi is not None else True))
                                for name, lo, hi in FREQ_BINS]


def frequency_table(train_counts: np.ndarray, unk: int, inputs: np.ndarray, targets: np.ndarray,
                    logs: dict) -> dict:
    """Per bin of the training count of the word predicted (``target``) and of the word read last
    (``previous``): its token count and the perplexity of each model of ``logs`` (name -> (N,) log P of
    ``targets`` after ``inputs``), None for an empty bin."""
    out = {}
    for side, ids in (("target", np.asarray(targets)), ("previous", np.asarray(inputs))):
        out[side] = [{"bin": name, "tokens": int(mask.sum()),
                      **{m: (round(ppl(v[mask]), 3) if mask.any() else None) for m, v in logs.items()}}
                     for name, mask in frequency_masks(train_counts, unk, ids)]
    return out


def _segments_log_prob(net, inputs, targets, starts, row_of, unk: int, chunk: int = 256) -> np.ndarray:
    """log P (N,) of one stream read in segments starting at ``starts`` (the state carried across
    them), <unk>'s row of C set to ``row_of(start)`` (None: left as it is) before each segment."""
    C = net.params["C"]
    keep = C[unk].copy()  # (m,)
    out = np.empty(len(targets))
    state = None
    bounds = list(starts) + [len(targets)]
    try:
        for a, b in zip(bounds[:-1], bounds[1:]):
            row = row_of(a)
            C[unk] = keep if row is None else row
            for i in range(a, b, chunk):
                j = min(i + chunk, b)
                lp, state = net.chunk_log_prob(inputs[None, i:j], targets[None, i:j], state)  # (1, j - i)
                out[i:j] = lp[0]
    finally:
        C[unk] = keep
    return out


def spelled_stream(model, inputs, targets, words, unk: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A character-aware stream model (``WithInput`` over a recurrent network) read over one stream
    twice: (log P with every ``<unk>`` input read as ``<unk>``, log P with each ``<unk>`` input t whose
    original word ``words[t]`` is given (not None) read by that word's spelling, and the mask of the
    targets right after such a word), each (N,). ``words``: the original token of each input."""
    layer = _char_input(model)
    inputs, targets = np.asarray(inputs), np.asarray(targets)
    model.fill(inputs)  # the rows of C of the words read, from their spellings (and <unk>'s from "<unk>")
    spelled = [int(t) for t in np.flatnonzero(inputs == unk) if words[t] is not None]
    new = sorted({words[t] for t in spelled})
    X = (np.concatenate([layer.vectors(model.params, new[i:i + 1024]) for i in range(0, len(new), 1024)])
         if new else np.zeros((0, layer.m)))  # (J, m) the new words' x
    index = {w: j for j, w in enumerate(new)}
    starts = [0] + [t for t in spelled if t > 0]
    net = model.model
    base = _segments_log_prob(net, inputs, targets, starts, lambda a: None, unk)
    read = set(spelled)
    own = _segments_log_prob(net, inputs, targets, starts, lambda a: X[index[words[a]]] if a in read else None, unk)
    after = np.zeros(len(targets), bool)
    after[spelled] = True  # targets[t] is predicted right after reading inputs[t]
    return base, own, after


def oov_reading(model, inputs, targets, words, unk: int) -> dict:
    """:func:`spelled_stream` summed up: how many ``<unk>`` inputs were read by their spelling (tokens and
    distinct words), and the perplexity of every target and of the targets right after such a word,
    with the word read as ``<unk>`` and by its spelling; the fraction of those next words whose
    probability the spelling raised."""
    base, own, after = spelled_stream(model, inputs, targets, words, unk)
    inputs = np.asarray(inputs)
    k = int(after.sum())
    return {"unknown_inputs": int(np.sum(inputs == unk)), "spelled_inputs": k,
            "spelled_words": len({words[t] for t in np.flatnonzero(after)}),
            "ppl_as_unk": round(ppl(base), 3), "ppl_spelled": round(ppl(own), 3),
            "next_ppl_as_unk": round(ppl(base[after]), 3) if k else None,
            "next_ppl_spelled": round(ppl(own[after]), 3) if k else None,
            "next_spelled_higher": round(float(np.mean(own[after] > base[after])), 4) if k else None}
