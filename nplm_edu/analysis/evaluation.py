"""How a trained network is scored for Table 1: perplexity alone and mixed with n-gram models, and
the test set split by the target word's training frequency (aggregates only, never per-token data).

The paper's mixture (section 4) is the network and the deleted-interpolation trigram at weight 0.5;
we also report one weight fitted by EM on validation and one EM weight per trigram context bin.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..models.ngram import InterpolatedTrigram
from ..training.guards import perplexity_of as ppl
from .mixture import Mixture, batched_log_prob, em_weight, mixed_log_prob

# frequency bins of the target word by its count in the training set (<unk> apart)
FREQ_BINS = [("0-3", 0, 3), ("4-10", 4, 10), ("11-100", 11, 100), ("101-1000", 101, 1000),
             ("1001-10000", 1001, 10000), (">10000", 10001, None)]


def r3(x):
    """Round a perplexity for a results file (None stays None)."""
    return None if x is None else round(float(x), 3)


def freq_bins(train_counts: np.ndarray, unk: int, targets: np.ndarray, logs: dict) -> list[dict]:
    """Aggregate log-probabilities of the test targets per frequency bin (no per-token data)."""
    c = train_counts[targets]
    masks = [("unk", targets == unk)]
    masks += [(name, (targets != unk) & (c >= lo) & ((c <= hi) if hi is not None else True))
              for name, lo, hi in FREQ_BINS]
    out = []
    for name, mask in masks:
        k = int(mask.sum())
        entry = {"bin": name, "tokens": k}
        entry.update({f"mean_log_prob_{m}": (round(float(v[mask].mean()), 5) if k else None) for m, v in logs.items()})
        entry["mlp_beats_trigram"] = round(float(np.mean(logs["mlp"][mask] > logs["trigram"][mask])), 4) if k else None
        out.append(entry)
    return out


def evaluate_row(model, tri, corpus, train_counts, others: dict | None = None) -> dict:
    """Perplexities of the network alone and mixed with the trigram, plus the frequency-bin table.
    ``others``: more n-gram models by name (of order at most the network's), each also mixed with the
    network by one EM weight and by EM weights per trigram bin (``mix["<name>_em"]``, ``mix["<name>_per_bin"]``)."""
    n = model.order
    out = {"train": model.perplexity(*corpus.windows("train", n), batch=1024)}
    (vc, vt), (tc, tt) = corpus.windows("valid", n), corpus.windows("test", n)
    mix = Mixture(model, tri, 0.5)
    lv, lt = mix.component_log_probs(vc, vt), mix.component_log_probs(tc, tt)  # (log P_mlp, log P_trigram)
    out["valid"], out["test"] = ppl(lv[0]), ppl(lt[0])
    qv, qt = tri.bins(vc[:, -2:]), tri.bins(tc[:, -2:])

    def fitted(ov, ot):
        """The network mixed with another model (its log-probs on valid, test): one EM weight, and EM
        weights per trigram context bin, both fitted on validation."""
        w, ws = float(em_weight(lv[0], ov)[0]), em_weight(lv[0], ov, qv, tri.n_bins)
        return ({"weight": w, "valid": ppl(mixed_log_prob(lv[0], ov, w)), "test": ppl(mixed_log_prob(lt[0], ot, w))},
                {"weights": [round(float(x), 5) for x in ws], "valid": ppl(mixed_log_prob(lv[0], ov, ws[qv])),
                 "test": ppl(mixed_log_prob(lt[0], ot, ws[qt]))})

    em, per_bin = fitted(lv[1], lt[1])
    out["mix"] = {"0.5": {"weight": 0.5, "valid": ppl(mixed_log_prob(*lv, 0.5)), "test": ppl(mixed_log_prob(*lt, 0.5))},
                  "em": em, "per_bin": per_bin}
    for name, lm in (others or {}).items():
        if lm.order > n:
            raise UserError(f"cannot mix the n = {n} network with the order-{lm.order} model {name}")
        ov, ot = batched_log_prob(lm, vc, vt), batched_log_prob(lm, tc, tt)  # (T,) log P_name
        em, per_bin = fitted(ov, ot)
        out["mix"][f"{name}_em"] = {**em, "alone_valid": ppl(ov), "alone_test": ppl(ot)}
        out["mix"][f"{name}_per_bin"] = per_bin
    logs = {"mlp": lt[0], "trigram": lt[1], "mix": mixed_log_prob(*lt, 0.5)}
    out["test_by_frequency"] = freq_bins(train_counts, corpus.vocab.unk, tt, logs)
    return out


def fit_trigram(corpus, doc: dict, full_brown: bool):
    """The deleted-interpolation trigram (section 4.1), fitted once per run; its perplexities go in doc."""
    tri = InterpolatedTrigram(corpus.V, verbose=False).fit(corpus.train, valid=corpus.windows("valid", 3), iterations=5)
    doc["trigram"] = {s: r3(tri.perplexity(*corpus.windows(s, 3))) for s in ("train", "valid", "test")}
    paper = (31, 352, 336) if full_brown else (None, None, None)  # Table 1's "Del. Int." row
    doc["trigram"]["paper"] = dict(zip(("train", "valid", "test"), paper))
    return tri, np.bincount(corpus.train, minlength=corpus.V)
