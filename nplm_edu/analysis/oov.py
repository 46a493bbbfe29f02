"""Out-of-vocabulary words (section 5 of the paper): a feature vector for a word the network never saw.

A word j outside the vocabulary has no row in C: the vocabulary rule made it ``<unk>``, and every
such word shares ``<unk>``'s row. Section 5 proposes to give j the features the network *expects*
at the place where j occurs:

    C(j) = sum_i C(i) P(i | w_{t-n+1}, ..., w_{t-1})        (the context before j)

the average of the known words' features, weighted by how probable each is there
(:func:`expected_features`; here each new word gets those of its first occurrence). j can then be
used as context: the next words are predicted from C(j) instead of C(<unk>)
(:func:`log_prob_with_rows`). The paper also adds j to the output vocabulary and renormalises;
that needs output weights for j, which the formula does not give for this network, so here j is
still predicted as ``<unk>``: the probabilities stay over the same |V| outcomes and compare directly.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..models.nplm import NPLM


def expected_features(model, contexts: np.ndarray) -> np.ndarray:
    """sum_i C(i) P(i | context) for each context (K, n-1): (K, m) float64."""
    contexts = np.asarray(contexts)
    if contexts.ndim != 2 or not len(contexts):
        raise UserError("expected features need at least one context (K, n-1)")
    C = model.params["C"].astype(np.float64)  # (|V|, m)
    return np.concatenate([model.probs(contexts[i:i + 1024]) @ C for i in range(0, len(contexts), 1024)])


def log_prob_with_rows(model, contexts: np.ndarray, targets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """log P(w_t | context) (K,) where context ids |V|, |V|+1, ... stand for new words whose features
    are ``rows`` (J, m): the network with its table C extended by those rows (targets stay in 0..|V|-1)."""
    C = model.params["C"]
    rows = np.asarray(rows, dtype=C.dtype).reshape(-1, C.shape[1])
    contexts, targets = np.asarray(contexts), np.asarray(targets)
    if contexts.size and (contexts.min() < 0 or contexts.max() >= model.V + len(rows)):
        raise UserError(f"context ids must lie in 0..{model.V + len(rows) - 1}")
    out = []
    try:
        model.params["C"] = np.concatenate([C, rows])  # (|V| + J, m)
        for i in range(0, len(targets), 1024):
            inputs = NPLM.forward(model, contexts[i:i + 1024])["inputs"]  # x = (C(w_{t-1}), ...), a = tanh(d + Hx)
            out.append(model.output.log_prob(model.params, inputs, targets[i:i + 1024]))
    finally:
        model.params["C"] = C
    return np.concatenate(out) if out else np.zeros(0)


def oov_study(model, ids: np.ndarray, words: list[str], unk: int, first: int | None = None,
              rng: np.random.Generator | None = None) -> dict:
    """Section 5's rule on the words a vocabulary mapped to ``unk``.

    ``ids``: the id stream; ``words``: the original token at each position (the same length).
    Each unknown word j seen at least twice gets C(j) from its FIRST occurrence's context only;
    at its later occurrences, the n-1 tokens that follow (those with j in their context) are scored
    three ways: with C(<unk>) (the network as trained), with C(j), and with the C(j') of another
    unknown word j' (a control: does the word's own vector matter, or any change of <unk>'s?).
    ``first``: only positions before it may be first occurrences (e.g. the end of the training set).
    Returns the per-token mean log-probabilities, token and word counts, and C(j) of each word."""
    ids = np.asarray(ids)
    if len(words) != len(ids):
        raise UserError("ids and words must have the same length")
    k = model.order - 1
    pos = np.flatnonzero(ids == unk)
    seen: dict[str, list[int]] = {}
    for p in pos:
        if p >= k:
            seen.setdefault(words[p], []).append(int(p))
    names = [w for w, ps in seen.items() if len(ps) >= 2 and (first is None or ps[0] < first)]
    if not names:
        raise UserError("no unknown word occurs twice: nothing to study")
    rows = expected_features(model, np.stack([ids[seen[w][0] - k:seen[w][0]] for w in names]))  # (J, m)
    rng = rng or np.random.default_rng(0)
    other = rng.permutation(len(names))
    while len(names) > 1 and np.any(other == np.arange(len(names))):  # j' is never j
        other = rng.permutation(len(names))
    ctx, tgt, own, ctl = [], [], [], []
    for j, w in enumerate(names):
        for p in seen[w][1:]:
            for t in range(p + 1, min(p + 1 + k, len(ids))):  # j sits in the context of these
                c = ids[t - k:t].astype(np.int64)
                if np.sum(c == unk) != 1:  # only windows whose one unknown word is j
                    continue
                ctx.append(c), tgt.append(ids[t]), own.append(j), ctl.append(other[j])
    if not tgt:
        raise UserError("no later occurrence has a scorable window")
    ctx, tgt, own, ctl = np.array(ctx), np.array(tgt), np.array(own), np.array(ctl)
    base = model.log_prob(ctx, tgt)
    with_own = log_prob_with_rows(model, np.where(ctx == unk, model.V + own[:, None], ctx), tgt, rows)
    with_other = log_prob_with_rows(model, np.where(ctx == unk, model.V + ctl[:, None], ctx), tgt, rows)
    return {"words": len(names), "tokens": int(len(tgt)), "mean_log_prob_unk": float(base.mean()),
            "mean_log_prob_own": float(with_own.mean()), "mean_log_prob_other": float(with_other.mean()),
            "own_better": float(np.mean(with_own > base)), "features": dict(zip(names, rows))}
