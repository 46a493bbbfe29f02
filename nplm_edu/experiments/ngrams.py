"""``python -m nplm_edu reproduce ngrams``: every n-gram row of Table 1 on Brown (about a minute).

Fits the deleted-interpolation trigram, modified Kneser-Ney of orders 3-5 and the class-based
models (section 4.1 of the paper) on the training split and scores every split; writes
``data/results/ngrams.json`` with the paper's numbers beside ours.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..data.corpus import CorpusSpec
from ..errors import UserError
from ..models.ngram import build_model, evaluate, exchange_classes

from .skeleton import results_file, write_whole

# the n-gram rows of Table 1 (section 4.1): (model, n, classes) -> the paper's (valid, test) perplexity
PAPER_NGRAMS = {
    ("interp", 3, None): (352, 336),
    ("kn", 3, None): (334, 323),
    ("kn", 4, None): (332, 321),
    ("kn", 5, None): (332, 321),
    ("class", 3, 150): (348, 334),
    ("class", 3, 200): (354, 340),
    ("class", 3, 500): (326, 312),
    ("class", 3, 1000): (335, 319),
    ("class", 3, 2000): (343, 326),
    ("class", 4, 500): (327, 312),
    ("class", 5, 500): (327, 312),
}




@dataclass
class NgramsOptions:
    """``classes``: class counts instead of the paper's (comma-separated, e.g. "150,500"; the first
    is also used for orders 4 and 5); ``passes``: exchange-algorithm passes."""

    classes: str | None = None
    passes: int = 3

    def class_list(self) -> list[int] | None:
        if self.classes is None:
            return None
        try:
            out = [int(x) for x in self.classes.split(",") if x.strip()]
        except ValueError:
            raise UserError(f"classes takes comma-separated integers, got {self.classes!r}",
                            setting="classes") from None
        if not out or min(out) < 1:
            raise UserError(f"classes needs positive numbers, got {self.classes!r}", setting="classes")
        return out


def ngram_rows(classes: list[int] | None = None) -> list[tuple[str, int, int | None]]:
    """Table 1's n-gram rows; ``classes`` replaces the class counts (e.g. for a small corpus)."""
    rows = list(PAPER_NGRAMS)
    if classes is not None:
        rows = [r for r in rows if r[0] != "class"] + [("class", 3, c) for c in classes]
        rows += [("class", n, classes[0]) for n in (4, 5)]
    return rows


def run_ngrams(opts: NgramsOptions | None = None, spec: CorpusSpec | None = None, out=None,
               quiet: bool = False) -> Path:
    """Fit every n-gram row of Table 1 and write ngrams.json (model, order, classes, perplexities,
    seconds, the paper's numbers beside ours)."""
    opts = opts or NgramsOptions()
    spec = spec or CorpusSpec(corpus="brown")
    started = time.monotonic()
    out = results_file(out, "ngrams")  # checked before any work
    corpus = spec.load()
    clusters: dict[int, tuple] = {}  # c -> (labels, history, seconds): one clustering per c, shared by n
    rows = []
    for name, n, c in ngram_rows(opts.class_list()):
        label = f"{name} n={n}" + (f" c={c}" if c else "")
        if not quiet:
            print(f"== {label}", flush=True)
        model = build_model(name, n, corpus.V, c, opts.passes, None, quiet=True if name == "interp" else quiet)
        labels, extra = None, 0.0
        if name == "class":
            if c not in clusters:
                t0 = time.perf_counter()
                lab, hist = exchange_classes(corpus.train, corpus.V, c, opts.passes, None, not quiet)
                clusters[c] = (lab, hist, time.perf_counter() - t0)
            labels, model.history, extra = clusters[c]
        res = evaluate(model, corpus, name, class_labels=labels)
        res["seconds"] = round(res["seconds"] + extra, 3)
        if name == "class":
            res["cluster_seconds"] = round(extra, 3)
            res["exchange_objective"] = [round(x, 1) for x in model.history]
        if name == "interp":
            res["em_valid_log_likelihood"] = [round(x, 1) for x in model.em_history]
        paper = PAPER_NGRAMS.get((name, n, c)) if corpus.name == "brown" else None  # Brown only
        res["paper_valid"], res["paper_test"] = paper if paper else (None, None)
        rows.append(res)
        if not quiet:
            print(f"   valid {res['valid']}  test {res['test']}  ({res['seconds']:.1f} s)", flush=True)
    doc = {
        "corpus": corpus.name,
        "V": corpus.V,
        "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid", "test")},
        "exchange_passes": opts.passes,
        "note": "perplexity over every token of each split; seconds = fit + scoring train, valid and test "
                "(+ clustering for class rows), wall clock on a shared 2-core machine",
        "rows": rows,
    }
    write_whole(out, "ngrams", doc, started)
    print(f"wrote {out}")
    return out
