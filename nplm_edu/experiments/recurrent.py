"""``python -m nplm_edu reproduce recurrent``: after 2003, the recurrent language models on the paper's data.

An Elman network (Elman 1990; Mikolov et al. 2010) and an LSTM (Hochreiter & Schmidhuber 1997) trained
on the same Brown split and vocabulary as Table 1 (|V| = 17,907), each read as B = 32 parallel streams
with truncated backpropagation through time over T = 35 steps, the state carried from batch to batch
(:mod:`nplm_edu.training.stream`), with the NPLM's trainer: the same checkpoints, bit-exact resume,
early stopping on validation. Every choice is fixed here before the runs (below, in ``SETTINGS``); none
is chosen on the test set. Each model is scored over every test token with its state carried through the
whole test stream, and again with the state reset at every paragraph mark; it is mixed with our modified
Kneser-Ney 5-gram by one weight fitted by EM on validation (section 4's mixture). Ratios are to the KN
5-gram's test perplexity of data/results/ngrams.json (307.3 on Brown).

The settings, for both cells: m = h = 256, B = 32, T = 35, the loss is the mean NLL per token, SGD
with lr 20 (LSTM) or 5 (Elman) decaying by 0.8 per epoch, gradient norm clipped at 0.25 (the choices
of PyTorch's word-language-model example for this loss; Zaremba et al. 2014 clip at 5 the gradient
of the loss summed over the T steps, 0.14 per token), inverted dropout 0.3 on x_t and h_t (Zaremba
et al. 2014, non-recurrent connections only), no weight decay, at most 15 epochs with patience 2,
the state reset at the start of every epoch only. The Elman network's lr was chosen in short trials
on validation (data/results/recurrent_trials/: the first 200,000 training tokens, the next 40,000
as validation, two epochs, no test set): at lr 20 and 10 (clip 0.25) and at lr 5 with clip 1 it
diverged; lr 5 beat lr 2 (validation 781 against 870); dropout 0, 0.1 and 0.3 were alike after two
epochs (889, 766, 781), so it keeps the LSTM's 0.3. Commands::

    python -m nplm_edu reproduce recurrent              # Brown, hours on one core: recurrent.json
    python -m nplm_edu reproduce recurrent --quick      # the same pipeline on a slice: runs/results/recurrent_quick.json

Each model trains in ``<runs-dir>/<out stem>/<model>/`` and checkpoints there after every epoch, every
10 minutes and on Ctrl-C; rerunning the same command resumes, and the results file is rewritten
after each model, with the models finished so far.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..analysis.evaluation import r3
from ..analysis.mixture import batched_log_prob
from ..analysis.recurrent import by_distance, distance_to_mark, gradient_through_time, mixture_with, ppl
from ..data.corpus import CorpusSpec
from ..errors import UserError
from ..models.ngram import KneserNey
from ..models.rnn import CELLS, RecurrentConfig
from ..numerics.recurrent import recurrent_model
from ..training.stream import StreamBackend, StreamConfig, paragraph_id, split_log_probs, split_stream
from ..training.config import TRAJECTORY, TrainConfig
from ..training.trainer import train
from .common import RESULTS, is_full_brown, kn5_test, provenance
from .skeleton import merge_results, results_file, rounded_history, run_folder, runs_for
from .table1 import table_corpus

_TRAIN = TrainConfig(epochs=15, batch=32, lr=20.0, decay_rate=0.0, lr_decay=0.8, weight_decay=0.0,
                     dropout_x=0.3, dropout_a=0.3, patience=2, seed=0)
SETTINGS = {"lstm": (RecurrentConfig(V=2, cell="lstm", m=256, h=256), _TRAIN, StreamConfig(T=35, clip=0.25)),
            "rnn": (RecurrentConfig(V=2, cell="rnn", m=256, h=256), replace(_TRAIN, lr=5.0),
                    StreamConfig(T=35, clip=0.25))}
QUICK = dict(h=32, m=32, batch=8, T=10, epochs=2)  # --quick: a small network on a slice, two epochs
GRAD_K = 50  # steps back of the gradient-through-time measurement
TARGETS = {"lstm": 0.70, "lstm_mix": 0.65, "rnn": 0.80}  # bars set by this project (ratios to our KN 5-gram)


@dataclass
class RecurrentOptions:
    """Which models, and overrides of ``SETTINGS`` for all of them (None: the fixed setting);
    ``test``: False scores validation only (for trials of settings, which never see the test set)."""

    models: str = "lstm,rnn"
    quick: bool = False
    test: bool = True
    runs_dir: str | None = None
    force: bool = False
    h: int | None = None
    m: int | None = None
    batch: int | None = None
    T: int | None = None
    clip: float | None = None
    lr: float | None = None
    lr_decay: float | None = None
    dropout: float | None = None
    weight_decay: float | None = None
    epochs: int | None = None
    patience: int | None = None
    seed: int | None = None


FIELDS = ("h", "m", "batch", "T", "clip", "lr", "lr_decay", "dropout", "weight_decay", "epochs", "patience", "seed")


def settings(cell: str, opts: RecurrentOptions, V: int):
    """(model, training, stream) configurations of one model: SETTINGS with the options' overrides."""
    net, cfg, stream = SETTINGS[cell]
    o = {**(QUICK if opts.quick else {}), **{k: v for k, v in asdict(opts).items() if v is not None and k in FIELDS}}
    seed = o.get("seed", cfg.seed)
    net = replace(net, V=V, h=o.get("h", net.h), m=o.get("m", net.m), seed=seed)
    drop = o.get("dropout")
    cfg = replace(cfg, **{k: o[k] for k in ("batch", "lr", "lr_decay", "weight_decay", "epochs", "patience", "seed")
                          if k in o}, **({} if drop is None else {"dropout_x": drop, "dropout_a": drop}))
    stream = replace(stream, T=o.get("T", stream.T), clip=o.get("clip", stream.clip))
    net.validate()
    cfg.validate()
    stream.validate()
    return net, cfg, stream


