"""``python -m nplm_edu train``: train an NPLM, print per-epoch perplexities, checkpoint to --out.

Serially (the paper's SGD, or Adam and dropout), or with one of the parallel algorithms of section 3:
``--parallel output-block`` under ``mpiexec -n M`` or ``--parallel hogwild --workers P``. Every mode
runs the one trainer (:func:`nplm_edu.training.trainer.train`): same checkpoints, same resume.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from ..data.files import new_folder_removed_on_failure
from ..data.locks import one_writer
from ..errors import UserError
from ..experiments.common import check_output_path
from ..experiments.skeleton import check_not_over, read_results, write_whole
from ..models.nplm import NPLMConfig
from ..numerics.fused import FusedNPLM
from ..numerics.threads import affinity_cores as usable_cores  # --workers: at most 4 per core
from ..training.checkpoint import check_writable, load_checkpoint
from ..training.parallel.mpi_job import abort_on_error, world
from ..training.trainer import TrainConfig, train
from .corpus import add_corpus_args, corpus_from_args, corpus_input
from .options import add_options, from_options

MODES = ("none", "output-block", "hogwild")
# what a parallel mode cannot do, said in one line when asked for
NOT_IN_PARALLEL = "at the end of every epoch only (no --checkpoint-every-minutes, no Ctrl-C checkpoint)"

HELP = {"n": "order: n-1 context words", "h": "hidden units, 0 for none", "m": "features per word",
        "direct": "direct connections W x from the features to the output", "dtype": "floating-point type of the model",
        "epochs": "at most this many epochs", "batch": "minibatch size K (1: the paper's pure SGD)",
        "lr": "initial learning rate eps_0", "decay_rate": "r in eps_t = eps_0 / (1 + r t)",
        "lr_decay": "lr multiplied by this after every epoch", "weight_decay": "on C, H, U, W (never b, d)",
        "optimizer": "sgd (the paper's rule) or adam", "beta1": "Adam: decay of the running mean m of the gradients",
        "beta2": "Adam: decay of the running mean v of the squared gradients",
        "eps": "Adam: added to sqrt(v_hat) in the denominator of the step", "dropout_x": "dropout probability on x",
        "dropout_a": "dropout probability on a", "tie": "output vectors U tied to the features C (h = m, no direct)",
        "seed": "initialisation, shuffling and dropout seed", "patience": "epochs without improvement before stopping",
        "checkpoint_every_minutes": "also checkpoint every this many minutes (serial only)",
        "examples_per_epoch": "use only this many examples per epoch (default: all)",
        "max_updates": "stop after this many updates (default: no limit)",
        "threads": "threads computing each update, the output layer split among them (default: the usable cores)",
        "frozen": "parameters never updated, comma-separated (e.g. C: fixed word features; serial only; default: none)"}


def _handler(args) -> int:
    started = time.monotonic()
    config = from_options(TrainConfig, args)
    config.validate()
    net = from_options(NPLMConfig, args, V=2)
    net.validate()
    if args.parallel != "none" and args.checkpoint_every_minutes != TrainConfig.checkpoint_every_minutes:
        raise UserError(f"--parallel {args.parallel} checkpoints {NOT_IN_PARALLEL}")
    if args.workers < 1:
        raise UserError(f"--workers must be at least 1, got {args.workers}")
    if args.parallel != "hogwild" and args.workers != 1:
        raise UserError("--workers is for --parallel hogwild (output-block runs on the ranks mpiexec starts)")
    cores = usable_cores()
    if args.workers > 4 * cores:  # thousands of forked processes would swamp the machine for nothing
        raise UserError(f"--workers {args.workers} is more than 4 workers per core this process may use ({cores})")
    check_not_over({"--out": args.out, "--results": args.results}, corpus_input(args))
    check_not_over({"--results": args.results}, {"--out": args.out})  # the run folder is the trainer's own
    with new_folder_removed_on_failure(args.out):  # a run that failed before writing anything leaves none
        _check_outputs(args)  # before any setup: under mpiexec, on every rank before MPI starts
        # one writer per run folder (under mpiexec, rank 0 holds it for every rank)
        from . import mpi_rank

        with one_writer(args.out, " (a train run)") if mpi_rank() == 0 else contextlib.nullcontext():
            comm = world() if args.parallel == "output-block" else None
            with abort_on_error(comm):  # from here on, an error on one rank ends every rank (serially: no-op)
                return _run(args, config, net, comm, started)


def _run(args, config: TrainConfig, net: NPLMConfig, comm, started: float) -> int:
    """Load the corpus, build the network and its backend, train, write the results."""
    rank = 0 if comm is None else comm.Get_rank()
    quiet = args.quiet or rank != 0  # one rank speaks
    corpus = corpus_from_args(args)
    net.V = corpus.V
    model = FusedNPLM(net)
    if not quiet:
        print(f"{corpus.name}: |V| = {corpus.V}, {len(corpus.train):,} / {len(corpus.valid):,} / {len(corpus.test):,} "
              f"train / valid / test tokens; model n={net.n} "
              f"h={net.h} m={net.m} direct={net.direct}: {model.num_params():,} parameters", flush=True)
    backend, info = None, None
    if args.parallel == "output-block":
        from ..training.parallel.output_block import OutputBlockBackend

        backend = OutputBlockBackend(model, config, comm)
        info = {"algorithm": "output-block", "ranks": backend.sgd.size}
        if not quiet:
            print(f"output blocks over {backend.sgd.size} MPI rank(s): rank 0 owns output units "
                  f"{backend.sgd.start}..{backend.sgd.stop - 1}", flush=True)
    elif args.parallel == "hogwild":
        from ..training.parallel.hogwild import HogwildBackend

        backend = HogwildBackend(model, config, corpus.windows("train", net.n), workers=args.workers)
        info = {"algorithm": "hogwild", "workers": args.workers}
    history = train(model, corpus, config, out_dir=args.out, resume=args.resume, quiet=quiet, backend=backend,
                    info=info)
    if not quiet and history.get("best_valid_ppl") is not None:
        print(f"best valid ppl {history['best_valid_ppl']:.2f}; checkpoint and history in {args.out}")
    if args.results and rank == 0:
        write_whole(Path(args.results), "train", {"corpus": corpus.name, "V": corpus.V, "history": history,
                                                  "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid")}},
                    started)
        if not quiet:
            print(f"wrote {args.results}")
    return 0


def _check_outputs(args) -> None:
    """Every file the run will write can be written, and --resume / --force agree with what --out holds:
    one line now rather than after the corpus, the model (and MPI) are set up."""
    if args.results:
        check_output_path(args.results, "--results")
        read_results(args.results, "train")  # another command's results file, or not JSON: never replaced
    check_writable(args.out)
    if args.resume:  # a missing or unreadable checkpoint is bad input: found here, said once (by rank 0 under MPI)
        load_checkpoint(Path(args.out) / "checkpoint.npz")
    elif not args.force and (Path(args.out) / "checkpoint.npz").exists():  # a fresh start would overwrite it
        raise UserError(f"{args.out} already holds a checkpoint: --resume continues it, --force starts over "
                        "and overwrites it, or choose another --out")


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("train", help="train the neural model (SGD or Adam, early stopping, checkpoints)",
                              description="Train the NPLM of Bengio et al. (2003) (section 4), serially or with "
                                          "a parallel algorithm of section 3.")
    add_corpus_args(p)
    add_options(p, NPLMConfig(V=2), skip=("V", "seed"), help=HELP)
    add_options(p, TrainConfig(), help=HELP)
    p.add_argument("--out", default="runs/train", help="folder for checkpoint.npz and history.json (default runs/train)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.npz")
    start.add_argument("--force", action="store_true",
                       help="start afresh even if OUT holds a checkpoint (it is overwritten); without it, that is "
                            "refused")
    p.add_argument("--results", default=None, metavar="FILE",
                   help="also write the history with the command, commit and machine to FILE "
                        "(a results file, e.g. data/results/train_brown_slice.json)")
    p.add_argument("--parallel", choices=MODES, default="none",
                   help=f"parallel algorithm of section 3 (default none: serial); the parallel modes checkpoint "
                        f"{NOT_IN_PARALLEL}")
    p.add_argument("--workers", type=int, default=1, help="processes for --parallel hogwild (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or per-epoch lines")
    p.set_defaults(func=_handler)
