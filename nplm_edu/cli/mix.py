"""``python -m nplm_edu mix``: a trained network mixed with the interpolated trigram (Table 1's "mix")."""

from __future__ import annotations

import math
import sys

import numpy as np

from ..analysis.mixture import mixture_report
from ..errors import UserError
from ..models.ngram import InterpolatedTrigram
from ..training.checkpoint import corpus_fingerprints, load_checkpoint, model_from_checkpoint
from .corpus import add_corpus_args, check_json_out, corpus_from_args, corpus_input, write_json_out


def _cmd_mix(args) -> int:
    check_json_out(args.json, {"CHECKPOINT": args.checkpoint, **corpus_input(args)})  # before the fit and scoring
    model = model_from_checkpoint(args.checkpoint)
    corpus = corpus_from_args(args)
    if corpus.V != model.V:
        raise UserError(f"the checkpoint's model has |V| = {model.V} but corpus {args.corpus!r} has {corpus.V} words")
    if load_checkpoint(args.checkpoint)[0].get("data") not in corpus_fingerprints(corpus, model.order):
        raise UserError(f"{args.checkpoint} was trained on other data (another corpus, split or vocabulary): "
                        "mix it on the corpus it was trained on, with the same corpus options")
    say = (lambda text: None) if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    say(f"fitting the deleted-interpolation trigram on {len(corpus.train):,} training tokens "
        f"(its weights by EM on {len(corpus.valid):,} validation tokens)")
    tri = InterpolatedTrigram(corpus.V, verbose=False).fit(corpus.train, valid=corpus.windows("valid", 3),
                                                           iterations=args.em_iterations)
    say(f"scoring {len(corpus.valid):,} validation and {len(corpus.test):,} test tokens with both models")
    with np.errstate(all="ignore"):
        report = mixture_report(model, tri, corpus.windows("valid", model.order), corpus.windows("test", model.order),
                                progress=not args.quiet)
    bad = [name for name, r in report["perplexity"].items() if not all(math.isfinite(v) for v in r.values())]
    if bad:
        raise UserError(f"the network of {args.checkpoint} gives non-finite perplexities ({', '.join(bad)}): its "
                        "parameters are unusable (a diverged run?)")
    print(f"{'model':14} {'valid':>9} {'test':>9}")
    for name, r in report["perplexity"].items():
        print(f"{name:14} {r['valid']:9.2f} {r['test']:9.2f}")
    print(f"EM weight of the network: {report['weights']['mix EM']:.3f}")
    write_json_out(args.json, dict(report, checkpoint=str(args.checkpoint), corpus=args.corpus))
    return 0


def add_cli(subparsers) -> None:
    """``python -m nplm_edu mix``: a trained network mixed with the interpolated trigram (Table 1's "mix")."""
    p = subparsers.add_parser("mix", help="mix a trained network with the interpolated trigram",
                              description="Perplexities of a trained NPLM, the deleted-interpolation trigram, "
                                          "and their mixtures (weight 0.5, EM weight, EM weights per bin).")
    p.add_argument("checkpoint", help="checkpoint.npz written by the train command (its best parameters are used)")
    add_corpus_args(p)
    p.add_argument("--em-iterations", type=int, default=5, help="EM iterations of the trigram's own weights (default 5)")
    p.add_argument("--json", metavar="PATH", default=None, help="also write the report to this JSON file")
    p.add_argument("--quiet", action="store_true", help="no progress lines or bars")
    p.set_defaults(func=_cmd_mix)
