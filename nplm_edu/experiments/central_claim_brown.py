"""The central claim on Brown (part of ``reproduce central-claim``, :mod:`.central_claim`).

1. Per-token comparison of a trained network with our Kneser-Ney 5-gram on the test tokens whose
   trigram (w_{t-2}, w_{t-1}, w_t) never occurs in the training set, split by whether replacing
   one of the two context words by one of its 10 nearest neighbours (cosine, in the network's
   trained C) gives a trigram that does (:mod:`nplm_edu.analysis.novelty`); a control replaces
   the neighbours by random words of about the same frequency.
   The network is MLP9 of Table 1 trained with the table's settings (n 5, h 100, m 30, no direct
   connections; K 128, eps_0 1.0, r 1e-4, weight decay 1e-4, 6 epochs, seed 0): a fixed budget,
   about 20-30 minutes on one core, checkpointed so an interruption loses a few minutes.
   On the same network, section 5's rule for out-of-vocabulary words
   (:func:`~nplm_edu.analysis.oov.oov_study`): every word the vocabulary rule made ``<unk>`` and
   that occurs twice or more gets C(j) from its first occurrence (in the training set), and the
   tokens after its later occurrences are scored with C(<unk>), with C(j), and with another such
   word's C(j') (aggregates only).
2. The paper's negative result (section 1.2): the same network on a slice of Brown (the first
   200,000 training tokens, 50,000 validation tokens, 3 epochs), with C learned, with C fixed to the
   first 30 principal components of the co-occurrence rows
   (:func:`~nplm_edu.analysis.cooccurrence.pca_features`), and with C fixed at its random initial
   values. A fixed table is rescaled to the root mean square of the learned C of the same run, so
   the two fixed tables differ from the learned one only in their directions.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from ..analysis.cooccurrence import nearest_neighbours, pca_features
from ..analysis.evaluation import r3
from ..analysis.mixture import batched_log_prob
from ..analysis.novelty import compare, frequency_matched, ngram_keys, novelty_groups
from ..analysis.oov import oov_study
from ..data.corpus import brown_tokens, windows
from ..models.ngram import KneserNey
from ..models.nplm import NPLMConfig
from ..numerics.fused import FusedNPLM
from ..training.trainer import TrainConfig, train
from .skeleton import rounded_history, run_folder
from .table1 import ROWS, TRAIN as TABLE1_TRAIN

NETWORK = NPLMConfig(V=2, **ROWS["MLP9"])
TRAIN = replace(TABLE1_TRAIN, epochs=6)  # Table 1's SGD (K 128, lr 1.0, r 1e-4, weight decay 1e-4, seed 0), 6 epochs
NEIGHBOURS, ORDER = 10, 3  # k nearest neighbours; the n-gram whose novelty is tested (a trigram)
SLICE, SLICE_EPOCHS, PCA_CONTEXTS = (200_000, 50_000), 3, 1000
CONTROL_SEED = 0
# --quick: the same pipeline in seconds (a small network, a small slice, a short test)
QUICK = dict(network=NPLMConfig(V=2, n=5, m=30, h=20, direct=False), slice=(20_000, 5_000), epochs=1, test=5_000,
             pca_contexts=200, oov_tokens=200_000)


def rescale(table: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``table`` times the ratio of root mean squares: the magnitude of ``target``, its own directions."""
    return table * np.sqrt(np.mean(np.square(target, dtype=np.float64)) / np.mean(np.square(table, dtype=np.float64)))


def train_network(cfg: NPLMConfig, tcfg: TrainConfig, data, run_dir: Path, force: bool, quiet: bool, C=None):
    """Train (or resume, or reload when finished) a network in ``run_dir``; ``C``: a fixed table."""
    model = FusedNPLM(cfg)
    if C is not None:
        model.params["C"][:] = C
    stamp = {"model": asdict(cfg), "train": asdict(tcfg), "examples": {"train": int(len(data[0][1])),
                                                                       "valid": int(len(data[1][1]))}}
    t0 = time.perf_counter()
    with run_folder(run_dir, stamp, force, what=run_dir.name) as resume:
        history = train(model, data, tcfg, out_dir=run_dir, resume=resume, quiet=quiet)
    return model, history, time.perf_counter() - t0, resume


