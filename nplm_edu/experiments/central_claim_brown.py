"""The central claim on Brown (part of ``reproduce central-claim``, :mod:`.central_claim`). Every network
here is trained under the comparison protocol (``claim_runs``): its learning rate chosen on validation
from the grid, then seeds 0, 1, 2 to early stopping, the test set scored once per seed.

1. ``novel-trigrams`` (rows ``brown/*``): per-token comparison of a trained network with our Kneser-Ney 5-gram on the test tokens
   whose trigram (w_{t-2}, w_{t-1}, w_t) never occurs in the training set, split by whether replacing
   one of the two context words by one of its 10 nearest neighbours (cosine, in the network's
   trained C) gives a trigram that does (:mod:`nplm_edu.analysis.novelty`); a control replaces
   the neighbours by random words of about the same frequency. The network has MLP9's shape and
   Table 1's SGD (n 5, h 100, m 30, no direct connections; K 128, r 1e-4, weight decay 1e-4), trained on
   the whole of Brown. On the same network, section 5's rule for out-of-vocabulary words
   (:func:`~nplm_edu.analysis.oov.oov_study`): every word the vocabulary rule made ``<unk>`` and
   that occurs twice or more gets C(j) from its first occurrence (in the training set), and the
   tokens after its later occurrences are scored with C(<unk>), with C(j), and with another such
   word's C(j') (aggregates only). Each seed's network is analysed when its test set is scored.
2. ``fixed-features`` (rows ``brown-slice/*``), the paper's negative result (section 1.2): the same network on the comparisons'
   slice of Brown (``protocol.COMPARISON_SLICE``: the first 200,000 training tokens, 50,000
   validation tokens, the whole test set), with C learned, with C fixed to the first 30 principal
   components of the co-occurrence rows (:func:`~nplm_edu.analysis.cooccurrence.pca_features`), and
   with C fixed at its random initial values. A fixed table is rescaled to the root mean square of the
   learned C of the same seed, so the fixed tables differ from the learned one only in their directions.
"""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np

from ..analysis.cooccurrence import nearest_neighbours, pca_features
from ..analysis.mixture import batched_log_prob
from ..analysis.novelty import compare, frequency_matched, ngram_keys, novelty_groups
from ..analysis.oov import oov_study
from ..data.corpus import brown_tokens, windows
from ..models.ngram import KneserNey
from ..models.nplm import NPLMConfig
from ..numerics.fused import FusedNPLM
from .claim_runs import Ctx, SplitScores, rms, train_seeds
from .protocol import COMPARISON_SLICE, Method
from .table1 import ROWS, TRAIN as TABLE1_TRAIN

NETWORK = NPLMConfig(V=2, **ROWS["MLP9"])
TRAIN = replace(TABLE1_TRAIN, epochs=1)  # Table 1's SGD (K 128, r 1e-4, weight decay 1e-4); lr, epochs: the protocol's
NEIGHBOURS, ORDER, PCA_CONTEXTS, CONTROL_SEED = 10, 3, 1000, 0  # k nearest neighbours; the n-gram tested (a trigram)
EXAMPLES = ("Monday", "said", "man", "red", "three")
VARIANTS = ("learned", "fixed_pca", "fixed_random")
PARTS = ("novel-trigrams", "fixed-features")
GROUPS = ("seen", "neighbour_seen", "no_neighbour")
# --quick: the same pipeline in seconds (a small network, a small slice, a short test)
QUICK = dict(network=NPLMConfig(V=2, n=5, m=30, h=20, direct=False), sizes=(20_000, 5_000, 5_000),
             pca_contexts=200, oov_tokens=200_000)


