"""A small probabilistic grammar: a corpus a network learns in seconds, whose word classes and exact
next-word probabilities are known, for first experiments and pictures.

Section 1.1 of the paper argues from sentences like "The cat is walking in the bedroom" and "A dog
was running in a room": words that play the same role (cat/dog, the/a, room/bedroom, is/was)
should get nearby feature vectors, so that having seen one sentence makes the other likely. This
grammar generates exactly such sentences, with two agreements that only a context can predict:

    [time] det noun aux verb prep det place .

* the noun's number decides the auxiliary: "the cat is" / "the cats are";
* a time word, when present, decides its tense: "yesterday ... was", "now ... is".

Every word belongs to one class (``CLASSES``), so a picture of the learned features can be coloured
by the truth. Sentences are generated with vectorized numpy draws: 30,000 tokens take milliseconds.
Because the grammar is known, so is the best any model can do on it: :func:`entropy_rate` and
:func:`window_entropy` (below) compute it exactly.
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


P_PLURAL, P_PAST = 0.4, 0.5  # a sentence's subject is plural, its tense past, with these probabilities


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

    plural = rng.random(S) < P_PLURAL
    past = rng.random(S) < P_PAST
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


def split_sentences(tokens) -> list[list[str]]:
    """The token stream cut into sentences, each with the marks that follow its full stop.

    >>> split_sentences(["a", "cat", ".", "<p>", "the", "dog", "."])
    [['a', 'cat', '.', '<p>'], ['the', 'dog', '.']]
    """
    out, cur = [], []
    for i, t in enumerate(tokens):
        cur.append(t)
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if t in (".", PARAGRAPH, TEXT) and nxt not in (PARAGRAPH, TEXT):
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


# --------------------------------------------------------------------------- the best any model can do
def _hb(p: float) -> float:
    """Entropy of a coin with probability p, in nats."""
    return 0.0 if p in (0.0, 1.0) else float(-p * np.log(p) - (1 - p) * np.log(1 - p))


def _check_rates(p_time, sentences_per_paragraph, paragraphs_per_text):
    if not 0 <= p_time <= 1:
        raise UserError(f"p_time must lie in [0, 1], got {p_time}")
    if sentences_per_paragraph < 1 or paragraphs_per_text < 1:
        raise UserError("sentences per paragraph and paragraphs per text must be at least 1")
    return 1 / sentences_per_paragraph, 1 / paragraphs_per_text


def sentence_entropy(p_time: float = 0.5, sentences_per_paragraph: float = 4.0,
                     paragraphs_per_text: float = 10.0) -> float:
    """Entropy (nats) of one sentence of :func:`generate`, marks included.

    Every random choice of a sentence can be read back from its tokens (the noun says singular or
    plural, the auxiliary says the tense, each word says which of its class was drawn), and the
    tokens are a function of the choices; so the tokens carry exactly the entropy of the choices:
    the sum of the entropies of the independent draws."""
    q, r = _check_rates(p_time, sentences_per_paragraph, paragraphs_per_text)
    L = {k: np.log(len(v)) for k, v in CLASSES.items()}
    return (_hb(P_PLURAL) + _hb(P_PAST) + _hb(p_time)
            + p_time * (P_PAST * L["time-past"] + (1 - P_PAST) * L["time-present"])
            + P_PLURAL * L["det-plural"] + (1 - P_PLURAL) * L["det-singular"]  # det
            + L["animal"] + L["verb"] + L["preposition"] + L["det-singular"] + L["place"]  # the aux is decided
            + _hb(q) + q * _hb(r))  # a paragraph mark, then a text mark


def tokens_per_sentence(p_time: float = 0.5, sentences_per_paragraph: float = 4.0,
                        paragraphs_per_text: float = 10.0) -> float:
    """Expected tokens of one sentence: det noun aux verb prep det place . (8), a time word with
    probability p_time, a paragraph mark with probability q = 1/sentences_per_paragraph, a text mark with q r."""
    q, r = _check_rates(p_time, sentences_per_paragraph, paragraphs_per_text)
    return p_time + 8 + q + q * r


def entropy_rate(p_time: float = 0.5, sentences_per_paragraph: float = 4.0,
                 paragraphs_per_text: float = 10.0) -> float:
    """The grammar's entropy per token (nats): sentences are independent, so the stream's entropy
    rate is E[entropy of a sentence] / E[tokens of a sentence]. No model can have a lower
    cross-entropy on a long sample: exp of this is the best achievable perplexity.

    >>> round(float(np.exp(entropy_rate())), 3)
    4.196
    """
    args = (p_time, sentences_per_paragraph, paragraphs_per_text)
    return sentence_entropy(*args) / tokens_per_sentence(*args)


class GrammarHMM:
    """The grammar as a hidden Markov model: one state per slot of the sentence (with the number and
    the tense it has drawn), each emitting one token. ``T`` (S, S) transitions, ``E`` ``(S, |words|)``
    emissions, ``start`` (S,) the first state of a sentence, ``pi`` (S,) the long-run state frequencies."""

    def __init__(self, p_time: float = 0.5, sentences_per_paragraph: float = 4.0, paragraphs_per_text: float = 10.0):
        q, r = _check_rates(p_time, sentences_per_paragraph, paragraphs_per_text)
        self.words = sorted({w for ws in CLASSES.values() for w in ws})
        self.index = {w: i for i, w in enumerate(self.words)}
        tenses, numbers = ((1, "time-past", "was", "were"), (0, "time-present", "is", "are")), (0, 1)
        names = [f"time{pa}" for pa, *_ in tenses] + [f"{s}{pl}{pa}" for s in ("det", "noun", "aux")
                                                      for pl in numbers for pa, *_ in tenses]
        names += ["verb", "prep", "det2", "place", "dot", "para", "text"]
        self.states = names
        S, s = len(names), {n: i for i, n in enumerate(names)}
        T, E, start = np.zeros((S, S)), np.zeros((S, len(self.words))), np.zeros(S)

        def emit(state, cls):
            for w in CLASSES[cls]:
                E[s[state], self.index[w]] += 1 / len(CLASSES[cls])

        for pa, time_cls, *aux in tenses:
            p_pa = P_PAST if pa else 1 - P_PAST
            start[s[f"time{pa}"]] = p_time * p_pa
            emit(f"time{pa}", time_cls)
            for pl in numbers:
                p_pl = P_PLURAL if pl else 1 - P_PLURAL
                start[s[f"det{pl}{pa}"]] = (1 - p_time) * p_pa * p_pl
                T[s[f"time{pa}"], s[f"det{pl}{pa}"]] = p_pl
                T[s[f"det{pl}{pa}"], s[f"noun{pl}{pa}"]] = 1
                T[s[f"noun{pl}{pa}"], s[f"aux{pl}{pa}"]] = 1
                T[s[f"aux{pl}{pa}"], s["verb"]] = 1
                emit(f"det{pl}{pa}", "det-plural" if pl else "det-singular")
                emit(f"noun{pl}{pa}", "animal-plural" if pl else "animal")
                E[s[f"aux{pl}{pa}"], self.index[aux[pl]]] = 1
        for a, b, cls in (("verb", "prep", "verb"), ("prep", "det2", "preposition"), ("det2", "place", "det-singular"),
                          ("place", "dot", "place"), ("dot", None, "punctuation"), ("para", None, "mark")):
            if b is not None:
                T[s[a], s[b]] = 1
            if cls != "mark":
                emit(a, cls)
        E[s["para"], self.index[PARAGRAPH]] = E[s["text"], self.index[TEXT]] = 1
        T[s["dot"]] = (1 - q) * start  # after the full stop: a new sentence, or a paragraph mark
        T[s["dot"], s["para"]] = q
        T[s["para"]] = (1 - r) * start  # after a paragraph mark: a new sentence, or a text mark
        T[s["para"], s["text"]] = r
        T[s["text"]] = start
        self.T, self.E, self.start = T, E, start
        w, v = np.linalg.eig(T.T)  # the long-run frequencies: the left eigenvector of T for eigenvalue 1
        pi = np.abs(np.real(v[:, np.argmin(np.abs(w - 1))]))
        self.pi = pi / pi.sum()

    def encode(self, tokens) -> np.ndarray:
        try:
            return np.array([self.index[t] for t in tokens], dtype=np.int64)
        except KeyError as e:
            raise UserError(f"{e.args[0]!r} is not a word of the grammar") from None

    def log_probs(self, tokens, from_start: bool = True) -> np.ndarray:
        """log P(w_t | every earlier token) under the grammar, for each token (T,): the forward algorithm.
        ``from_start``: the tokens begin a sentence (else: at a random point of a long stream)."""
        ids = self.encode(tokens)
        alpha = (self.start if from_start else self.pi).copy()  # P(state of w_1)
        out = np.empty(len(ids))
        for t, w in enumerate(ids):
            a = alpha * self.E[:, w]  # joint of this state and w_t, given the past  (S,)
            z = a.sum()
            out[t] = np.log(z) if z > 0 else -np.inf
            alpha = (a / z) @ self.T if z > 0 else self.pi
        return out

    def block_entropy(self, L: int) -> float:
        """H(w_1, ..., w_L) in the long run (nats), by enumerating every sequence of L tokens the grammar can emit."""
        A = self.pi[None, :]  # (N, S): joint P(prefix, state of its last token), one row per prefix
        H = 0.0
        for step in range(L):
            B = A @ self.T if step else A  # (N, S) the state of the next token
            P = B @ self.E  # (N, |words|) P(prefix + w)
            rows, cols = np.nonzero(P > 0)
            if step == L - 1:
                p = P[rows, cols]
                H = float(-(p * np.log(p)).sum())
            else:
                A = B[rows] * self.E[:, cols].T  # (N', S)
        return H


def window_entropy(k: int, p_time: float = 0.5, sentences_per_paragraph: float = 4.0,
                   paragraphs_per_text: float = 10.0) -> float:
    """H(w_t | w_{t-k}, ..., w_{t-1}) in the long run (nats): the best cross-entropy any model that sees
    only the k previous tokens can reach (an n-gram of order n = k + 1, an NPLM with n - 1 = k).
    From k = 3 on it equals :func:`entropy_rate`: three words back reach the time word that decides
    the tense of the auxiliary, and nothing depends on anything further back."""
    if k < 0 or k > 6:
        raise UserError(f"the window must hold 0 to 6 tokens, got {k}")
    hmm = GrammarHMM(p_time, sentences_per_paragraph, paragraphs_per_text)
    return hmm.block_entropy(k + 1) - (hmm.block_entropy(k) if k else 0.0)
