"""Words read by their spelling (Kim et al. 2016): vectors and scores for words outside the vocabulary.

A network whose input layer is character-aware (:class:`~nplm_edu.models.char_input.CharInput`
under :class:`~nplm_edu.models.input.WithInput`) gives every string a vector x, by the spelling
rules of :mod:`nplm_edu.models.char_input`. A word the vocabulary rule turned into ``<unk>`` can
then be read as itself: :func:`spelled_log_prob` scores the words that follow it with its own
vector in the context (the comparison of the paper's section 5 in :mod:`nplm_edu.analysis.oov`,
with the vector from the spelling instead of from the context's expectation); as there, it is still predicted as
``<unk>``, the output layer's |V| outcomes unchanged. :func:`nearest_by_spelling` lists the
vocabulary words whose vectors are closest to a string's (Kim et al.'s table 6), and
:func:`input_sizes` counts the input layer's parameters against a table C's.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..models.char_input import CharInput
from .oov import log_prob_with_rows


def _char_input(model) -> CharInput:
    layer = getattr(model, "input", None)
    if not isinstance(layer, CharInput):
        raise UserError("this needs a network whose input layer reads spellings (a character-aware input)")
    return layer


def spelled_log_prob(model, contexts: np.ndarray, targets: np.ndarray, new_words: list[str]) -> np.ndarray:
    """log P(w_t | context) (K,) where context ids |V|, |V| + 1, ... stand for ``new_words`` (strings
    outside the vocabulary), each read through its spelling; targets stay in 0..|V|-1."""
    layer = _char_input(model)
    contexts = np.asarray(contexts)
    known = contexts[contexts < model.V]
    model.fill(known)  # the known words' rows of C from their spellings
    rows = layer.vectors(model.params, new_words)  # (J, m)
    return log_prob_with_rows(model.model, contexts, targets, rows)


def nearest_by_spelling(model, word: str, vocab_words: list[str], k: int = 5) -> list[tuple[str, float]]:
    """The k vocabulary words whose input vectors have the largest cosine with ``word``'s (any string)."""
    layer = _char_input(model)
    X = np.concatenate([layer.vectors(model.params, vocab_words[i:i + 1024])
                        for i in range(0, len(vocab_words), 1024)]).astype(np.float64)  # (|V|, m)
    q = layer.vectors(model.params, [word])[0].astype(np.float64)  # (m,)
    cos = X @ q / np.maximum(np.linalg.norm(X, axis=1) * np.linalg.norm(q), 1e-12)  # (|V|,)
    best = np.argsort(-cos, kind="stable")[:k]
    return [(vocab_words[i], round(float(cos[i]), 4)) for i in best]


def input_sizes(layer: CharInput, V: int) -> dict:
    """The input layer's parameters against a look-up table of |V| rows of the same width m."""
    return {"char_input": layer.num_params(), "table_C": V * layer.m, "m": layer.m, "V": V,
            "ratio": round(V * layer.m / layer.num_params(), 2)}
