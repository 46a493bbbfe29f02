"""``python -m nplm_edu reproduce TARGET``: rerun the experiments behind the book's tables.

Each target is its own subcommand with only its own options, their defaults read from the
experiment's configuration dataclasses; each writes one JSON file under ``data/results/``
(:mod:`nplm_edu.experiments`), with the command and the git commit of the code.

    python -m nplm_edu reproduce ngrams             # every n-gram row of Table 1, on Brown (about a minute)
    python -m nplm_edu reproduce table1             # the neural rows MLP1-MLP10 on Brown (hours, resumable)
    python -m nplm_edu reproduce table1 --quick     # the same pipeline on a slice (minutes)
    python -m nplm_edu reproduce minibatch          # K = 1 against minibatches on a Brown slice (about 11 minutes, resumable)
    python -m nplm_edu reproduce beyond             # beyond the paper: a larger network, longer, mixed by EM (about an hour, resumable)
    python -m nplm_edu reproduce lr-sweep           # eps_0 of minibatch SGD on a Brown slice (about 6 minutes)
    python -m nplm_edu reproduce output-layers      # MLP9 with each cheaper output layer and sampled objective (resumable)
    python -m nplm_edu reproduce recurrent          # after 2003: recurrent models against the NPLM, by the protocol (CPU hours)
    python -m nplm_edu reproduce central-claim      # unseen sentences made likely by similar words (hours)
"""

from __future__ import annotations

from ..experiments import beyond, central_claim, lr_sweep, minibatch, ngrams, output_layers, recurrent, table1
from ..models.nplm import NPLMConfig
from ..training.trainer import TrainConfig
from ..experiments.common import default_results
from ..experiments.output_methods import EXPLICIT
from ..experiments.skeleton import check_not_over
from .corpus import add_corpus_args, corpus_input, corpus_spec
from .options import add_options, description, from_options
from .train import HELP

# where a target checkpoints when --runs-dir is not given (experiments.common.runs_root)
RUNS_DEFAULT = "(default $NPLM_EDU_RUNS or ~/.cache/nplm_edu/runs)"

TARGETS = ("ngrams", "table1", "minibatch", "beyond", "lr-sweep", "output-layers", "recurrent", "central-claim")


def _outs(name: str) -> str:
    """The default output files of a target, as its --out help says them."""
    return f"{default_results(name)}; {default_results(name, True)} with --quick"


def _quick(name: str) -> str:
    return str(default_results(name, True))


def _target(sub, name: str, handler, default_out: str, brown_slice: tuple[int, int] | None = None, **texts):
    """The subcommand of target ``name`` (``texts``: its help and description) with the options every
    target reading a corpus shares (the corpus, --out, --quiet), running ``handler`` after the shared
    check (:func:`_checked`); the caller adds the target's own options."""
    q = sub.add_parser(name, **texts)
    add_corpus_args(q, default_corpus="brown", brown_slice=brown_slice)
    q.add_argument("--out", default=None, help=f"output file (default {default_out})")
    q.add_argument("--quiet", action="store_true", help="no progress bars")
    q.set_defaults(func=_checked(handler))
    return q


def _checked(handler):
    """``handler`` after the one check every target shares: --out is neither an input nor inside one."""
    def run(args) -> int:
        inputs = {**corpus_input(args), "--class-file": getattr(args, "class_file", None)}
        check_not_over({"--out": args.out}, inputs)
        return handler(args)

    return run


def _only(instance, names):
    """Fields of a dataclass instance not in ``names`` (to skip)."""
    import dataclasses

    return tuple(f.name for f in dataclasses.fields(instance) if f.name not in names)


def _train_config(module, args) -> TrainConfig:
    """The target's TrainConfig: the options it offers from the command line, its own fixed values for the rest."""
    fixed = {k: getattr(module.TRAIN, k) for k in _only(module.TRAIN, module.TRAIN_OPTIONS)}
    return from_options(TrainConfig, args, **fixed)


def _table1(args) -> int:
    table1.run_table1(_train_config(table1, args), from_options(table1.Table1Options, args), corpus_spec(args),
                      args.out, args.quiet)
    return 0


def _beyond(args) -> int:
    beyond.run_beyond(from_options(NPLMConfig, args, V=2), _train_config(beyond, args),
                      from_options(beyond.BeyondOptions, args), corpus_spec(args), args.out, args.quiet)
    return 0


def _options_only(run, options):
    """The handler of a target whose run takes (its options, the corpus, out, quiet)."""
    def handler(args) -> int:
        run(from_options(options, args), corpus_spec(args), args.out, args.quiet)
        return 0

    return handler


