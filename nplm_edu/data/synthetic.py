"""A small probabilistic grammar with known word classes, for quick runs, tests and pictures.

Section 1.1 of the paper argues from sentences like "The cat is walking in the bedroom" and "A dog
was running in a room": words that play the same role (cat/dog, the/a, room/bedroom, is/was)
should get nearby feature vectors, so that having seen one sentence makes the other likely. This
grammar generates exactly such sentences, with two agreements that only a context can predict:

    [time] det noun aux verb prep det place .

* the noun's number decides the auxiliary: "the cat is" / "the cats are";
* a time word, when present, decides its tense: "yesterday ... was", "now ... is".

Every word belongs to one class (``CLASSES``), so a picture of the learned features can be coloured
by the truth. Sentences are generated with vectorized numpy draws: 30,000 tokens take milliseconds.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError, check_seed
from .vocab import PARAGRAPH, TEXT

# class name -> words. Order matters only for reproducibility of the draws.
CLASSES: dict[str, list[str]] = {
    "det-singular": ["a", "the", "one", "every"],
    "det-plural": ["the", "some", "two", "many"],
    "animal": ["cat", "dog", "horse", "mouse", "bird", "rabbit"],
    "animal-plural": ["cats", "dogs", "horses", "mice", "birds", "rabbits"],
    "aux-present": ["is", "are"],
    "aux-past": ["was", "were"],
    "verb": ["walking", "running", "sleeping", "sitting", "playing", "eating"],
    "preposition": ["in", "near", "behind", "outside"],
    "place": ["room", "bedroom", "kitchen", "garden", "house", "park"],
    "time-present": ["now", "today"],
    "time-past": ["yesterday", "then"],
    "punctuation": ["."],
    "mark": [PARAGRAPH, TEXT],
}


def word_classes() -> dict[str, str]:
    """word -> class name. "the" is listed under det-singular (it is both)."""
    out: dict[str, str] = {}
    for cls, words in CLASSES.items():
        for w in words:
            out.setdefault(w, cls)
    return out


def generate(n_tokens: int = 30_000, seed: int = 0,
             p_time: float = 0.5, sentences_per_paragraph: float = 4.0,
             paragraphs_per_text: float = 10.0) -> tuple[list[str], dict[str, str]]:
    """``n_tokens`` tokens of the grammar (whole sentences, then cut) and the word classes.

    >>> toks, classes = generate(40, seed=1)
    >>> len(toks), classes["cat"], classes["was"]
    (40, 'animal', 'aux-past')
    """
    if n_tokens < 1:
        raise UserError(f"the synthetic corpus needs at least 1 token, got {n_tokens}")
    check_seed(seed, "the synthetic corpus seed")
    rng = np.random.default_rng(seed)
    S = n_tokens // 8 + 2  # sentences: about 9.5 tokens each, so this always suffices
    C = {k: np.array(v, dtype=object) for k, v in CLASSES.items()}

    def pick(cls, size):
        return C[cls][rng.integers(len(C[cls]), size=size)]

    plural = rng.random(S) < 0.4
    past = rng.random(S) < 0.5
    has_time = rng.random(S) < p_time
    time = np.where(past, pick("time-past", S), pick("time-present", S))
    det = np.where(plural, pick("det-plural", S), pick("det-singular", S))
    noun_i = rng.integers(len(C["animal"]), size=S)
    noun = np.where(plural, C["animal-plural"][noun_i], C["animal"][noun_i])
    aux = np.where(past, np.where(plural, "were", "was"), np.where(plural, "are", "is")).astype(object)
    det2 = pick("det-singular", S)
    end_para = rng.random(S) < 1 / sentences_per_paragraph
    end_text = end_para & (rng.random(S) < 1 / paragraphs_per_text)

    none = np.full(S, None, dtype=object)
    table = np.stack([
        np.where(has_time, time, none), det, noun, aux, pick("verb", S), pick("preposition", S),
        det2, pick("place", S), np.full(S, ".", dtype=object),
        np.where(end_para, PARAGRAPH, none), np.where(end_text, TEXT, none),
    ], axis=1)  # (S, 11): one sentence per row, None where a slot is empty
    flat = table.ravel()
    tokens = flat[flat != None].tolist()  # noqa: E711 (elementwise comparison with None)
    return tokens[:n_tokens], word_classes()
