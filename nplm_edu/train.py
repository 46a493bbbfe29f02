"""Training the NPLM by stochastic gradient descent, as in section 4 of the paper.

The update rule (kept exactly; the parallel trainers reproduce it). With g the gradient of the
MEAN negative log-likelihood over a minibatch of K examples and t the number of updates done
before this one (t = 0 first):

    lr_t = lr0 / (1 + r t)
    p <- p - lr_t (g + weight_decay * p)     for p in C, H, U, W   (all of C is decayed)
    p <- p - lr_t g                          for the biases b, d   (never decayed)

K = 1 is the paper's pure stochastic gradient (ascent on log-likelihood = descent on NLL). The
examples of an epoch are visited in the order :func:`epoch_order` draws from one
``numpy.random.Generator`` seeded with ``TrainConfig.seed`` (one permutation per epoch).

Checkpoints (``checkpoint.npz``, written atomically: temp file, then rename) hold the parameters,
the best parameters so far, the configs, the update counter, the position in the epoch and the RNG
state at the start of the epoch, so ``resume=True`` ends with exactly the parameters an
uninterrupted run would have. They are plain arrays plus one JSON string: they load with
``allow_pickle=False``, so a checkpoint from elsewhere can never run code.
"""

from __future__ import annotations

import json
import math
import os
import signal
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .errors import UserError, check_seed
from .model import DECAYED, NPLM, NPLMConfig

FORMAT = "nplm-edu-checkpoint-1"


