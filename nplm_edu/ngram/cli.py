"""``python -m nplm_edu ngram``: fit one n-gram baseline on a corpus, print its perplexities.

    python -m nplm_edu ngram --corpus brown --model kn --order 5
    python -m nplm_edu ngram --corpus brown --model interp
    python -m nplm_edu ngram --corpus brown --model class --classes 500 --order 3 --json out.json
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from ..errors import UserError, check_seed

MODELS = ("mle", "interp", "kn", "class")


def build_model(name: str, order: int, V: int, classes: int | None = None, passes: int = 3,
                seed: int | None = None, quiet: bool = False):
    """An unfitted model by its command-line name."""
    from .classes import ClassNgram
    from .interp import InterpolatedTrigram
    from .models import KneserNey, MaximumLikelihood

    if name == "interp":
        if order != 3:
            raise UserError("the deleted-interpolation model is a trigram: use --order 3")
        return InterpolatedTrigram(V, verbose=not quiet)
    if not 2 <= order <= 5:
        raise UserError(f"--order must be 2..5 (at least one context word), got {order}")
    if name == "mle":
        return MaximumLikelihood(order, V)
    if name == "kn":
        return KneserNey(order, V)
    if name == "class":
        if classes is None:
            raise UserError("--model class needs --classes C (the paper used 150, 200, 500, 1000, 2000)")
        if passes < 0:
            raise UserError(f"--passes must be 0 or more (exchange-algorithm passes), got {passes}")
        if seed is not None:
            check_seed(seed, "--seed")
        return ClassNgram(order, V, classes, passes=passes, seed=seed, progress=not quiet)
    raise UserError(f"unknown model {name!r}: use one of {', '.join(MODELS)}")


def evaluate(model, corpus, name: str, class_labels=None, em_iterations: int = 5) -> dict:
    """Fit on the training split (EM on validation for ``interp``), score every split; times included."""
    n = model.order
    t0 = time.perf_counter()
    if name == "interp":
        model.fit(corpus.train, valid=corpus.windows("valid", n), iterations=em_iterations)
    elif name == "class":
        model.fit(corpus.train, classes=class_labels)
    else:
        model.fit(corpus.train)
    fit_s = time.perf_counter() - t0
    out = {"model": name, "order": n, "classes": getattr(model, "n_classes", None), "V": corpus.V}
    for split in ("train", "valid", "test"):
        t1 = time.perf_counter()
        ppl = model.perplexity(*corpus.windows(split, n))
        out[split] = None if not math.isfinite(ppl) else round(ppl, 3)
        if split == "test":
            out["test_seconds"] = round(time.perf_counter() - t1, 3)
    out["fit_seconds"] = round(fit_s, 3)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def _cmd_ngram(args) -> int:
    from ..corpus import corpus_from_args

    corpus = corpus_from_args(args)
    order = args.order if args.order is not None else 3 if args.model in ("interp", "class") else 5
    model = build_model(args.model, order, corpus.V, args.classes, args.passes, args.seed, args.quiet)
    res = evaluate(model, corpus, args.model, em_iterations=args.em_iterations)
    res["corpus"] = corpus.name
    label = {"mle": "maximum likelihood", "interp": "deleted interpolation", "kn": "modified Kneser-Ney",
             "class": f"class-based ({args.classes} classes), Kneser-Ney on classes"}[args.model]
    report = sys.stderr if args.json == "-" else sys.stdout  # with --json -, stdout is the JSON alone
    print(f"{label}, order {order}, {corpus.name} (|V| = {corpus.V:,})", file=report)
    for split in ("train", "valid", "test"):
        ppl = res[split]
        print(f"  {split:<5} perplexity {'inf (a zero probability)' if ppl is None else f'{ppl:.2f}'}", file=report)
    print(f"  time: fit {res['fit_seconds']:.2f} s, test evaluation {res['test_seconds']:.2f} s, "
          f"total {res['seconds']:.2f} s", file=report)
    if args.json:
        text = json.dumps(res, indent=2) + "\n"
        if args.json == "-":
            print(text, end="")
        else:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(text)
            print(f"wrote {args.json}")
    return 0


def add_cli(subparsers) -> None:
    from ..corpus import add_corpus_args

    p = subparsers.add_parser("ngram", help="fit an n-gram baseline and print its perplexities",
                              description="Fit an n-gram baseline (Table 1 of the paper) on the training split "
                                          "and print train/valid/test perplexity and the time taken.")
    add_corpus_args(p)
    p.add_argument("--model", choices=MODELS, default="kn",
                   help="mle (maximum likelihood), interp (deleted interpolation, section 4.1), "
                        "kn (interpolated modified Kneser-Ney, default), class (class-based)")
    p.add_argument("--order", type=int, default=None, help="n (default 5 for kn and mle, 3 for interp and class)")
    p.add_argument("--classes", type=int, default=None, help="number of word classes (--model class)")
    p.add_argument("--passes", type=int, default=3, help="exchange-algorithm passes (--model class, default 3)")
    p.add_argument("--seed", type=int, default=None,
                   help="random initial classes (default: frequency round-robin, no randomness)")
    p.add_argument("--em-iterations", type=int, default=5, help="EM iterations (--model interp, default 5)")
    p.add_argument("--json", metavar="PATH", default=None, help="also write the results as JSON ('-': stdout)")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no EM log")
    p.set_defaults(func=_cmd_ngram)