def rescale(table: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``table`` times the ratio of root mean squares: the magnitude of ``target``, its own directions."""
    return table * (rms(target) / rms(table))


def brown_design(quick: bool) -> dict:
    """The Brown part's settings, as the results file states them."""
    net = QUICK["network"] if quick else NETWORK
    return {"network": {k: v for k, v in asdict(net).items() if k not in ("V", "seed")},
            "train": {k: v for k, v in asdict(TRAIN).items() if k in ("batch", "decay_rate", "weight_decay")},
            "novel_trigrams": {"tokens": list(QUICK["sizes"]) if quick else "the whole corpus", "order": ORDER,
                               "neighbours": NEIGHBOURS, "control_seed": CONTROL_SEED,
                               "design": f"trigrams of the test set, seen or not in training; a context word replaced "
                                         f"by one of its {NEIGHBOURS} nearest neighbours by cosine in the network's "
                                         "C; control: each neighbour replaced by a random word within 10% of its "
                                         f"frequency rank (seed {CONTROL_SEED})"},
            "fixed_features": {"tokens": list(QUICK["sizes"] if quick else COMPARISON_SLICE),
                               "pca_context_words": QUICK["pca_contexts"] if quick else PCA_CONTEXTS,
                               "variants": list(VARIANTS)}}


def network_of(corpus, quick: bool, seed: int) -> FusedNPLM:
    return FusedNPLM(replace(QUICK["network"] if quick else NETWORK, V=corpus.V, seed=seed))


# --------------------------------------------------------------------------- 1. new trigrams, out-of-vocabulary words
def novelty_extra(corpus, brown, quick: bool, kn5_log: np.ndarray):
    """``extra(model)`` for ``claim_runs.SplitScores``: the new-trigram split of ``corpus``'s test tokens
    (module docstring), with nearest neighbours in this network's C, and the out-of-vocabulary rule on the
    stream of ``brown`` (the whole corpus: the rule needs the original words)."""
    V, n = corpus.V, (QUICK["network"] if quick else NETWORK).n
    te_ctx, te_tgt = corpus.windows("test", n)
    table = np.unique(ngram_keys(*windows(corpus.train, ORDER), V))
    ctx3 = te_ctx[:, -(ORDER - 1):]
    words = np.unique(ctx3)

    def extra(model) -> dict:
        logs = {"network": batched_log_prob(model, te_ctx, te_tgt), "kn5": kn5_log}
        nn = np.full((V, NEIGHBOURS), -1, np.int64)
        nn[words] = nearest_neighbours(model.params["C"], words, NEIGHBOURS)
        control = frequency_matched(nn, np.random.default_rng(CONTROL_SEED))
        split = {part: compare(novelty_groups(ctx3, te_tgt, table, m, V), logs, "network", "kn5")
                 for part, m in (("groups", nn), ("control_frequency_matched", control))}
        end = QUICK["oov_tokens"] if quick else len(brown.ids)
        oov = oov_study(model, brown.ids[:end], brown_tokens()[:end], brown.vocab.unk, first=brown.bounds[0])
        oov = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in oov.items() if k != "features"}
        scores = {f"{p}_{g}_minus_kn5": split[part][g]["network_minus_kn5"]
                  for part, p in (("groups", "near"), ("control_frequency_matched", "control")) for g in GROUPS}
        scores.update({f"share_{g}": split["groups"][g]["share"] for g in GROUPS})
        return {"scores": scores, **split, "oov": oov,
                "neighbour_examples": {w: corpus.vocab.decode(nn[corpus.vocab.index[w]]) for w in EXAMPLES
                                       if w in corpus.vocab.index and corpus.vocab.index[w] in words}}
    return extra


def novel_trigrams(corpus, brown, ctx: Ctx, quick: bool) -> None:
    """Part 1 on ``corpus`` (``brown`` itself, or its head with ``quick``): the 5-gram's row, then the network
    under the protocol, analysed per seed."""
    kn5 = KneserNey(5, corpus.V).fit(corpus.train)
    kn5_log = kn5.log_prob(*corpus.windows("test", 5))
    if "brown/kn5" not in ctx.done():
        ctx.write([{"run": "brown/kn5", "method": "brown/kn5", "cell": "brown", "model": "kn5", "seed": None,
                    "scores": {"test_ppl": float(np.exp(-kn5_log.mean()))}}])

    def build(lr, seed):
        return network_of(corpus, quick, seed), TRAIN

    method = Method("brown/mlp9", build, SplitScores(novelty_extra(corpus, brown, quick, kn5_log)),
                    {"part": "novel trigrams", "corpus": corpus.name})
    train_seeds(method, "brown", "network", corpus, ctx)


# --------------------------------------------------------------------------- 2. features fixed in advance
def fixed_method(corpus, quick: bool, variant: str, learned_rms: dict, pca: np.ndarray) -> Method:
    """The network on the slice with table ``variant`` (a fixed one rescaled to ``learned_rms[seed]``)."""
    def build(lr, seed):
        model = network_of(corpus, quick, seed)
        if variant != "learned":
            table = pca if variant == "fixed_pca" else model.params["C"].astype(np.float64)  # its own random start
            model.params["C"][:] = table * (learned_rms[seed] / rms(table))
        return model, replace(TRAIN, frozen="" if variant == "learned" else "C")

    def extra(model):
        return {"C_rms": rms(model.params["C"])} if variant == "learned" else {}

    stamp = {"part": "fixed features", "variant": variant, "corpus": corpus.name}
    if variant != "learned":
        stamp["learned_C_rms"] = [learned_rms[s] for s in sorted(learned_rms)]
    return Method(f"brown-slice/{variant}", build, SplitScores(extra), stamp)


def fixed_features(corpus, ctx: Ctx, quick: bool) -> None:
    """Part 2 (module docstring), on the slice: the learned table first (the fixed ones take its scale)."""
    pca = pca_features(corpus.train, corpus.V, (QUICK["network"] if quick else NETWORK).m,
                       QUICK["pca_contexts"] if quick else PCA_CONTEXTS)
    learned_rms: dict = {}
    for variant in VARIANTS:
        rows = train_seeds(fixed_method(corpus, quick, variant, learned_rms, pca), "brown-slice", variant, corpus, ctx)
        if variant == "learned":
            learned_rms.update({s: r["C_rms"] for s, r in rows.items()})


def run_brown(brown, ctx: Ctx, quick: bool, parts=PARTS) -> None:
    """The ``parts`` (module docstring) on the loaded Brown corpus, their rows merged into ``ctx.out``."""
    if "novel-trigrams" in parts:
        if not ctx.quiet:
            print("== Brown: new trigrams and out-of-vocabulary words", flush=True)
        novel_trigrams(brown.head(QUICK["sizes"], "quick") if quick else brown, brown, ctx, quick)
    if "fixed-features" in parts:
        if not ctx.quiet:
            print("== Brown: features fixed in advance", flush=True)
        fixed_features(brown.head(QUICK["sizes"] if quick else COMPARISON_SLICE, "quick" if quick else "comparison"),
                       ctx, quick)
