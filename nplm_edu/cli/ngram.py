"""``python -m nplm_edu ngram``: fit one n-gram baseline on a corpus, print its perplexities.

    python -m nplm_edu ngram --corpus brown --model kn --order 5
    python -m nplm_edu ngram --corpus brown --model interp
    python -m nplm_edu ngram --corpus brown --model class --classes 500 --order 3 --json out.json
"""

from __future__ import annotations

import json
import sys

from ..errors import UserError, flag
from ..models.ngram.build import MODELS, build_model, evaluate
from .corpus import add_corpus_args, check_json_out, corpus_from_args, corpus_input, write_json_out


# the options of one model only (default None: given or not is known), refused with any other model
MODEL_OPTIONS = {"classes": "class", "seed": "class", "em_iterations": "interp"}


def _check_options(args) -> None:
    """Before any work: options of another model are refused (not silently ignored), counts checked."""
    wrong: dict[str, list[str]] = {}  # model -> its options given with another model
    for name, owner in MODEL_OPTIONS.items():
        if getattr(args, name) is not None and args.model != owner:
            wrong.setdefault(owner, []).append(flag(name))
    if wrong:
        raise UserError("; ".join(f"{' and '.join(flags)} {'is' if len(flags) == 1 else 'are'} for --model {owner} only"
                                  for owner, flags in wrong.items()))
    if args.em_iterations is not None and args.em_iterations < 0:
        raise UserError(f"--em-iterations must be 0 or more, got {args.em_iterations}")


def _cmd_ngram(args) -> int:
    _check_options(args)
    if args.json != "-":  # '-': stdout
        check_json_out(args.json, corpus_input(args))  # before the fit
    corpus = corpus_from_args(args)
    order = args.order if args.order is not None else 3 if args.model in ("interp", "class") else 5
    model = build_model(args.model, order, corpus.V, args.classes, args.passes, args.seed, args.quiet)
    em = {} if args.em_iterations is None else {"em_iterations": args.em_iterations}  # else evaluate's default
    res = evaluate(model, corpus, args.model, progress=not args.quiet, **em)
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
    if args.json == "-":
        print(json.dumps(res, indent=2))
    else:
        write_json_out(args.json, res)
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("ngram", help="fit an n-gram baseline and print its perplexities",
                              description="Fit an n-gram baseline (Table 1 of the paper) on the training split "
                                          "and print train/valid/test perplexity and the time taken.")
    add_corpus_args(p)
    p.add_argument("--model", choices=MODELS, default="kn",
                   help="mle (maximum likelihood), interp (deleted interpolation, section 4.1), "
                        "kn (interpolated modified Kneser-Ney, default), class (class-based)")
    p.add_argument("--order", type=int, default=None, help="n (default 5 for kn and mle, 3 for interp and class)")
    p.add_argument("--classes", type=int, default=None, help="number of word classes (required with --model class)")
    p.add_argument("--passes", type=int, default=3, help="exchange-algorithm passes (--model class, default 3)")
    p.add_argument("--seed", type=int, default=None,
                   help="random initial classes (default: frequency round-robin, no randomness)")
    p.add_argument("--em-iterations", type=int, default=None, help="EM iterations (--model interp only; default 5)")
    p.add_argument("--json", metavar="PATH", default=None, help="also write the results as JSON ('-': stdout)")
    p.add_argument("--quiet", action="store_true", help="no progress bars, no EM log")
    p.set_defaults(func=_cmd_ngram)
