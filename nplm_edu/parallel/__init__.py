"""The parallel training algorithms of section 3 of the paper.

- :mod:`.output_block`: parameter-parallel, the output units split over the ranks of an MPI job
  (section 3.2); ``mpiexec -n M python -m nplm_edu train --parallel output-block ...``.
- :mod:`.hogwild`: data-parallel on shared memory, asynchronous and lock-free (section 3.1);
  ``python -m nplm_edu train --parallel hogwild --workers P ...``.

:func:`fit` is the epoch loop both share on the command line: the serial trainer's example order
(``train.epoch_order``), learning rate (``train.learning_rate``), per-epoch validation, early
stopping, ``history.json`` and ``checkpoint.npz`` (written by rank 0 only), in the same formats.
Checkpoints are written at the end of every epoch only: :func:`check_options` refuses ``--resume``
and ``--checkpoint-minutes`` with one error line rather than ignoring them.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..errors import UserError


def fit(model, corpus, config, out_dir, run_epoch, perplexity, gather, rank: int = 0, info: dict | None = None,
        quiet: bool = False) -> dict:
    """Epochs of ``run_epoch(order, step) -> (mean train NLL, updates, extra dict)`` with validation
    by ``perplexity(contexts, targets)``; ``gather()`` returns the full parameters on rank 0 (None
    elsewhere). Every rank must call this (the callbacks may be collective). Returns the history."""
    from ..train import epoch_order, learning_rate, save_checkpoint

    config.validate()
    n = model.order
    tr_ctx, tr_tgt = corpus.windows("train", n)
    va = corpus.windows("valid", n)
    N = len(tr_tgt)
    per_epoch = N if config.examples_per_epoch is None else min(N, config.examples_per_epoch)
    out = Path(out_dir) if out_dir is not None and rank == 0 else None
    rng = np.random.default_rng(config.seed)
    history = {"model": asdict(model.config), "train": asdict(config), "parallel": info or {}, "epochs": []}
    step, best, best_valid, bad = 0, None, None, 0
    for epoch in range(config.epochs):
        order = epoch_order(N, rng)[:per_epoch]
        if config.max_updates is not None:
            order = order[:max(0, config.max_updates - step) * config.batch]
        if len(order) == 0:
            break
        t0 = time.monotonic()
        loss, updates, extra = run_epoch(order, step)
        step += updates
        entry = {"epoch": epoch + 1, "updates": step, "train_ppl": math.exp(loss),
                 "lr": learning_rate(config.lr, config.decay_rate, step)}
        entry["valid_ppl"] = perplexity(*va)
        entry["seconds"] = time.monotonic() - t0
        entry.update(extra)
        history["epochs"].append(entry)
        params = gather()
        improved = best_valid is None or entry["valid_ppl"] < best_valid
        if improved:
            best_valid, bad = entry["valid_ppl"], 0
            best = {k: v.copy() for k, v in params.items()} if params is not None else None
        else:
            bad += 1
        if rank == 0:
            for k, p in model.params.items():
                p[...] = params[k]  # in place: keeps the model's [U W] fused
            if not quiet:
                print(f"epoch {entry['epoch']:3d}  train ppl {entry['train_ppl']:8.2f}  valid ppl "
                      f"{entry['valid_ppl']:8.2f}  lr {entry['lr']:.3g}  {entry['seconds']:.1f} s", flush=True)
            if out is not None:
                state = {"train": asdict(config), "step": step, "epoch": epoch + 1, "batch_in_epoch": 0,
                         "rng_state": rng.bit_generator.state, "loss_sum": 0.0, "loss_count": 0,
                         "best_valid": best_valid, "bad_epochs": bad, "history": history["epochs"],
                         "epoch_seconds": 0.0, "done": bad >= config.patience}
                save_checkpoint(out / "checkpoint.npz", model, state, best)
                _write_json(out / "history.json", history)
        if bad >= config.patience or (config.max_updates is not None and step >= config.max_updates):
            break
    history["best_valid_ppl"] = best_valid
    history["updates"] = step
    if rank == 0:
        if best is not None:
            for k, p in model.params.items():
                p[...] = best[k]
        if out is not None:
            _write_json(out / "history.json", history)
    return history


def _write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)


# what the parallel trainers do with the options of `train` (also in `train --help`)
HONOURED = ("the corpus and model options, --epochs, --batch, --lr, --decay-rate, --weight-decay, --seed, "
            "--patience, --examples-per-epoch, --max-updates, --out and --quiet")
UNSUPPORTED = {
    "resume": "the parallel trainers always start from the initial parameters (and would overwrite "
              "the checkpoint); run again without --resume",
    "checkpoint_minutes": "the parallel trainers checkpoint at the end of every epoch only",
}


def check_options(args, rank: int = 0) -> None:
    """Refuse the ``train`` options the parallel trainers do not honour (``--resume``, an explicit
    ``--checkpoint-minutes``) with one clear line instead of ignoring them: a UserError on rank 0,
    a silent exit with status 2 on the other ranks of an MPI job (so the job prints one line)."""
    for name, why in UNSUPPORTED.items():
        value = getattr(args, name, None)
        if value is not None and value is not False:
            if rank != 0:
                raise SystemExit(2)
            raise UserError(f"--{name.replace('_', '-')} is not supported with --parallel {args.parallel}: {why}")


def run_output_block(args, model, corpus, config) -> dict:
    """``train --parallel output-block`` (run under ``mpiexec -n M``; M = 1 without it)."""
    from .output_block import run, world

    comm = world()
    check_options(args, 0 if comm is None else comm.Get_rank())
    return run(args, model, corpus, config)


def run_hogwild(args, model, corpus, config) -> dict:
    """``train --parallel hogwild --workers P``."""
    from .hogwild import run

    check_options(args)
    return run(args, model, corpus, config)
