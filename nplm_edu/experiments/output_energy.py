"""The energy-minimization network of section 5 against the paper's network, beside ``reproduce
output-layers`` but not under its protocol.

The energy network pays |V| h tanh per example, forward and backward: on a 50,000-token slice of
Brown with the slice's own vocabulary (|V| = 2,349) an epoch costs about 37 CPU seconds, so the
protocol's grid and three seeds to early stopping (some 60 epochs) would cost about 40 CPU minutes
for a network the paper itself set aside. It is trained apart instead: both networks (same n, m, h)
with Table 1's settings (lr 1.0) for 3 epochs from seed 0 on that slice, its rows written to
``<results file>_energy.json`` (one seed, a fixed budget: a first look, not a converged comparison).
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from ..data.corpus import Corpus, Vocabulary
from ..data.vocab import UNK
from ..models.energy import EnergyConfig, EnergyNPLM
from ..models.nplm import NPLMConfig
from ..numerics.fused import FusedNPLM
from ..training.trainer import TrainConfig, train
from .common import provenance
from .output_methods import TimedBackend
from .skeleton import rounded_history, run_folder, write_whole

ENERGY_SLICE = (50_000, 10_000, 10_000)  # train / valid / test tokens for the energy network
QUICK_ENERGY_SLICE = (3_000, 1_000, 1_000)
ENERGY_EPOCHS = 3


def evaluate(model, corpus, batch: int = 1024) -> dict:
    """Exact valid and test perplexities, and the test-set examples/s of that exact evaluation."""
    n = model.order
    out = {}
    for split in ("valid", "test"):
        ctx, tgt = corpus.windows(split, n)
        t0, c0 = time.perf_counter(), time.process_time()
        out[f"{split}_ppl"] = model.perplexity(ctx, tgt, batch)
        if split == "test":
            out["eval_seconds"], out["eval_cpu_seconds"] = time.perf_counter() - t0, time.process_time() - c0
            out["eval_examples_per_s"] = len(tgt) / out["eval_seconds"]
            out["eval_examples_per_cpu_s"] = len(tgt) / out["eval_cpu_seconds"]
    return out


def energy_slice(corpus, sizes: tuple[int, int, int], min_count: int = 4):
    """The first ``sizes`` = (train, valid, test) tokens of each split of ``corpus``, with a vocabulary of
    their own: words seen fewer than ``min_count`` times in the slice become <unk> (the paper's rule,
    applied to the slice). The energy network's cost grows with |V|, hence the slice."""
    parts = [corpus.split(s)[:k] for s, k in zip(("train", "valid", "test"), sizes)]
    ids = np.concatenate(parts)
    counts = np.bincount(ids, minlength=corpus.V)
    unk = corpus.vocab.unk
    keep = np.flatnonzero((counts >= min_count) & (np.arange(corpus.V) != unk))
    keep = keep[np.lexsort((keep, -counts[keep]))]  # most frequent first
    new = np.full(corpus.V, len(keep), np.int32)  # everything else: <unk>, the last id
    new[keep] = np.arange(len(keep))
    words = [corpus.vocab.words[i] for i in keep] + [UNK]
    slice_counts = np.r_[counts[keep], counts.sum() - counts[keep].sum()]
    a, b = len(parts[0]), len(parts[0]) + len(parts[1])
    return Corpus(name=f"{corpus.name}[slice {sizes[0]}/{sizes[1]}/{sizes[2]}]",
                  vocab=Vocabulary(words, slice_counts), ids=new[ids], bounds=(a, b))


def train_and_measure(name: str, model, corpus, cfg: TrainConfig, folder: Path, stamp: dict, force: bool,
                      quiet: bool) -> dict:
    """Train (or resume) one model in ``folder`` through the one trainer (timing the updates), evaluate it
    exactly: its row."""
    started = time.monotonic()
    with run_folder(folder, stamp, force, fresh_ok=True, what=name) as resume:
        history = train(model, corpus, cfg, out_dir=folder, resume=resume, quiet=quiet,
                        backend=TimedBackend(model, cfg))
    epochs = history["epochs"]
    timed = [e for e in epochs if not e.get("timing_partial")] or epochs  # epochs timed from start to end
    t_train = sum(e.get("train_seconds", 0.0) for e in timed)
    t_cpu = sum(e.get("train_cpu_seconds", 0.0) for e in timed)
    examples = len(timed) * (len(corpus.train) - model.order + 1)
    row = {"method": name, "cost_per_example": corpus.V, "epochs": len(epochs), "best_epoch": history["best_epoch"],
           "train_examples_per_s": examples / t_train if t_train else None, "train_seconds": round(t_train, 1),
           "train_examples_per_cpu_s": examples / t_cpu if t_cpu else None, "train_cpu_seconds": round(t_cpu, 1),
           **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in evaluate(model, corpus).items()},
           "num_params": model.num_params(), "history": rounded_history(epochs)}
    return {**row, **provenance(started)}


def with_ratios(rows: list[dict]) -> list[dict]:
    """Each row's training and evaluation speed (wall and CPU) and test perplexity over the first row's."""
    first = rows[0]
    for r in rows:
        for key, ratio in (("train_examples_per_s", "speedup"), ("train_examples_per_cpu_s", "speedup_cpu"),
                           ("eval_examples_per_s", "eval_speedup"), ("test_ppl", "ppl_ratio")):
            ok = first.get(key) and r.get(key)
            r[f"{ratio}_vs_full"] = round(r[key] / first[key], 4) if ok else None
    return rows


def run_energy(corpus, train_cfg: TrainConfig, network: dict, out: Path, root: Path, quick: bool, force: bool,
               quiet: bool) -> Path:
    """The energy network and the paper's network (same n, m, h) on a slice of ``corpus`` with its own
    vocabulary, written to ``<out stem>_energy.json``."""
    started = time.monotonic()
    sizes = QUICK_ENERGY_SLICE if quick else ENERGY_SLICE
    small = energy_slice(corpus, sizes)
    cfg = replace(train_cfg, lr=1.0, epochs=ENERGY_EPOCHS, seed=0)
    rows = []
    for name in ("full", "energy"):
        net = dict(n=network["n"], m=network["m"], h=network["h"], seed=cfg.seed)
        model = FusedNPLM(NPLMConfig(V=small.V, direct=False, **net)) if name == "full" else EnergyNPLM(
            EnergyConfig(V=small.V, **net))
        stamp = {"method": name, "corpus": small.name, "V": small.V, "train": asdict(cfg)}
        rows.append(train_and_measure(name, model, small, cfg, root / "energy" / name, stamp, force, quiet))
    path = out.with_name(f"{out.stem}_energy.json")
    write_whole(path, "output-layers", {
        "corpus": small.name, "V": small.V, "tokens": dict(zip(("train", "valid", "test"), sizes)),
        "train": asdict(cfg), "note": "the slice's own vocabulary: words seen fewer than 4 times in the slice are "
                                      "<unk>; one seed, a fixed number of epochs (not the comparison protocol)",
        "rows": with_ratios(rows)}, started)
    if not quiet:
        for r in rows:
            print(f"{r['method'] + ' (slice)':16} valid {r['valid_ppl']:8.1f} test {r['test_ppl']:8.1f} "
                  f"x{r['speedup_cpu_vs_full'] or 0:.3f} the paper's network's speed (CPU)", flush=True)
    return path
