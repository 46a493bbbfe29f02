"""Mixing the neural model with the interpolated trigram (section 4, the "mix" column of Table 1).

    P(w_t | context) = lam P_a(w_t | context) + (1 - lam) P_b(w_t | context)

Three ways to choose lam, as the paper describes: a fixed 0.5; one weight fitted by EM on the
validation set; one weight per context-frequency bin q_t (the bins of the deleted-interpolation
trigram, section 4.1), each fitted by EM on the validation tokens of its bin.

EM for a mixture weight (each step can only raise the validation likelihood)::

    E: r_t = lam P_a(t) / (lam P_a(t) + (1 - lam) P_b(t))   (responsibility of model a)
    M: lam = mean_t r_t      (per bin: the mean over the tokens of that bin)

Everything works in log space on the component log-probabilities, computed once.
Works with any two LanguageModels; the bins come from ``bins(contexts) -> (K,) int`` and
``n_bins`` (the trigram has them), or from any callable.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from ..models.lm import LanguageModel
from ..progress import progress_bar
from ..training.guards import perplexity_of as ppl


def _cut(contexts: np.ndarray, model) -> np.ndarray:
    """The last n-1 columns of the contexts: what a model of order n reads."""
    k = model.order - 1
    return contexts[:, contexts.shape[1] - k:]


def em_weight(log_pa: np.ndarray, log_pb: np.ndarray, bins: np.ndarray | None = None, n_bins: int = 1,
              iters: int = 100, tol: float = 1e-9, init: float = 0.5) -> np.ndarray:
    """EM for lam (one per bin): returns an array (n_bins,) of weights of model a in [0, 1].

    ``log_pa``, ``log_pb``: (T,) log-probabilities of the same tokens under the two models. A bin
    without tokens keeps ``init``."""
    log_pa, log_pb = np.asarray(log_pa, np.float64), np.asarray(log_pb, np.float64)
    bins = np.zeros(len(log_pa), np.int64) if bins is None else np.asarray(bins, np.int64)
    counts = np.bincount(bins, minlength=n_bins).astype(np.float64)
    lam = np.full(n_bins, init)
    diff = log_pb - log_pa  # log(P_b / P_a)
    for _ in range(iters):
        l = lam[bins]
        with np.errstate(divide="ignore"):
            # r = lam Pa / (lam Pa + (1-lam) Pb) = 1 / (1 + (1-lam)/lam * Pb/Pa), in log space
            r = 1.0 / (1.0 + np.exp(np.clip(np.log1p(-l) - np.log(l) + diff, -700, 700)))
        new = np.where(counts > 0, np.bincount(bins, weights=r, minlength=n_bins) / np.maximum(counts, 1), lam)
        done = np.max(np.abs(new - lam)) < tol
        lam = new
        if done:
            break
    return lam


def batched_log_prob(lm: LanguageModel, contexts, targets, batch: int = 1024, progress: str | None = None) -> np.ndarray:
    """log P(w_t | context) under ``lm`` for every window, ``batch`` windows at a time: (T,) float64.
    The contexts may be longer than the model reads (its last order - 1 columns are used).
    ``progress``: a bar of that name, shown once scoring has taken a second."""
    contexts = np.asarray(contexts)
    if not len(targets):
        return np.zeros(0)
    out = []
    with progress_bar(total=len(targets), desc=progress, unit="token", unit_scale=True, delay=1, leave=False,
                      disable=progress is None) as bar:
        for i in range(0, len(targets), batch):
            out.append(lm.log_prob(_cut(contexts[i:i + batch], lm), targets[i:i + batch]))
            bar.update(len(out[-1]))
    return np.concatenate(out).astype(np.float64)


def mixed_log_prob(log_pa: np.ndarray, log_pb: np.ndarray, lam) -> np.ndarray:
    """log(lam P_a + (1 - lam) P_b) elementwise, stable; lam a scalar or an array like log_pa."""
    lam = np.asarray(lam, np.float64)
    with np.errstate(divide="ignore"):
        return np.logaddexp(np.log(lam) + log_pa, np.log1p(-lam) + log_pb)


class Mixture(LanguageModel):
    """lam P_a + (1 - lam) P_b with one weight, or one weight per bin of ``bins(contexts)``."""

    def __init__(self, a: LanguageModel, b: LanguageModel, weights=0.5, bins=None):
        if a.V != b.V:
            raise UserError(f"cannot mix models over different vocabularies ({a.V} and {b.V} words)")
        self.a, self.b = a, b
        self.V, self.order = a.V, max(a.order, b.order)
        self.weights = np.atleast_1d(np.asarray(weights, np.float64))
        if np.any((self.weights < 0) | (self.weights > 1)):
            raise UserError("mixture weights must lie in [0, 1]")
        if len(self.weights) > 1 and bins is None:
            raise UserError("weights per bin need a bins(contexts) function")
        self.bins = bins

    def _lam(self, contexts: np.ndarray) -> np.ndarray:
        if len(self.weights) == 1:
            return np.full(len(contexts), self.weights[0])
        return self.weights[np.asarray(self.bins(contexts))]

    def component_log_probs(self, contexts, targets, batch: int = 1024,
                            progress: tuple[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(log P_a, log P_b) of every target, in batches: (T,), (T,); ``progress``: the names of
        two bars, one per model."""
        pa, pb = progress or (None, None)
        return (batched_log_prob(self.a, contexts, targets, batch, pa),
                batched_log_prob(self.b, contexts, targets, batch, pb))

    def probs(self, contexts: np.ndarray) -> np.ndarray:
        contexts = np.asarray(contexts)
        lam = self._lam(contexts)[:, None]
        return lam * self.a.probs(_cut(contexts, self.a)) + (1 - lam) * self.b.probs(_cut(contexts, self.b))

    def log_prob(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        contexts = np.asarray(contexts)
        la, lb = self.component_log_probs(contexts, targets)
        return mixed_log_prob(la, lb, self._lam(contexts))

    @classmethod
    def fit(cls, a: LanguageModel, b: LanguageModel, contexts, targets, per_bin: bool = False,
            bins=None, n_bins: int | None = None) -> "Mixture":
        """Weights fitted by EM on (validation) windows: one weight, or one per bin (``bins``
        defaults to ``b.bins`` and ``n_bins`` to ``b.n_bins``, as the trigram provides)."""
        contexts = np.asarray(contexts)
        tmp = cls(a, b)
        la, lb = tmp.component_log_probs(contexts, targets)
        if not per_bin:
            return cls(a, b, em_weight(la, lb)[0])
        if bins is None and hasattr(b, "bins"):
            bins, n_bins = (lambda c: b.bins(_cut(c, b))), (n_bins if n_bins is not None else b.n_bins)
        if bins is None or n_bins is None:
            raise UserError("weights per bin need bins(contexts) and n_bins (the trigram's context-frequency bins)")
        return cls(a, b, em_weight(la, lb, np.asarray(bins(contexts)), n_bins), bins=bins)


def mixture_report(neural: LanguageModel, ngram: LanguageModel, valid, test, per_bin: bool | None = None,
                   progress: bool = False) -> dict:
    """Perplexities on (valid, test) windows of: each model alone, the 0.5 mix, the EM-fitted single
    weight, and (if the n-gram has bins) weights per bin. All weights are fitted on ``valid``.
    ``progress``: a bar for each model's scoring of each split."""
    (vc, vt), (tc, tt) = valid, test
    if per_bin is None:
        per_bin = hasattr(ngram, "bins") and hasattr(ngram, "n_bins")
    fixed = Mixture(neural, ngram, 0.5)
    bars = (lambda split: (f"{split}: network", f"{split}: n-gram")) if progress else (lambda split: None)
    lv = fixed.component_log_probs(vc, vt, progress=bars("valid"))
    lt = fixed.component_log_probs(tc, tt, progress=bars("test"))

    lam = em_weight(*lv)[0]
    rows = {"neural": (ppl(lv[0]), ppl(lt[0])), "ngram": (ppl(lv[1]), ppl(lt[1])),
            "mix 0.5": (ppl(mixed_log_prob(*lv, 0.5)), ppl(mixed_log_prob(*lt, 0.5))),
            "mix EM": (ppl(mixed_log_prob(*lv, lam)), ppl(mixed_log_prob(*lt, lam)))}
    out = {"weights": {"mix 0.5": 0.5, "mix EM": float(lam)}}
    if per_bin:
        qv = np.asarray(ngram.bins(_cut(np.asarray(vc), ngram)))
        qt = np.asarray(ngram.bins(_cut(np.asarray(tc), ngram)))
        lams = em_weight(*lv, qv, ngram.n_bins)
        rows["mix per bin"] = (ppl(mixed_log_prob(*lv, lams[qv])), ppl(mixed_log_prob(*lt, lams[qt])))
        out["weights"]["mix per bin"] = lams.tolist()
    out["perplexity"] = {k: {"valid": v[0], "test": v[1]} for k, v in rows.items()}
    return out