def summary(history: dict, seconds: float, resumed: bool) -> dict:
    return {"epochs_run": len(history["epochs"]), "best_epoch": history["best_epoch"],
            "best_valid_ppl": r3(history["best_valid_ppl"]), "updates": history["updates"],
            "train_seconds_this_run": round(seconds, 1), "resumed": resumed,
            "train_seconds_all_epochs": round(sum(e["seconds"] for e in history["epochs"]), 1),
            "history": rounded_history(history["epochs"])}


def brown_data(corpus, quick: bool) -> dict:
    """The network's shape, epochs and windows (sliced with ``quick``) for both parts."""
    net = replace(QUICK["network"] if quick else NETWORK, V=corpus.V, seed=TRAIN.seed)
    w = {s: corpus.windows(s, net.n) for s in ("train", "valid", "test")}
    if quick:
        cut = dict(zip(("train", "valid", "test"), QUICK["slice"] + (QUICK["test"],)))
        w = {s: (c[:cut[s]], t[:cut[s]]) for s, (c, t) in w.items()}
    return {"net": net, "epochs": QUICK["epochs"] if quick else TRAIN.epochs, "windows": w,
            "train_ids": corpus.train[:QUICK["slice"][0] + net.n - 1] if quick else corpus.train}


def novel_trigrams(corpus, runs: Path, quick: bool, force: bool, quiet: bool):
    """Part 1 (module docstring): returns (its JSON section, the trained network and its run)."""
    d = brown_data(corpus, quick)
    net, epochs, V = d["net"], d["epochs"], corpus.V
    te_ctx, te_tgt = d["windows"]["test"]
    if not quiet:
        print(f"== central claim, Brown: MLP9-like network n {net.n} h {net.h} m {net.m}, {epochs} epochs", flush=True)
    run = train_network(net, replace(TRAIN, epochs=epochs), (d["windows"]["train"], d["windows"]["valid"]),
                        runs / "mlp9", force, quiet)
    model, hist, secs, resumed = run
    kn5 = KneserNey(5, V).fit(d["train_ids"])
    logs = {"network": batched_log_prob(model, te_ctx, te_tgt), "kn5": kn5.log_prob(te_ctx, te_tgt)}
    table = np.unique(ngram_keys(*windows(d["train_ids"], ORDER), V))
    ctx3 = te_ctx[:, -(ORDER - 1):]
    words = np.unique(ctx3)
    nn = np.full((V, NEIGHBOURS), -1, np.int64)
    nn[words] = nearest_neighbours(model.params["C"], words, NEIGHBOURS)
    control = frequency_matched(nn, np.random.default_rng(CONTROL_SEED))
    examples = {}
    for w in ("Monday", "said", "man", "red", "three"):
        if w in corpus.vocab.index and corpus.vocab.index[w] in words:
            examples[w] = corpus.vocab.decode(nn[corpus.vocab.index[w]])
    part1 = {
        "network": {"model": asdict(net), "train": {k: v for k, v in asdict(replace(TRAIN, epochs=epochs)).items()
                                                    if k in ("epochs", "batch", "lr", "decay_rate", "weight_decay",
                                                             "patience", "seed")},
                    **summary(hist, secs, resumed),
                    "test_ppl": r3(np.exp(-logs["network"].mean()))},
        "kn5_test_ppl": r3(np.exp(-logs["kn5"].mean())),
        "test_tokens": int(len(te_tgt)), "order": ORDER, "neighbours": NEIGHBOURS,
        "design": f"trigrams of the test set, seen or not in training; a context word replaced by one of its "
                  f"{NEIGHBOURS} nearest neighbours by cosine in the network's C; control: each neighbour replaced "
                  f"by a random word within 10% of its frequency rank (seed {CONTROL_SEED}); the network is the "
                  "Table 1 MLP9 recipe, its budget fixed in advance",
        "neighbour_examples": examples,
        "groups": compare(novelty_groups(ctx3, te_tgt, table, nn, V), logs, "network", "kn5"),
        "control_frequency_matched": compare(novelty_groups(ctx3, te_tgt, table, control, V), logs, "network", "kn5"),
    }
    end = QUICK["oov_tokens"] if quick else len(corpus.ids)
    oov = oov_study(model, corpus.ids[:end], brown_tokens()[:end], corpus.vocab.unk, first=corpus.bounds[0])
    part1["oov"] = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in oov.items() if k != "features"}
    part1["oov"]["design"] = ("words mapped to <unk> seen twice or more, first occurrence in the training set; C(j) "
                              "from that occurrence's context; scored: the n-1 tokens after each later occurrence "
                              "whose context holds no other <unk>; control C(j') of another such word (seed 0)")
    for part in ("groups", "control_frequency_matched"):
        for g in part1[part].values():
            for m in ("network", "kn5"):
                if g[f"mean_log_prob_{m}"] is not None:
                    g[f"ppl_{m}"] = r3(np.exp(-g[f"mean_log_prob_{m}"]))
    return part1, run