@dataclass
class TrainConfig:
    """SGD hyperparameters (section 4; the paper: lr 1e-3 per example, r = 1e-8, weight decay 1e-4 on
    Brown). ``examples_per_epoch`` limits each epoch to the first examples of its shuffled order,
    ``max_updates`` stops the run after that many updates (both None: no limit)."""

    epochs: int = 20
    batch: int = 128
    lr: float = 0.1
    decay_rate: float = 1e-8
    weight_decay: float = 1e-4
    seed: int = 0
    patience: int = 3
    checkpoint_every_minutes: float = 10.0
    examples_per_epoch: int | None = None
    max_updates: int | None = None

    def validate(self) -> None:
        if self.epochs < 1:
            raise UserError(f"epochs must be at least 1, got {self.epochs}")
        if self.batch < 1:
            raise UserError(f"batch must be at least 1, got {self.batch}")
        for name in ("lr", "decay_rate", "weight_decay", "checkpoint_every_minutes"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise UserError(f"{name.replace('_', '-')} must be a finite number >= 0, got {v}")
        if self.lr == 0:
            raise UserError("lr must be positive, got 0")
        if self.patience < 1:
            raise UserError(f"patience must be at least 1, got {self.patience}")
        check_seed(self.seed)
        for name in ("examples_per_epoch", "max_updates"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise UserError(f"{name.replace('_', '-')} must be at least 1, got {v}")


# these change the trajectory: a resumed run must use the same values
_TRAJECTORY = ("batch", "lr", "decay_rate", "weight_decay", "seed", "examples_per_epoch")


class TrainingDiverged(UserError):
    """The loss became NaN or infinite."""


def learning_rate(lr0: float, r: float, t: int) -> float:
    """eps_t = eps_0 / (1 + r t), t = updates done before this one (section 4)."""
    return lr0 / (1.0 + r * t)


def epoch_order(n_examples: int, rng: np.random.Generator) -> np.ndarray:
    """The order in which one epoch visits the examples: one permutation drawn from ``rng``."""
    return rng.permutation(n_examples)


def sgd_step(params: dict, grads: dict, lr: float, weight_decay: float) -> None:
    """In place: p -= lr (g + weight_decay p) for C, H, U, W; p -= lr g for b, d (the reference rule;
    :meth:`nplm_edu.model.NPLM.sgd_update` does the same without storing the gradients)."""
    for name, g in grads.items():
        p = params[name]
        if name in DECAYED and weight_decay:
            p -= lr * (g + weight_decay * p)
        else:
            p -= lr * g


# --------------------------------------------------------------------------- data
def _windows(data, n: int):
    """(train_ctx, train_tgt), (valid_ctx, valid_tgt) or None from a Corpus or a pair of pairs."""
    if hasattr(data, "windows"):
        return data.windows("train", n), data.windows("valid", n)
    train, valid = data if len(data) == 2 and isinstance(data[0], (tuple, list)) else (data, None)
    return tuple(train), (tuple(valid) if valid is not None else None)


def training_windows(data, model: NPLM, config):
    """Validate ``config`` and return (train contexts, train targets, valid windows or None, examples
    per epoch): the start of every trainer (:func:`train`, :func:`nplm_edu.modern.train_modern`)."""
    config.validate()
    (tr_ctx, tr_tgt), valid = _windows(data, model.order)
    N = len(tr_tgt)
    if N == 0:
        raise UserError("no training examples")
    per_epoch = N if config.examples_per_epoch is None else min(N, config.examples_per_epoch)
    return tr_ctx, tr_tgt, valid, per_epoch


# --------------------------------------------------------------------------- checkpoints
def save_checkpoint(path, model: NPLM, state: dict, best: dict | None) -> None:
    """Write ``path`` atomically: a temp file in the same folder, fsync, then rename over it."""
    path = Path(path)
    if not all(np.all(np.isfinite(p)) for p in model.params.values()):
        raise TrainingDiverged(f"parameters are no longer finite: {path} not overwritten (the last good "
                               "checkpoint is kept); try a smaller learning rate")
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {f"param/{k}": v for k, v in model.params.items()}
    if best is not None:
        arrays.update({f"best/{k}": v for k, v in best.items()})
    meta = dict(state, format=FORMAT, model=asdict(model.config))
    arrays["meta"] = np.array(json.dumps(meta))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path) -> tuple[dict, dict, dict | None]:
    """(meta, params, best params or None) from a checkpoint; a clear UserError for anything else."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"no checkpoint at {path}")
    try:
        with np.load(path, allow_pickle=False) as z:
            files = {k: z[k] for k in z.files}
        meta = json.loads(str(files.pop("meta")))
        if meta.get("format") != FORMAT:
            raise ValueError("wrong format tag")
    except Exception as e:  # truncated zip, pickled objects, missing meta, bad JSON ...
        raise UserError(f"{path} is not a readable nplm-edu checkpoint ({type(e).__name__}: {e})") from None
    params = {k[6:]: v for k, v in files.items() if k.startswith("param/")}
    best = {k[5:]: v for k, v in files.items() if k.startswith("best/")} or None
    return meta, params, best


def model_from_checkpoint(path, best: bool = True) -> NPLM:
    """A model with the config and parameters of a checkpoint: the best ones (lowest validation
    perplexity) when stored and ``best``, else the latest."""
    meta, params, best_params = load_checkpoint(path)
    model = NPLM(NPLMConfig(**meta["model"]))
    _set_params(model, best_params if best and best_params is not None else params)
    return model


def _set_params(model: NPLM, params: dict) -> None:
    for k, p in model.params.items():
        if k not in params or params[k].shape != p.shape:
            raise UserError(f"checkpoint parameter {k} is missing or has the wrong shape")
        p[...] = params[k]  # in place: keeps [U W] fused


# --------------------------------------------------------------------------- training loop
class _Interrupt:
    """Turn Ctrl-C into a flag checked between updates, so the state saved is never half-updated."""

    def __init__(self):
        self.flag = False
        self.old = None

    def __enter__(self):
        try:
            self.old = signal.signal(signal.SIGINT, self._handler)
        except ValueError:  # not in the main thread
            self.old = None
        return self

    def _handler(self, signum, frame):
        self.flag = True

    def __exit__(self, *exc):
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)


def train(model: NPLM, corpus_or_windows, config: TrainConfig, out_dir=None, resume: bool = False,
          callback=None, callback_every: int = 100, quiet: bool = False) -> dict:
    """Minibatch SGD with validation after every epoch and early stopping (section 4).

    ``corpus_or_windows``: a Corpus, or ((train_contexts, train_targets), (valid_contexts,
    valid_targets) or None). ``callback(step, model)`` runs every ``callback_every`` updates.
    With ``out_dir``: checkpoint.npz (every epoch, every ``checkpoint_every_minutes``, on Ctrl-C)
    and history.json. At the end the model holds the parameters with the best validation
    perplexity (the last ones without validation data). Returns the history dict."""
    from tqdm.auto import tqdm

    tr_ctx, tr_tgt, valid, per_epoch = training_windows(corpus_or_windows, model, config)
    N = len(tr_tgt)
    out = Path(out_dir) if out_dir is not None else None
    ckpt = out / "checkpoint.npz" if out is not None else None

    rng = np.random.default_rng(config.seed)
    state = {"train": asdict(config), "step": 0, "epoch": 0, "batch_in_epoch": 0,
             "rng_state": rng.bit_generator.state, "loss_sum": 0.0, "loss_count": 0,
             "best_valid": None, "bad_epochs": 0, "history": [], "epoch_seconds": 0.0, "done": False}
    best = None
    if resume:
        if ckpt is None:
            raise UserError("resume needs an output folder holding checkpoint.npz")
        meta, params, best = load_checkpoint(ckpt)
        if meta["model"] != asdict(model.config):
            raise UserError(f"checkpoint model {meta['model']} differs from this model {asdict(model.config)}")
        for k in _TRAJECTORY:
            if meta["train"][k] != getattr(config, k):
                raise UserError(f"cannot resume with {k}={getattr(config, k)}: the checkpoint used {meta['train'][k]}")
        _set_params(model, params)
        state.update({k: meta[k] for k in state if k in meta})
        state["train"] = asdict(config)
    history = {"model": asdict(model.config), "train": asdict(config), "epochs": state["history"]}

    def write_history():
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            tmp = out / "history.json.tmp"
            tmp.write_text(json.dumps(history, indent=1))
            os.replace(tmp, out / "history.json")

    def checkpoint():
        if ckpt is not None:
            save_checkpoint(ckpt, model, state, best)

    K = config.batch
    n_batches = -(-per_epoch // K)
    last_save = time.monotonic()
    with _Interrupt() as stop:
        limit_hit = False
        while state["epoch"] < config.epochs and not state["done"] and not limit_hit:
            rng.bit_generator.state = state["rng_state"]  # the order of this epoch, also after resume
            order = epoch_order(N, rng)[:per_epoch]
            t_epoch = time.monotonic() - state["epoch_seconds"]
            bar = tqdm(total=per_epoch, initial=min(state["batch_in_epoch"] * K, per_epoch), unit="ex",
                       desc=f"epoch {state['epoch'] + 1}/{config.epochs}", disable=quiet, leave=False)
            for j in range(state["batch_in_epoch"], n_batches):
                if config.max_updates is not None and state["step"] >= config.max_updates:
                    limit_hit = True
                    break
                idx = order[j * K:(j + 1) * K]
                lr = learning_rate(config.lr, config.decay_rate, state["step"])
                loss = model.sgd_update(tr_ctx[idx], tr_tgt[idx], lr, config.weight_decay)
                if not math.isfinite(loss):
                    bar.close()
                    write_history()
                    where = (f" (the last good checkpoint is kept in {ckpt})" if ckpt is not None and ckpt.exists()
                             else " (no checkpoint was written yet)" if ckpt is not None else "")
                    raise TrainingDiverged(f"the training loss became {loss} at update {state['step']} of epoch "
                                           f"{state['epoch'] + 1}{where}; try a smaller learning rate")
                state["step"] += 1
                state["batch_in_epoch"] = j + 1
                state["loss_sum"] += loss * len(idx)
                state["loss_count"] += len(idx)
                bar.update(len(idx))
                if not quiet and (j % 20 == 0 or j == n_batches - 1):
                    bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.3g}", refresh=False)
                interrupted = stop.flag
                try:
                    if callback is not None and state["step"] % callback_every == 0:
                        callback(state["step"], model)
                except KeyboardInterrupt:
                    interrupted = True
                if interrupted or time.monotonic() - last_save > 60 * config.checkpoint_every_minutes:
                    state["epoch_seconds"] = time.monotonic() - t_epoch
                    checkpoint()
                    last_save = time.monotonic()
                    if interrupted:
                        bar.close()
                        write_history()
                        raise KeyboardInterrupt
            bar.close()
            if limit_hit and state["batch_in_epoch"] < n_batches:
                state["epoch_seconds"] = time.monotonic() - t_epoch
                checkpoint()  # max_updates reached inside an epoch: save, no validation of a partial epoch
                break
            # ---- end of epoch: validation, early stopping, checkpoint
            entry = {"epoch": state["epoch"] + 1, "updates": state["step"],
                     "train_ppl": math.exp(state["loss_sum"] / max(state["loss_count"], 1)),
                     "lr": learning_rate(config.lr, config.decay_rate, state["step"])}
            if valid is not None:
                entry["valid_ppl"] = model.perplexity(*valid, batch=1024)
                if not math.isfinite(entry["valid_ppl"]):
                    raise TrainingDiverged(f"validation perplexity became {entry['valid_ppl']} after epoch "
                                           f"{entry['epoch']}; try a smaller learning rate")
                if state["best_valid"] is None or entry["valid_ppl"] < state["best_valid"]:
                    state["best_valid"], state["bad_epochs"] = entry["valid_ppl"], 0
                    best = {k: v.copy() for k, v in model.params.items()}
                else:
                    state["bad_epochs"] += 1
                    if state["bad_epochs"] >= config.patience:
                        state["done"] = True
            entry["seconds"] = time.monotonic() - t_epoch
            state["history"].append(entry)
            if not quiet:
                v = f"  valid ppl {entry['valid_ppl']:8.2f}" if "valid_ppl" in entry else ""
                print(f"epoch {entry['epoch']:3d}  train ppl {entry['train_ppl']:8.2f}{v}  "
                      f"lr {entry['lr']:.3g}  {entry['seconds']:.1f} s", flush=True)
            state.update(epoch=state["epoch"] + 1, batch_in_epoch=0, loss_sum=0.0, loss_count=0,
                         epoch_seconds=0.0, rng_state=rng.bit_generator.state)
            checkpoint()
            last_save = time.monotonic()
            write_history()
    if best is not None:
        _set_params(model, best)  # early stopping: keep the best parameters
        history["best_valid_ppl"] = state["best_valid"]
    history["updates"] = state["step"]
    write_history()
    return history


# --------------------------------------------------------------------------- command line
def _parallel_none(args, model, corpus, config):
    return train(model, corpus, config, out_dir=args.out, resume=args.resume, quiet=args.quiet)


def _parallel_output_block(args, model, corpus, config):
    from .parallel import run_output_block  # imports mpi4py: only when asked for

    return run_output_block(args, model, corpus, config)


def _parallel_hogwild(args, model, corpus, config):
    from .parallel import run_hogwild

    return run_hogwild(args, model, corpus, config)


# the trainers: name -> function(args, model, corpus, config) -> history (section 3 for the parallel ones)
PARALLEL = {"none": _parallel_none, "output-block": _parallel_output_block, "hogwild": _parallel_hogwild}


def _handler(args) -> int:
    from .corpus import corpus_from_args

    cfg = TrainConfig(epochs=args.epochs, batch=args.batch, lr=args.lr, decay_rate=args.decay_rate,
                      weight_decay=args.weight_decay, seed=args.seed, patience=args.patience,
                      checkpoint_every_minutes=(TrainConfig.checkpoint_every_minutes if args.checkpoint_minutes
                                                is None else args.checkpoint_minutes),
                      examples_per_epoch=args.examples_per_epoch, max_updates=args.max_updates)
    cfg.validate()
    if args.workers < 1:
        raise UserError(f"workers must be at least 1, got {args.workers}")
    NPLMConfig(V=2, n=args.n, m=args.m, h=args.h, direct=args.direct, dtype=args.dtype).validate()
    if args.parallel not in PARALLEL:
        raise UserError(f"--parallel {args.parallel} is not available in this build")
    if args.parallel == "output-block":
        from .parallel.output_block import world

        comm = world()
        if comm is not None and comm.Get_rank() != 0:
            args.quiet = True  # one rank speaks
    if args.parallel != "none":
        from .parallel import check_options

        check_options(args, 0 if args.parallel != "output-block" or comm is None else comm.Get_rank())
    corpus = corpus_from_args(args)
    model = NPLM(NPLMConfig(V=corpus.V, n=args.n, m=args.m, h=args.h, direct=args.direct,
                            dtype=args.dtype, seed=args.seed))
    if not args.quiet:
        print(f"{corpus.name}: |V| = {corpus.V}, {len(corpus.train):,} training tokens; model n={args.n} "
              f"h={args.h} m={args.m} direct={args.direct}: {model.num_params():,} parameters", flush=True)
    history = PARALLEL[args.parallel](args, model, corpus, cfg)
    if not args.quiet and history.get("best_valid_ppl") is not None:
        print(f"best valid ppl {history['best_valid_ppl']:.2f}; checkpoint and history in {args.out}")
    return 0


def add_cli(subparsers) -> None:
    """``python -m nplm_edu train``: train an NPLM, print per-epoch perplexities, checkpoint to --out."""
    from .corpus import add_corpus_args
    from .parallel import HONOURED

    d = TrainConfig()
    p = subparsers.add_parser("train", help="train the neural model (SGD, early stopping, checkpoints)",
                              description="Train the NPLM of Bengio et al. (2003) with SGD (section 4).")
    add_corpus_args(p)
    p.add_argument("--n", type=int, default=5, help="order: n-1 context words (default 5)")
    p.add_argument("--h", type=int, default=50, help="hidden units, 0 for none (default 50)")
    p.add_argument("--m", type=int, default=30, help="features per word (default 30)")
    p.add_argument("--direct", action=argparse_bool(), default=True,
                   help="direct connections W x from the features to the output (default: on)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--batch", type=int, default=d.batch, help="minibatch size K (1: the paper's pure SGD)")
    p.add_argument("--lr", type=float, default=d.lr, help=f"initial learning rate eps_0 (default {d.lr})")
    p.add_argument("--decay-rate", type=float, default=d.decay_rate, help="r in eps_t = eps_0/(1 + r t)")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay, help="on C, H, U, W (not b, d)")
    p.add_argument("--seed", type=int, default=0, help="initialisation and shuffling seed")
    p.add_argument("--patience", type=int, default=d.patience, help="epochs without improvement before stopping")
    p.add_argument("--examples-per-epoch", type=int, default=None, help="use only this many examples per epoch")
    p.add_argument("--max-updates", type=int, default=None, help="stop after this many updates")
    p.add_argument("--out", default="runs/train", help="folder for checkpoint.npz and history.json")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.npz (serial trainer only)")
    p.add_argument("--checkpoint-minutes", type=float, default=None,
                   help=f"also checkpoint every this many minutes (default {d.checkpoint_every_minutes:g}; "
                        "serial trainer only)")
    p.add_argument("--parallel", choices=("none", "output-block", "hogwild"), default="none",
                   help="parallel algorithm of section 3 (default none: serial). The parallel trainers honour "
                        f"{HONOURED}; they checkpoint at the end of every epoch only (not every N minutes, "
                        "not on Ctrl-C) and refuse --resume and --checkpoint-minutes")
    p.add_argument("--workers", type=int, default=1,
                   help="processes for --parallel hogwild (output-block: the ranks mpiexec -n starts)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or per-epoch lines")
    p.set_defaults(func=_handler)


def argparse_bool():
    import argparse

    return argparse.BooleanOptionalAction


if __name__ == "__main__":  # pragma: no cover
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m nplm_edu.train")
    add_cli(ap.add_subparsers(dest="command", required=True))
    a = ap.parse_args(["train"] + sys.argv[1:])
    sys.exit(a.func(a))
