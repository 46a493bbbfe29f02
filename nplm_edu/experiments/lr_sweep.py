"""``python -m nplm_edu reproduce lr-sweep``: which initial learning rate eps_0 for minibatch SGD?

The paper's eps_0 = 1e-3 is for one example per update (section 4). ``reproduce table1`` trains
with minibatches of K = 128 and the gradient of the *mean* loss, so its eps_0 must be larger (a
step of eps_0 / K per example); the table uses eps_0 = 1.0. This command justifies that value on
the validation set: it trains one Table 1 network (MLP9 by default) on a slice of Brown (the first
100,000 training tokens, validated on 20,000) from the same initial parameters, in the same
shuffled order, for the same number of epochs fixed in advance, once for each eps_0 of a small
grid around 1.0 (0.1, 0.3, 1, 3), with Table 1's other settings (K = 128, r = 1e-4, weight decay
1e-4), and records the validation perplexity after every epoch. No early stopping, no test set.
A rate that makes training diverge is recorded as such. Result: ``data/results/lr_sweep.json``.

    python -m nplm_edu reproduce lr-sweep                            # MLP9, 4 rates x 6 epochs (about 6 min)
    python -m nplm_edu reproduce lr-sweep --lrs 0.3,1 --epochs 2
    python -m nplm_edu reproduce lr-sweep --corpus synthetic --quick # the same pipeline in seconds
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..data.corpus import CorpusSpec
from ..errors import UserError
from ..models.nplm import NPLMConfig
from ..numerics.fused import FusedNPLM
from ..training.checkpoint import TrainingDiverged
from ..training.trainer import TrainConfig, train

from .skeleton import merge_results, results_file
from .minibatch import SLICE  # the Brown slice of ``reproduce minibatch``: 100,000 / 20,000 tokens
from .table1 import NETWORKS, TRAIN as TABLE1_TRAIN, single_row, table_corpus

QUICK_EPOCHS = 2


@dataclass
class LrSweepOptions:
    """``row``: the Table 1 network; ``lrs``: the values of eps_0, comma-separated; ``epochs``: the
    same fixed number for every run; ``batch``, ``decay_rate``, ``weight_decay``, ``seed``: shared by
    every run (default: Table 1's); ``quick``: a slice of the corpus and at most 2 epochs."""

    row: str = "MLP9"
    lrs: str = "0.1,0.3,1,3"
    epochs: int = 6
    batch: int = TABLE1_TRAIN.batch
    decay_rate: float = TABLE1_TRAIN.decay_rate
    weight_decay: float = TABLE1_TRAIN.weight_decay
    seed: int = 0
    quick: bool = False


def parse_lrs(text: str) -> list[float]:
    """'0.1,0.3,1' -> [0.1, 0.3, 1.0]: distinct positive finite numbers, in increasing order."""
    try:
        lrs = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise UserError(f"lrs takes comma-separated numbers, e.g. 0.1,0.3,1,3; got {text!r}", setting="lrs") from None
    if not lrs:
        raise UserError("lrs needs at least one learning rate, e.g. 0.3,1", setting="lrs")
    bad = [x for x in lrs if not (math.isfinite(x) and x > 0)]
    if bad:
        raise UserError(f"lrs must be positive finite numbers, got {bad[0]}", setting="lrs")
    return sorted(set(lrs))


def sweep_corpus(spec: CorpusSpec, quick: bool):
    """Brown: the first 100,000 / 20,000 tokens unless sizes are given; with ``quick`` a slice of that."""
    if spec.corpus == "brown":
        spec = replace(spec, train_size=SLICE[0] if spec.train_size is None else spec.train_size,
                       valid_size=SLICE[1] if spec.valid_size is None else spec.valid_size)
    return table_corpus(spec, quick)


def run_lr_sweep(opts: LrSweepOptions | None = None, spec: CorpusSpec | None = None, out=None,
                 quiet: bool = False) -> Path:
    """Train one Table 1 network once per eps_0 of ``opts.lrs``; write the validation curves."""
    opts = opts or LrSweepOptions()
    spec = spec or CorpusSpec(corpus="brown")
    started = time.monotonic()
    row = single_row(opts.row, "lr-sweep")
    lrs = parse_lrs(opts.lrs)
    epochs = min(opts.epochs, QUICK_EPOCHS) if opts.quick else opts.epochs
    base = TrainConfig(epochs=epochs, batch=opts.batch, lr=1.0, decay_rate=opts.decay_rate,
                       weight_decay=opts.weight_decay, seed=opts.seed, patience=max(epochs, 1))
    base.validate()
    out = results_file(out, "lr-sweep", opts.quick)  # checked before any work
    corpus = sweep_corpus(spec, opts.quick)
    mcfg = NPLMConfig(V=corpus.V, seed=opts.seed, **NETWORKS[row])
    doc = {"row": row, "model": asdict(mcfg), "corpus": corpus.name, "V": corpus.V, "quick": bool(opts.quick),
           "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid")},
           "train": {k: getattr(base, k) for k in ("epochs", "batch", "decay_rate", "weight_decay", "seed")},
           "lrs": lrs,
           "note": "eps_0 is the initial learning rate on the minibatch's mean gradient; every run starts from "
                   "the same parameters, sees the examples in the same order and trains the same number of "
                   "epochs (no early stopping); valid_ppl after every epoch; the test set is not used",
           "runs": []}
    for lr in lrs:
        cfg = replace(base, lr=lr)
        if not quiet:
            print(f"== {row}: eps_0 = {lr:g}, K = {cfg.batch}, r = {cfg.decay_rate:g}, {epochs} epochs", flush=True)
        t0 = time.perf_counter()
        run = {"lr": lr, "diverged": False}
        try:
            history = train(FusedNPLM(mcfg), corpus, cfg, quiet=quiet)  # its progress bar, unless --quiet
            run["history"] = [{"epoch": e["epoch"], "updates": e["updates"], "train_ppl": round(e["train_ppl"], 3),
                               "valid_ppl": round(e["valid_ppl"], 3), "seconds": round(e["seconds"], 2)}
                              for e in history["epochs"]]
            run["best_valid_ppl"] = round(history["best_valid_ppl"], 3)
            run["best_epoch"] = history["best_epoch"]
            run["final_valid_ppl"] = run["history"][-1]["valid_ppl"]
        except TrainingDiverged as e:
            run.update(diverged=True, message=str(e).split(" (")[0], history=[])
        run["seconds"] = round(time.perf_counter() - t0, 1)
        doc["runs"].append(run)
        if not quiet:
            print("   " + ("diverged" if run["diverged"] else
                           "valid perplexity per epoch: " + ", ".join(f"{e['valid_ppl']:.1f}" for e in run["history"])),
                  flush=True)
    doc = merge_results(out, "lr-sweep", doc, {r["lr"]: r for r in doc["runs"]}, started, field="runs", key="lr",
                        same=("row", "model", "corpus", "V", "quick", "tokens", "train"), then=with_best)
    if not quiet:
        print_sweep(doc)
    print(f"wrote {out}")
    return out