def fixed_features(corpus, runs: Path, quick: bool, force: bool, quiet: bool, part1_run=None) -> dict:
    """Part 2 (module docstring). With ``quick`` the slice is part 1's data, and ``part1_run`` its network."""
    d = brown_data(corpus, quick)
    net, V = d["net"], corpus.V
    slice_ = QUICK["slice"] if quick else SLICE
    (tr_ctx, tr_tgt), (va_ctx, va_tgt) = d["windows"]["train"], d["windows"]["valid"]
    te_ctx, te_tgt = d["windows"]["test"]
    s_tr, s_va = (tr_ctx[:slice_[0]], tr_tgt[:slice_[0]]), (va_ctx[:slice_[1]], va_tgt[:slice_[1]])
    s_ids = corpus.train[:slice_[0] + net.n - 1]
    s_cfg = replace(TRAIN, epochs=QUICK["epochs"] if quick else SLICE_EPOCHS)
    variants = {}
    if quick and part1_run is not None:  # the same network on the same data
        learned_run = part1_run
    else:
        learned_run = train_network(net, s_cfg, (s_tr, s_va), runs / ("mlp9" if quick else "slice_learned"), force,
                                    quiet)
    C_learned = learned_run[0].params["C"]
    contexts = QUICK["pca_contexts"] if quick else PCA_CONTEXTS
    tables = {"fixed_pca": pca_features(s_ids, V, net.m, contexts),
              "fixed_random": FusedNPLM(net).params["C"].astype(np.float64)}
    for name, run in [("learned", learned_run)] + [(k, None) for k in tables]:
        if run is None:
            if not quiet:
                print(f"== slice, C {name}", flush=True)
            run = train_network(net, replace(s_cfg, frozen="C"), (s_tr, s_va), runs / f"slice_{name}", force,
                                quiet, C=rescale(tables[name], C_learned))
        m, h, secs, resumed = run
        lp = batched_log_prob(m, te_ctx, te_tgt)
        variants[name] = {**{k: v for k, v in summary(h, secs, resumed).items() if k != "history"},
                          "valid_ppl_by_epoch": [round(e["valid_ppl"], 3) for e in h["epochs"]],
                          "test_ppl": r3(np.exp(-lp.mean()))}
    return {"train_tokens": int(len(s_tr[1])), "valid_tokens": int(len(s_va[1])), "test_tokens": int(len(te_tgt)),
            "epochs": s_cfg.epochs, "pca_context_words": contexts, "variants": variants}


def run_brown(corpus, runs: Path, quick: bool, force: bool, quiet: bool) -> dict:
    """Both parts on the loaded Brown corpus (see the module docstring); returns the JSON section."""
    part1, run = novel_trigrams(corpus, runs, quick, force, quiet)
    part2 = fixed_features(corpus, runs, quick, force, quiet, part1_run=run)
    return {"corpus": corpus.name, "V": corpus.V, "novel_trigrams": part1, "fixed_features": part2}