_ngrams = _options_only(ngrams.run_ngrams, ngrams.NgramsOptions)
_minibatch = _options_only(minibatch.run_minibatch, minibatch.MinibatchOptions)
_lr_sweep = _options_only(lr_sweep.run_lr_sweep, lr_sweep.LrSweepOptions)
_recurrent = _options_only(recurrent.run_recurrent, recurrent.RecurrentOptions)
_output_layers = _options_only(output_layers.run_output_layers, output_layers.OutputLayersOptions)


def _central_claim(args) -> int:
    central_claim.run_central_claim(from_options(central_claim.CentralClaimOptions, args), args.out, args.quiet)
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("reproduce", help="rerun the experiments behind a table, write data/results/*.json",
                              description="Rerun the experiments behind one of the book's tables and write "
                                          "its JSON file (with the command and the git commit).")
    sub = p.add_subparsers(dest="target", required=True, metavar="{" + ",".join(TARGETS) + "}")
    for add in (_add_ngrams, _add_table1, _add_minibatch, _add_beyond, _add_lr_sweep, _add_output_layers,
                _add_recurrent, _add_central_claim):  # one function per target's options
        add(sub)


def _add_ngrams(sub) -> None:
    q = _target(sub, "ngrams", _ngrams, "data/results/ngrams.json", help="every n-gram row of Table 1 (about a minute)",
                description=description(ngrams.__doc__))
    add_options(q, ngrams.NgramsOptions(), help={"classes": "class counts, comma-separated (default the paper's "
                                                            "150,200,500,1000,2000; the first also for orders 4 and 5)",
                                                 "passes": "exchange-algorithm passes"})


def _add_table1(sub) -> None:
    q = _target(sub, "table1", _table1, _outs("table1"), help="the neural rows of Table 1 (hours, resumable)",
                description="Train and evaluate the neural rows of Table 1 (MLP1-MLP10).")
    add_options(q, table1.TRAIN, skip=_only(table1.TRAIN, table1.TRAIN_OPTIONS), help=HELP)
    add_options(q, table1.Table1Options(), help={
        "rows": "trained rows to run, e.g. MLP1,MLP9 (default all; each brings its mixed even row)",
        "quick": f"the same pipeline on a slice ({table1.QUICK_SPLIT[0]:,}/{table1.QUICK_SPLIT[1]:,}/"
                 f"{table1.QUICK_SPLIT[2]:,} tokens, at most {table1.QUICK_EPOCHS} epochs), into {_quick('table1')}",
        "runs_dir": f"where rows checkpoint {RUNS_DEFAULT}",
        "force": "retrain the requested rows from scratch",
        "save_features": "write the best network's word features C to <out>_features.npz (never with --quick)"})


def _add_minibatch(sub) -> None:
    q = _target(sub, "minibatch", _minibatch, "data/results/minibatch.json", brown_slice=minibatch.SLICE,
                help="K = 1 against minibatches on one network (about 11 minutes, resumable)",
                description="Does minibatch SGD track the paper's pure SGD (K = 1)?")
    add_options(q, minibatch.MinibatchOptions(), help={
        "row": "the Table 1 network to train", "epochs": "epochs of each run",
        "batch": "K of the 'table1' run", "lr": "eps_0 of the 'table1' run", "decay_rate": "r of the 'table1' run",
        "weight_decay": "weight decay of every run", "seed": "initialisation and shuffling seed",
        "runs_dir": f"where the three runs checkpoint and resume {RUNS_DEFAULT}",
        "force": "train the three runs again from scratch"})


def _add_beyond(sub) -> None:
    q = _target(sub, "beyond", _beyond, _outs("beyond"),
                help="a larger network trained longer, mixed by EM (about an hour, resumable)",
                description="One row of Table 1 trained with what we know now.")
    add_options(q, beyond.NETWORK, skip=_only(beyond.NETWORK, beyond.NETWORK_OPTIONS), help=HELP)
    add_options(q, beyond.TRAIN, skip=_only(beyond.TRAIN, beyond.TRAIN_OPTIONS), help=HELP)
    add_options(q, beyond.BeyondOptions(), help={"quick": f"the same pipeline on a slice, at most "
                                                          f"{beyond.QUICK_EPOCHS} epochs, into {_quick('beyond')}",
                                                 "runs_dir": f"where the run checkpoints and resumes {RUNS_DEFAULT}",
                                                 "force": "train again from scratch"})