def parse_models(text: str) -> list[str]:
    models = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in models if m not in CELLS]
    if not models or bad:
        raise UserError(f"models takes a comma-separated list of {', '.join(CELLS)}, got {text!r}", setting="models")
    return models


def train_one(cell, corpus, opts, run_root: Path, quiet: bool):
    """Train (or resume) one model in its run folder; returns (model, history, seconds, resumed, settings)."""
    net, cfg, stream = settings(cell, opts, corpus.V)
    run_dir = run_root / cell
    stamp_data = {"model": asdict(net), "train": {k: getattr(cfg, k) for k in TRAJECTORY}, "stream": asdict(stream),
                  "epochs": cfg.epochs, "patience": cfg.patience, "corpus": corpus.name,
                  "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid", "test")}}
    model = recurrent_model(net)
    t0 = time.perf_counter()
    with run_folder(run_dir, stamp_data, opts.force, opts.quick, what=cell) as resumed:
        if not quiet:
            print(f"== {cell}: m {net.m}, h {net.h}, {model.num_params():,} parameters; B {cfg.batch}, T {stream.T}, "
                  f"lr {cfg.lr:g} (x{cfg.lr_decay:g} per epoch), clip {stream.clip:g}, dropout {cfg.dropout_x:g}/"
                  f"{cfg.dropout_a:g}; {'resuming' if resumed else 'training'} in {run_dir}", flush=True)
        history = train(model, corpus, cfg, out_dir=run_dir, resume=resumed, quiet=quiet,
                        backend=StreamBackend(model, cfg, stream))
    if not history["epochs"]:
        raise UserError(f"no epoch of {cell} finished: nothing to evaluate")
    return model, history, time.perf_counter() - t0, resumed, (net, cfg, stream)