def with_best(doc: dict) -> dict:
    """The sweep with its runs in increasing eps_0 and the best eps_0 among those that did not diverge."""
    runs = sorted(doc["runs"], key=lambda r: r["lr"])
    finished = [r for r in runs if not r["diverged"]]
    best = min(finished, key=lambda r: r["best_valid_ppl"])["lr"] if finished else None
    return {**doc, "lrs": [r["lr"] for r in runs], "runs": runs, "best_lr": best}


def print_sweep(doc: dict) -> None:
    """Validation perplexity per epoch, one column per eps_0."""
    runs = doc["runs"]
    print(f"\n{doc['row']} on {doc['corpus']} ({doc['tokens']['train']:,} training tokens): validation perplexity")
    print(f"{'epoch':>5} " + " ".join(f"{'eps0 ' + format(r['lr'], 'g'):>11}" for r in runs))
    for i in range(doc["train"]["epochs"]):
        cells = [f"{r['history'][i]['valid_ppl']:11.1f}" if i < len(r["history"]) else
                 f"{'diverged' if r['diverged'] else '-':>11}" for r in runs]
        print(f"{i + 1:>5} " + " ".join(cells))
    if doc["best_lr"] is not None:
        print(f"lowest validation perplexity in {doc['train']['epochs']} epochs: eps_0 = {doc['best_lr']:g}")
