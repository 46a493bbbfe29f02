"""``python -m nplm_edu reproduce recurrent``: after 2003, recurrent language models against the NPLM, compared by one protocol.

Every row of ``recurrent_rows.ROWS`` is trained by the comparison protocol
(``protocol.RECURRENT_PROTOCOL``); the default rows (``ORDER``) are the Elman network, the LSTM, the
GRU and two controls (the same LSTM fed only the last four words, and the NPLM with the LSTM's dropout
and about its parameter count), and three more train only when named (``NAMED_ONLY``: the
character-aware LSTM and the two Transformers). Each row has its learning rate chosen on validation
from the grid 1, 3, 10, 30 (the validation perplexity after 2 epochs, seed 0), then seeds 0, 1, 2
trained to early stopping (patience 3, at most 40 epochs), the test set scored once per seed, on the
comparison slice of Brown (:func:`~nplm_edu.experiments.protocol.comparison_corpus`: the first
200,000 training tokens, the first 50,000 validation tokens, the whole test split, the paper's
vocabulary), on one thread. The training rule every row shares, and what each seed's row holds, are
in :mod:`nplm_edu.experiments.recurrent_rows`. The difference lstm - lstm-4 is what the words beyond
the last four buy the LSTM; lstm - nplm-dropout compares the architectures at equal regularization
and about equal size. Commands::

    python -m nplm_edu reproduce recurrent                              # the default rows, every seed: recurrent.json
    python -m nplm_edu reproduce recurrent --models char-lstm,transformer-4,transformer-32  # the other three
    python -m nplm_edu reproduce recurrent --models lstm,gru --seeds 0,1  # some rows and seeds (one process each)
    python -m nplm_edu reproduce recurrent --quick                      # the same pipeline on a tiny slice

Each run (row, learning rate, seed) trains in its own folder under ``<runs-dir>/<out stem>/`` and
checkpoints there; rerunning the same command resumes. Each seed's row is merged into the results
file under its lock when it is done, so processes given different rows fill one file.

Compute plan (m = h = 256, on the comparison slice, one thread), from one epoch of each row timed
while other programs shared the processor (so these CPU seconds run high, up to about twice those of
a run alone): the LSTM 122 CPU seconds an epoch (updates and the validation perplexity over 50,000
words), nplm-dropout 132; the GRU (estimated from its reference, which runs about 1.35 times the fast
LSTM's time an update; its fast path costs less) about 165, lstm-4 (four recurrent steps a word, the
output layer once) about 160, the Elman network about 105: about 685 CPU seconds an epoch of the five
rows. A row costs 4 grid values x 2 epochs = 8 epochs, then its seeds: 8 + 16 + 18 + 18 = 60 epochs
if a run stops near epoch 15, x 685 s = 41,000 s = 11.4 CPU hours for the table (8 + 38 + 40 + 40 =
126 epochs, 24 hours, with every seed at the cap), plus scoring each seed (validation, test with the
state carried and reset: under an epoch's cost). Two processes, one a core, take about half each: gru
and lstm-4 (about 325 s an epoch) beside lstm, rnn and nplm-dropout (about 360 s).

Three rows run only when named (``--models char-lstm,transformer-4,transformer-32``). From 20 and then
30 updates of each (after one to warm up) and the validation of its first 2,000 words, timed twice by
process CPU time, beside much other work and then beside less (the two measurements 7 to 12% apart),
an epoch of updates and validation costs: char-lstm 136-150 + 13-17 = 149-167 CPU seconds,
transformer-4 159-165 + 50-66 = 209-231, transformer-32 137-138 + 377-411 = 515-547 (every
validation word is read from its own window of 32 words). With runs stopping near epoch 25 (the GRU's
and the Elman network's first seeds were still improving at epochs 20 and 23), a row costs 8 + 23 +
25 + 25 = 81 epochs: char-lstm 3.4-3.8 CPU hours, transformer-4 4.7-5.2, transformer-32 11.6-12.3,
19.7-21.3 for the three (30.5-33.0 with every seed at the 40-epoch cap); on two cores about 11
hours, char-lstm and transformer-4 in one process beside transformer-32 in the other.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

from ..analysis.evaluation import r3
from ..analysis.recurrent import ppl
from ..analysis.sampling import SAMPLES
from ..data.corpus import CorpusSpec
from ..errors import UserError
from ..models.rnn import RecurrentConfig
from ..numerics.threads import one_blas_thread
from ..training.stream import StreamConfig
from .protocol import (COMPARISON_SLICE, RECURRENT_PROTOCOL, choose_lr, comparison_data, parse_seeds, run_seeds,
                       is_scored)
from .recurrent_rows import N, QUICK as QUICK_SIZES, ROWS, RULE, STREAM, kn5_log_probs, parameter_counts, sizes
from .recurrent_words import needs_word_level, with_analysis
from .skeleton import results_file, runs_for

QUICK_SLICE = (5_000, 1_000, 1_000)  # --quick: train / valid / test tokens
QUICK_PROTOCOL = replace(RECURRENT_PROTOCOL, grid_epochs=1, patience=1, max_epochs=2)
ORDER = ("rnn", "lstm", "gru", "lstm-4", "nplm-dropout")  # the table's rows, in this order: the default
NAMED_ONLY = tuple(name for name in ROWS if name not in ORDER)  # the rows trained only when --models names them

# The chapter's small examples (``settings``): one model trained with the stream trainer, its settings given.
SETTINGS = {"lstm": (RecurrentConfig(V=2, cell="lstm", m=256, h=256), replace(RULE, lr=20.0, epochs=15, patience=2),
                     STREAM),
            "rnn": (RecurrentConfig(V=2, cell="rnn", m=256, h=256), replace(RULE, lr=5.0, epochs=15, patience=2),
                    STREAM)}
QUICK = {**QUICK_SIZES, "epochs": 2}


@dataclass
class RecurrentOptions:
    """The command's options (``CLI_OPTIONS``): ``models``, comma-separated rows (default ``ORDER``; the
    rows of ``NAMED_ONLY`` train only when named);
    ``seeds``, comma-separated seeds of the protocol (default all); ``quick``: the pipeline on a tiny
    slice. The other fields override ``SETTINGS`` for :func:`settings` (the chapter's examples)."""

    models: str = ",".join(ORDER)
    seeds: str | None = None
    quick: bool = False
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


CLI_OPTIONS = ("models", "seeds", "quick", "runs_dir", "force")
FIELDS = ("h", "m", "batch", "T", "clip", "lr", "lr_decay", "dropout", "weight_decay", "epochs", "patience", "seed")


def settings(cell: str, opts: RecurrentOptions, V: int):
    """(model, training, stream) configurations of one stream model: SETTINGS with the options' overrides."""
    net, cfg, stream = SETTINGS[cell]
    o = {**(QUICK if opts.quick else {}), **{k: v for k, v in asdict(opts).items() if v is not None and k in FIELDS}}
    seed = o.get("seed", cfg.seed)
    net = replace(net, V=V, h=o.get("h", net.h), m=o.get("m", net.m), seed=seed)
    drop = o.get("dropout")
    cfg = replace(cfg, **{k: o[k] for k in ("batch", "lr", "lr_decay", "weight_decay", "epochs", "patience", "seed")
                          if k in o}, **({} if drop is None else {"dropout_x": drop, "dropout_a": drop}))
    stream = StreamConfig(T=o.get("T", stream.T), clip=o.get("clip", stream.clip))
    net.validate()
    cfg.validate()
    stream.validate()
    return net, cfg, stream


def parse_models(text: str) -> list[str]:
    """Row names from a comma-separated list, in the table's order; one line for an unknown one."""
    models = [m.strip() for m in str(text).split(",") if m.strip()]
    bad = [m for m in models if m not in ROWS]
    if not models or bad:
        raise UserError(f"models takes a comma-separated list of {', '.join(ROWS)}, got {text!r}", setting="models")
    return sorted(set(models), key=lambda m: (ORDER + tuple(ROWS)).index(m))


def header(corpus, kn: dict, quick: bool) -> dict:
    """What the results file says once: its settings, the same for every process filling it, and its
    descriptions (``protocol.DESCRIPTIONS``, merged with those other processes wrote): ``rows``, what each
    row the command can train is (the default rows, then ``NAMED_ONLY``); ``parameters``, each row's
    parameter count (built, not trained); ``descriptions``, both together."""
    names = (*ORDER, *NAMED_ONLY)
    counts = parameter_counts(corpus.V, quick, names)
    return {"corpus": corpus.name, "V": corpus.V, "quick": bool(quick),
            "tokens": {s: int(len(corpus.split(s))) for s in ("train", "valid", "test")},
            "slice": {"train": COMPARISON_SLICE[0], "valid": COMPARISON_SLICE[1], "test": "whole split"}
            if not quick else {"train": QUICK_SLICE[0], "valid": QUICK_SLICE[1], "test": QUICK_SLICE[2]},
            "rows": {name: ROWS[name].what for name in names},
            "rule": {**{k: getattr(RULE, k) for k in ("lr_decay", "weight_decay", "dropout_x", "dropout_a",
                                                        "decay_rate", "threads")},
                     **sizes(quick), "clip": STREAM.clip, "window_n": N, "window_batch": "B T windows",
                     "loss": "mean NLL per token, SGD"},
            "parameters": {**counts,
                           "nplm-dropout/lstm": round(counts["nplm-dropout"] / counts["lstm"], 4)},
            "kn5": {"valid": r3(ppl(kn["valid"])), "test": r3(ppl(kn["test"])),
                    "what": "our modified Kneser-Ney 5-gram fitted on the same training slice"},
            "samples": {"seeds": list(SAMPLES["seeds"]), "length": SAMPLES["length"],
                        "prompt": "the first n-1 = 4 words of the validation split"},
            "descriptions": {name: {"what": ROWS[name].what, "parameters": n} for name, n in counts.items()}}


def run_recurrent(opts: RecurrentOptions | None = None, spec: CorpusSpec | None = None, out=None,
                  quiet: bool = False):
    """Train every chosen row by the protocol (resuming), merge each seed's row into the results file."""
    started = time.monotonic()
    opts = opts or RecurrentOptions()
    spec = spec or CorpusSpec(corpus="brown")
    protocol = QUICK_PROTOCOL if opts.quick else RECURRENT_PROTOCOL
    names, seeds = parse_models(opts.models), parse_seeds(opts.seeds, protocol)  # checked before any work
    out = results_file(out, "recurrent", opts.quick)
    needs_word_level(names, out, seeds)
    corpus = comparison_data(spec, opts.quick, QUICK_SLICE)
    runs = runs_for(opts.runs_dir, out)
    with one_blas_thread():
        kn = kn5_log_probs(corpus, runs)
        doc = header(corpus, kn, opts.quick)
        for name in names:
            run_row(name, corpus, kn, protocol, seeds, runs, out, doc, opts, quiet, started)
    print(f"wrote {out}")
    return out


def run_row(name, corpus, kn, protocol, seeds, runs, out, doc, opts, quiet, started: float) -> list[dict]:
    """One row: its learning rate chosen on validation, then its seeds trained and scored."""
    method = with_analysis(ROWS[name].method(corpus, opts.quick, kn), name, runs, out)
    choice = choose_lr(method, corpus, protocol, runs, opts.force, quiet)
    grid = ", ".join(f"{lr:g}: {'diverged' if v is None else f'{v:.1f}'}" for lr, v in choice["grid"].items())
    print(f"{name}: validation after {protocol.grid_epochs} epochs {grid}; lr {choice['lr']:g}", flush=True)
    rows = run_seeds(method, corpus, protocol, choice, runs, out=out, target="recurrent", doc=doc, seeds=seeds,
                     force=opts.force, quiet=quiet, started=started)
    for r in rows:
        if not is_scored(r):  # diverged before its first validation: nothing was scored
            print(f"{name} seed {r['seed']}: diverged before its first validation", flush=True)
            continue
        print(f"{name} seed {r['seed']}: {r['epochs']} epochs ({r['cpu_seconds_training']:.0f} CPU s), valid "
              f"{r['valid_ppl']}, test {r['test_ppl']}, mixed with KN5 {r.get('mix_test_ppl')}", flush=True)
    return rows
