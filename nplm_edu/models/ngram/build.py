"""An n-gram baseline by name, fitted and scored on a corpus (the n-gram rows of Table 1)."""

from __future__ import annotations

import math
import time

from ...errors import UserError, check_seed

MODELS = ("mle", "interp", "kn", "class")


def build_model(name: str, order: int, V: int, classes: int | None = None, passes: int = 3,
                seed: int | None = None, quiet: bool = False):
    """An unfitted model by its command-line name."""
    from .classes import ClassNgram
    from .interp import InterpolatedTrigram
    from .models import KneserNey, MaximumLikelihood

    if name == "interp":
        if order != 3:
            raise UserError("order must be 3 for the deleted-interpolation model (a trigram)", setting="order")
        return InterpolatedTrigram(V, verbose=not quiet)
    if not 2 <= order <= 5:
        raise UserError(f"order must be 2..5 (at least one context word), got {order}", setting="order")
    if name == "mle":
        return MaximumLikelihood(order, V)
    if name == "kn":
        return KneserNey(order, V)
    if name == "class":
        if classes is None:
            raise UserError("classes (the number of classes) is needed by the class model (the paper used 150, 200, "
                            "500, 1000, 2000)", setting="classes")
        if passes < 0:
            raise UserError(f"passes must be 0 or more (exchange-algorithm passes), got {passes}", setting="passes")
        if seed is not None:
            check_seed(seed)
        return ClassNgram(order, V, classes, passes=passes, seed=seed, progress=not quiet)
    raise UserError(f"unknown model {name!r}: use one of {', '.join(MODELS)}")


def evaluate(model, corpus, name: str, class_labels=None, em_iterations: int = 5, progress: bool = False) -> dict:
    """Fit on the training split (EM on validation for ``interp``), score every split; times included.
    ``progress``: bars for the counting and the scoring, on a corpus where they take over a second."""
    n = model.order
    t0 = time.perf_counter()
    if name == "interp":
        model.fit(corpus.train, valid=corpus.windows("valid", n), iterations=em_iterations)
    elif name == "class":
        model.fit(corpus.train, classes=class_labels)
    else:
        model.fit(corpus.train, progress=progress)
    fit_s = time.perf_counter() - t0
    out = {"model": name, "order": n, "classes": getattr(model, "n_classes", None), "V": corpus.V}
    for split in ("train", "valid", "test"):
        t1 = time.perf_counter()
        ppl = model.perplexity(*corpus.windows(split, n), progress=f"scoring {split}" if progress else None)
        out[split] = None if not math.isfinite(ppl) else round(ppl, 3)
        if split == "test":
            out["test_seconds"] = round(time.perf_counter() - t1, 3)
    out["fit_seconds"] = round(fit_s, 3)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out