def evaluate(cell, model, history, corpus, kn, kn5_ref, seconds, resumed, setting) -> dict:
    """The row of one model: perplexities (state carried; reset at <p>), the EM mixture with the KN 5-gram.
    Without test log-probabilities in ``kn`` (trials), validation only."""
    net, cfg, stream = setting
    t0 = time.perf_counter()
    splits = [s for s in ("valid", "test") if s in kn]
    lp = {s: split_log_probs(model, corpus, s) for s in splits}
    has_p = paragraph_id(corpus.vocab) is not None
    reset = {s: split_log_probs(model, corpus, s, reset_at_paragraph=True) for s in splits} if has_p else {}
    if "test" not in kn:
        lp["test"] = reset["test"] = kn["test"] = None
    mix = mixture_with(lp["valid"], kn["valid"], lp["test"], kn["test"])
    epochs = history["epochs"]
    train_s = sum(e["seconds"] - e.get("valid_seconds", 0) for e in epochs)
    tokens = (len(corpus.train) // cfg.batch - 1) * cfg.batch * len(epochs)
    row = {"model": cell, "hidden": net.h, "m": net.m, "parameters": model.num_params(),
           "epochs": len(epochs), "best_epoch": history["best_epoch"], "stopped_early": history["stopped_early"],
           "updates": history["updates"], "valid_ppl": r3(ppl(lp["valid"])), "test_ppl": r3(ppl(lp["test"])),
           "valid_reset_ppl": r3(ppl(reset["valid"])) if has_p else None,
           "test_reset_ppl": r3(ppl(reset["test"])) if has_p else None,
           "mix_weight": mix["weight"], "mix_valid_ppl": r3(mix["valid"]), "mix_test_ppl": r3(mix["test"])}
    row.update({k.replace("ppl", "over_kn5"): (round(row[k] / kn5_ref, 3) if row[k] is not None else None)
                for k in ("test_ppl", "test_reset_ppl", "mix_test_ppl")})
    if has_p and lp["test"] is not None:
        dist = distance_to_mark(split_stream(corpus, "test")[0], paragraph_id(corpus.vocab))
        row["test_by_distance"] = by_distance(dist, {cell: lp["test"], f"{cell}_reset": reset["test"],
                                                     "kn5": kn["test"]})
    # the vanishing gradient, measured on the validation stream: ||dL_t/dh_{t-k}|| for k = 0..50
    row["gradient_through_time"] = gradient_through_time(model, split_stream(corpus, "valid")[0], K=GRAD_K)
    row.update({"tokens_per_second": round(tokens / max(train_s, 1e-9), 1), "train_seconds": round(train_s, 1),
                "seconds_training_this_call": round(seconds, 1), "eval_seconds": round(time.perf_counter() - t0, 1),
                "wall_seconds": round(sum(e["seconds"] for e in epochs) + time.perf_counter() - t0, 1),
                "resumed": resumed, "settings": {"model": asdict(net), "train": asdict(cfg), "stream": asdict(stream)},
                "history": rounded_history(epochs)})
    return row


def run_recurrent(opts: RecurrentOptions | None = None, spec: CorpusSpec | None = None, out=None,
                  quiet: bool = False) -> Path:
    """Train every model of ``opts.models`` (resuming), score it, mix it with the KN 5-gram, write the JSON."""
    opts = opts or RecurrentOptions()
    spec = spec or CorpusSpec(corpus="brown")
    started = time.monotonic()
    cells = parse_models(opts.models)
    out = results_file(out, "recurrent", opts.quick)  # checked before any work
    corpus = table_corpus(spec, opts.quick)
    for cell in cells:
        settings(cell, opts, corpus.V)  # every setting checked before hours of training
    full_brown = not opts.quick and is_full_brown(corpus, spec.min_count)
    doc, kn, kn5_ref = kn5_baseline(corpus, opts.test, full_brown)
    doc.update(quick=bool(opts.quick), nplm_beyond=_beyond_row() if full_brown else None)
    runs = runs_for(opts.runs_dir, out)
    for cell in cells:
        row_started = time.monotonic()
        model, history, seconds, resumed, setting = train_one(cell, corpus, opts, runs, quiet)
        if not quiet:
            print(f"   scoring {cell} on valid and test (state carried; reset at <p>), mixing with KN5", flush=True)
        row = evaluate(cell, model, history, corpus, kn, kn5_ref, seconds, resumed, setting)
        row.update(provenance(row_started))
        merge_results(out, "recurrent", doc, {cell: row}, started, key="model", order=CELLS,
                      then=lambda d: {**d, "complete": {r["model"] for r in d["rows"]} == set(CELLS),
                                      "target_met": _targets_met(d["rows"]) if full_brown and opts.test else None})
        if not quiet:
            print(f"{cell}: valid {row['valid_ppl']}  test {row['test_ppl']} ({row['test_over_kn5']} of KN5)  reset "
                  f"at <p> {row['test_reset_ppl']}  mixed with KN5 {row['mix_test_ppl']} ({row['mix_test_over_kn5']})",
                  flush=True)
    print(f"wrote {out}")
    return out


def kn5_baseline(corpus, test: bool, full_brown: bool):
    """(the results file's header, the KN 5-gram's log-probabilities per split, its reference test perplexity)."""
    t0 = time.perf_counter()
    kn5 = KneserNey(5, corpus.V).fit(corpus.train)
    kn = {s: batched_log_prob(kn5, *corpus.windows(s, 5))  # every token, in order
          for s in (("valid", "test") if test else ("valid",))}
    kn5_ref = kn5_test(corpus, full_brown) or (r3(ppl(kn["test"])) if test else None)
    doc = {"corpus": corpus.name, "V": corpus.V,
           "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid", "test")},
           "what": "recurrent language models (Elman's RNN, 1990; the LSTM of Hochreiter and Schmidhuber, 1997, "
                   "with the forget gate of Gers et al., 2000) read as B parallel streams with truncated BPTT "
                   "over T steps, state carried; scored with the state carried through each split and reset at every <p>; mixed with our modified Kneser-Ney 5-gram by one EM weight "
                   "fitted on validation (each row's settings say the rest)",
           "kn5": {"valid": r3(ppl(kn["valid"])), "test": r3(ppl(kn["test"])) if test else None, "test_ref": kn5_ref,
                   "ref_source": "data/results/ngrams.json" if full_brown else "fitted in this run",
                   "seconds": round(time.perf_counter() - t0, 1)},
           "targets": TARGETS}
    return doc, kn, kn5_ref


def _targets_met(rows) -> dict:
    r = {row["model"]: row for row in rows}
    met = {}
    if "lstm" in r:
        met["lstm"] = r["lstm"]["test_over_kn5"] <= TARGETS["lstm"]
        met["lstm_mix"] = r["lstm"]["mix_test_over_kn5"] <= TARGETS["lstm_mix"]
    if "rnn" in r:
        met["rnn"] = r["rnn"]["test_over_kn5"] <= TARGETS["rnn"]
    return met


def _beyond_row() -> dict | None:
    """The NPLM beyond the paper (data/results/beyond.json), for comparison."""
    try:
        d = json.loads((RESULTS / "beyond.json").read_text())
        return {"test": d["test"], "test_over_kn5": d["test_over_kn5"]["network"],
                "mix_kn5_test_over_kn5": d["test_over_kn5"].get("mix_kn5_em")}
    except (OSError, ValueError, KeyError, TypeError):
        return None