def _add_lr_sweep(sub) -> None:
    q = _target(sub, "lr-sweep", _lr_sweep, _outs("lr_sweep"), brown_slice=lr_sweep.SLICE,
                help="the initial learning rate eps_0 of minibatch SGD (about 6 minutes)",
                description="Train one Table 1 network once per eps_0 on a slice of Brown (the first "
                            f"{lr_sweep.SLICE[0]:,} / {lr_sweep.SLICE[1]:,} tokens unless --train-size / "
                            "--valid-size say otherwise) and compare validation perplexities.")
    add_options(q, lr_sweep.LrSweepOptions(), help={
        "row": "the Table 1 network to train", "lrs": "values of eps_0, comma-separated",
        "epochs": "epochs of every run (fixed: no early stopping)", "batch": "K of every run",
        "decay_rate": "r of every run", "weight_decay": "weight decay of every run",
        "seed": "initialisation and shuffling seed", "quick": f"a slice of the corpus, at most "
                                                              f"{lr_sweep.QUICK_EPOCHS} epochs, into {_quick('lr_sweep')}"})


def _add_output_layers(sub) -> None:
    ol = output_layers
    q = _target(sub, "output-layers", _output_layers, _outs("output_layers"),
                help="MLP9 with the output layers after 2003, by the comparison protocol "
                     "(CPU hours on Brown, resumable, parallel)",
                description="MLP9 trained with each output layer after 2003 (class-factored, tree, "
                            "differentiated and adaptive softmaxes, LightRNN, importance sampling, NCE) and "
                            "the energy network of the paper's section 5 by one "
                            "protocol: the learning rate chosen on validation, three seeds to early "
                            "stopping, time to the full softmax's quality. Processes given different "
                            "--methods fill one file.")
    quick = ol.QUICK_PROTOCOL
    add_options(q, ol.OutputLayersOptions(), help={
        "methods": f"methods to run, comma-separated, from {','.join(ol.METHODS)} (default: all but "
                   f"{' and '.join(EXPLICIT)})",
        "seeds": "seeds to train, e.g. 0,1 (default: the protocol's 0,1,2)",
        "n_classes": "classes of the class-factored softmax and the clustered tree (default round(sqrt |V|))",
        "k_is": "samples per batch for importance sampling (is-ess: the block its sample grows by)",
        "k_nce": "noise samples per batch for NCE",
        "class_file": "a file of 'word class' lines: adds the class-file method (default: none)",
        "quick": f"the same pipeline on a slice ({ol.QUICK_SPLIT[0]:,} training tokens) with a quick protocol "
                 f"({quick.grid_epochs} epoch per grid value, at most {quick.max_epochs} epochs, patience "
                 f"{quick.patience}), into {_quick('output_layers')}",
        "runs_dir": f"where the runs checkpoint {RUNS_DEFAULT}",
        "force": "train the requested methods' runs again from scratch (and replace a file of other settings)",
        "describe_only": "train nothing: write each method's layer description (classes, tree depth, output rows "
                         "per example) into the results file"})


def _add_recurrent(sub) -> None:
    q = _target(sub, "recurrent", _recurrent, _outs("recurrent"),
                help="recurrent models against the NPLM by the comparison protocol (CPU hours, resumable, parallel)",
                description=description(recurrent.__doc__, 1))
    add_options(q, recurrent.RecurrentOptions(), skip=recurrent.FIELDS, help={
        "models": f"rows to train, comma-separated, among {','.join(recurrent.ROWS)}; "
                  f"{','.join(recurrent.NAMED_ONLY)} train only when named here",
        "seeds": "seeds of the chosen learning rate, comma-separated (default: all of the protocol's, "
                 + ",".join(map(str, recurrent.RECURRENT_PROTOCOL.seeds)) + ")",
        "quick": f"the same pipeline on a tiny slice with a small network, into {_quick('recurrent')}",
        "runs_dir": f"where the runs checkpoint {RUNS_DEFAULT}",
        "force": "train again from scratch"})


def _add_central_claim(sub) -> None:
    q = sub.add_parser("central-claim", help="unseen sentences made likely by similar words (hours, resumable)",
                       description="The paper's central claim, measured: sentences that pair chosen words are "
                                   "removed from the synthetic grammar's training data and scored by the network "
                                   "and the n-grams; on Brown, novel trigrams split by whether a near neighbour "
                                   "of a context word makes them seen; C learned or fixed. Every network under the "
                                   "comparison protocol (learning rate from the grid on validation, seeds 0, 1, 2 to "
                                   "early stopping).")
    q.add_argument("--out", default=None, help=f"output file (default {_outs('central_claim')})")
    q.add_argument("--quiet", action="store_true", help="no progress lines")
    add_options(q, central_claim.CentralClaimOptions(), help={
        "synthetic": "the synthetic-grammar part (minutes)", "brown": "the Brown part (hours; needs the corpus)",
        "families": "the synthetic families to run: all, or a comma list of animal-verb, time-animal",
        "brown_parts": "the Brown experiments to run: all, novel-trigrams (hours) or fixed-features (hours)",
        "quick": "the whole pipeline, small and short",
        "runs_dir": f"where the networks checkpoint {RUNS_DEFAULT}", "force": "train the networks again"})
    q.set_defaults(func=_checked(_central_claim))
