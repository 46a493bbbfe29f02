"""``python -m nplm_edu reproduce minibatch``: does minibatch SGD track the paper's pure SGD (K = 1)?

The paper updates the parameters after every example (section 4: K = 1, eps_0 = 1e-3,
r = 1e-8). For MLP9 that is about 19 minutes per Brown epoch on one core (the k1 run of
data/results/minibatch.json, about 700 examples per second), so
``reproduce table1`` trains with minibatches instead (:mod:`nplm_edu.experiments.table1`). This command shows
what that changes, on one Table 1 network and a slice of Brown, by training it three times from
the same initial parameters:

    k1          K = 1,   lr 1e-3, r 1e-8         the paper's rule
    same-step   K = 128, lr 0.128, r 1e-8        the same step per example (lr / K = 1e-3), batched
    table1      K = 128, the table's lr and r    the schedule of data/results/table1.json

and recording, after every epoch, the validation perplexity against the number of examples seen.
The ``train`` update is the mean gradient times lr, so K = 128 at lr 0.128 moves each example's
gradient by 1e-3, as the paper's K = 1 does; what differs is where the gradients are taken: K = 1
takes each example's gradient after the previous example's update, K = 128 takes all 128 at the same
parameters and applies their sum at once. Result: ``data/results/minibatch.json``.

    python -m nplm_edu reproduce minibatch                        # MLP9, 100k/20k Brown tokens, 4 epochs
    python -m nplm_edu reproduce minibatch --row MLP7 --epochs 3
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..data.corpus import CorpusSpec
from ..models.nplm import NPLMConfig
from ..numerics.fused import FusedNPLM
from ..training.trainer import TrainConfig, train

from .skeleton import merge_results, results_file, run_folder, runs_for
from .table1 import NETWORKS, TRAIN as TABLE1_TRAIN, single_row

SLICE = (100_000, 20_000)  # default training / validation tokens on Brown


@dataclass
class MinibatchOptions:
    """``row``: the Table 1 network trained (default MLP9); ``epochs``; ``batch``, ``lr``,
    ``decay_rate``: the "table1" run's settings (default: the table's); ``weight_decay``, ``seed``;
    ``runs_dir``: where the three runs checkpoint (each resumes there); ``force``: train them afresh."""

    row: str = "MLP9"
    epochs: int = 4
    batch: int = TABLE1_TRAIN.batch
    lr: float = TABLE1_TRAIN.lr
    decay_rate: float = TABLE1_TRAIN.decay_rate
    weight_decay: float = TABLE1_TRAIN.weight_decay
    seed: int = 0
    runs_dir: str | None = None
    force: bool = False


def runs_of(opts: MinibatchOptions) -> dict[str, dict]:
    """The three training settings compared (see the module docstring)."""
    return {
        "k1": dict(batch=1, lr=1e-3, decay_rate=1e-8),
        "same-step": dict(batch=128, lr=0.128, decay_rate=1e-8),
        "table1": dict(batch=opts.batch, lr=opts.lr, decay_rate=opts.decay_rate),
    }


def run_minibatch(opts: MinibatchOptions | None = None, spec: CorpusSpec | None = None, out=None,
                  quiet: bool = False) -> Path:
    """Train one Table 1 network with each setting of :func:`runs_of`; write the learning curves."""
    opts = opts or MinibatchOptions()
    spec = spec or CorpusSpec(corpus="brown")
    started = time.monotonic()
    row = single_row(opts.row, "minibatch")
    if spec.corpus == "brown":
        spec = replace(spec, train_size=SLICE[0] if spec.train_size is None else spec.train_size,
                       valid_size=SLICE[1] if spec.valid_size is None else spec.valid_size)
    out = results_file(out, "minibatch")  # checked before any work
    corpus = spec.load()
    epochs = opts.epochs
    mcfg = NPLMConfig(V=corpus.V, seed=opts.seed, **NETWORKS[row])
    doc = {"row": row, "model": asdict(mcfg), "corpus": corpus.name, "V": corpus.V,
           "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid", "test")},
           "weight_decay": opts.weight_decay, "epochs": epochs,
           "note": "valid_ppl after every epoch; examples = training examples seen; the three runs start from "
                   "the same parameters (seed) and see the examples in the same shuffled order",
           "runs": {}}
    for name, setting in runs_of(opts).items():
        cfg = TrainConfig(epochs=epochs, weight_decay=opts.weight_decay, seed=opts.seed, patience=epochs,
                          **setting)
        model = FusedNPLM(mcfg)
        if not quiet:
            print(f"== {row} {name}: K = {cfg.batch}, lr {cfg.lr:g}, r {cfg.decay_rate:g}", flush=True)
        run_dir = runs_for(opts.runs_dir, out) / name  # checkpoints: an interrupted run resumes there
        stamp = {"row": row, "model": asdict(mcfg), "corpus": corpus.name, "tokens": doc["tokens"], "train": asdict(cfg)}
        with run_folder(run_dir, stamp, opts.force, what=name) as resume:
            history = train(model, corpus, cfg, out_dir=run_dir, resume=resume, quiet=quiet)
        per_epoch = len(corpus.train) - (mcfg.n - 1)
        seconds = sum(e["seconds"] for e in history["epochs"])  # training and validation, across resumptions
        doc["runs"][name] = {
            **setting, "per_example_step": setting["lr"] / setting["batch"], "seconds": round(seconds, 1),
            "history": [{"epoch": e["epoch"], "examples": e["epoch"] * per_epoch, "updates": e["updates"],
                         "train_ppl": round(e["train_ppl"], 3), "valid_ppl": round(e["valid_ppl"], 3),
                         "lr": e["lr"], "seconds": round(e["seconds"], 2)} for e in history["epochs"]]}
        if not quiet:
            print("   valid perplexity per epoch: " + ", ".join(f"{e['valid_ppl']:.1f}"
                                                            for e in doc["runs"][name]["history"]), flush=True)
    doc = merge_results(out, "minibatch", doc, doc["runs"], started, field="runs",
                        same=("row", "model", "corpus", "V", "tokens", "weight_decay", "epochs"),
                        order=list(runs_of(opts)))
    print_runs(doc)
    print(f"wrote {out}")
    return out


def print_runs(doc: dict) -> None:
    """Validation perplexity per epoch, one column per run."""
    names = list(doc["runs"])
    print(f"\n{doc['row']} on {doc['corpus']} ({doc['tokens']['train']:,} training tokens): validation perplexity")
    print(f"{'epoch':>5} " + " ".join(f"{n:>10}" for n in names))
    for i in range(max(len(r["history"]) for r in doc["runs"].values())):
        cells = [doc["runs"][n]["history"][i]["valid_ppl"] if i < len(doc["runs"][n]["history"]) else None
                 for n in names]
        print(f"{i + 1:>5} " + " ".join(f"{c:>10.1f}" if c is not None else f"{'-':>10}" for c in cells))
    print("seconds " + " ".join(f"{doc['runs'][n]['seconds']:>10.1f}" for n in names))
