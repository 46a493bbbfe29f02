"""``python -m nplm_edu reproduce central-claim``: the paper's central claim, measured.

Section 1.1 of the paper: a sentence never seen can get a high probability because its words are
similar to the words of sentences that were seen. On the synthetic grammar
(:mod:`nplm_edu.data.synthetic`) we remove from the training data EVERY sentence that pairs chosen
words, train the network and the n-grams on the rest, and score the removed sentences token by
token, every model on the same windows of 4 words.

Pairs (fixed before any run; stated in the JSON). The pair must sit within the network's window of
n - 1 = 4 words, or every 5-gram of a removed sentence would still occur in training:

* ``animal-verb``: cat/walking, horse/sleeping, bird/eating (an animal in singular or plural). The
  pair itself never occurs in training: "the cat is ___" is seen many times and never followed by
  "walking", although the grammar makes every verb equally likely. A model that has learned that
  the cat is like the other animals gives "walking" a fair probability anyway; a model that only
  counts gives it almost none. How much absence a model should believe depends on how much data
  it has seen: hence two training sizes.
* ``time-animal``: yesterday/cat, now/horse, then/bird, today/rabbit. The auxiliary after them needs
  both words (the time word decides the tense, the animal the number), so a removed sentence has a
  context never seen ("yesterday the cat ___") that nothing in training contradicts: a model must
  combine what it knows of "yesterday" with what it knows of "cat"; an n-gram drops "yesterday"
  and guesses the tense.

Token groups on the removed sentences: ``completing`` (the second word of a pair, its partner in the
context), ``after`` (both words of a pair in the context), ``other``. The gap of a model is its mean
log-probability per token on the removed sentences minus that on ordinary test sentences
(``claim_runs.gap``): about 0 for the grammar, which makes the removed sentences as probable as
any. Models: the exact grammar (the best possible), Kneser-Ney 5- and 3-grams, the
deleted-interpolation trigram, and the network of chapter 6 (n 5, m 10, h 30, direct connections;
K 32, weight decay 1e-4) with three tables C: learned, fixed at its random initial values, fixed to
principal components of co-occurrence counts (both fixed tables rescaled to the root mean square of
the learned C of the same seed). Each network is trained under the comparison protocol
(``protocol.PROTOCOL``: its learning rate chosen on validation from the grid, then seeds 0, 1, 2
to early stopping, the test sets scored once per seed; ``claim_runs``). 8,000 and 40,000 training
tokens (sparse and plentiful data).

The design (families, sizes, groups) was settled on a development sample (corpus seed 100); the
reported numbers use corpus seed 0. The Brown part is in :mod:`.central_claim_brown`. Results:
``data/results/central_claim.json``, resumable (rerun the command) and parallel-safe (two processes,
say ``--no-brown`` in one and ``--no-synthetic`` in the other, keep both's rows; ``--brown-parts`` splits
the Brown part in two).

    python -m nplm_edu reproduce central-claim              # synthetic grammar and Brown
    python -m nplm_edu reproduce central-claim --no-brown   # the synthetic grammar only (minutes)
    python -m nplm_edu reproduce central-claim --quick      # the whole pipeline, small and short
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..analysis.cooccurrence import pca_features
from ..data.corpus import Corpus, Vocabulary, load_corpus, windows
from ..data.synthetic import CLASSES, GrammarHMM, entropy_rate, generate, split_sentences, window_entropy
from ..errors import UserError
from ..models.ngram import InterpolatedTrigram, KneserNey
from ..models.nplm import NPLMConfig
from ..numerics.fused import FusedNPLM
from ..training.trainer import TrainConfig
from .central_claim_brown import PARTS as BROWN_PARTS, brown_design, run_brown
from .claim_runs import Ctx, SplitScores, gap, rms, train_seeds
from .protocol import PROTOCOL, Method
from .skeleton import results_file, runs_for

FAMILIES = {"animal-verb": (("cat", "walking"), ("horse", "sleeping"), ("bird", "eating")),
            "time-animal": (("yesterday", "cat"), ("now", "horse"), ("then", "bird"), ("today", "rabbit"))}
SIZES, VALID_FRACTION, TEST_TOKENS = (8_000, 40_000), 0.125, 10_000
CORPUS_SEED, DEVELOPMENT_SEED = 0, 100
NETWORK = NPLMConfig(V=2, n=5, m=10, h=30, direct=True)
TRAIN = TrainConfig(batch=32, weight_decay=1e-4)  # lr, seed, epochs and patience: the protocol's
# --quick: the same pipeline in seconds (one small size, a short test, a protocol of few epochs)
QUICK = dict(sizes=(4_000,), test=2_000, protocol=replace(PROTOCOL, grid_epochs=1, patience=1, max_epochs=3))
VARIANTS = ("learned", "fixed_random", "fixed_pca")
GROUPS = ("completing", "after", "other")


@dataclass
class CentralClaimOptions:
    """``synthetic`` / ``brown``: which parts this process runs (two processes may fill one results file);
    ``families``: the synthetic families to run ("all" or a comma list); ``brown_parts``: the Brown
    experiments to run ("all", "novel-trigrams" or "fixed-features"); ``quick``: the whole pipeline
    small and short (into runs/results/central_claim_quick.json); ``runs_dir``: where the networks
    checkpoint; ``force``: train them again from scratch."""

    synthetic: bool = True
    brown: bool = True
    families: str = "all"
    brown_parts: str = "all"
    quick: bool = False
    runs_dir: str | None = None
    force: bool = False

    def family_list(self) -> list[str]:
        names = list(FAMILIES) if self.families == "all" else [f.strip() for f in self.families.split(",")]
        bad = [f for f in names if f not in FAMILIES]
        if bad or not names:
            raise UserError(f"families: unknown family {bad[0] if bad else '(none)'!r}: use 'all' or names among "
                            f"{', '.join(FAMILIES)}", setting="families")
        return names

    def brown_list(self) -> list[str]:
        names = list(BROWN_PARTS) if self.brown_parts == "all" else [self.brown_parts]
        if names[0] not in BROWN_PARTS:
            raise UserError(f"brown_parts: unknown part {self.brown_parts!r}: use all, {', '.join(BROWN_PARTS)}",
                            setting="brown_parts")
        return names
def forms(word: str) -> set[str]:
    """A word and, for an animal, its plural."""
    a, p = CLASSES["animal"], CLASSES["animal-plural"]
    return {word, p[a.index(word)]} if word in a else {word}


def holdout_corpus(pairs, n_train: int, seed: int, test_tokens: int = TEST_TOKENS):
    """Sentences of the grammar without the pairs, as a Corpus (train ~n_train tokens, validation
    n_train/8, test ~test_tokens), and the removed sentences met on the way, as one token list."""
    n_valid = int(n_train * VALID_FRACTION)
    toks, _ = generate(int(2 * (n_train + n_valid + test_tokens)), seed)
    sets = [(forms(a), forms(b)) for a, b in pairs]
    kept, held, sizes = [], [], [0, 0, 0]
    for s in split_sentences(toks)[:-1]:  # the last sentence may be cut short
        if any(set(s) & A and set(s) & B for A, B in sets):
            held.append(s)
            continue
        part = 0 if sizes[0] < n_train else 1 if sizes[1] < n_valid else 2
        if part == 2 and sizes[2] >= test_tokens:
            break
        kept.append((part, s))
        sizes[part] += len(s)
    else:
        raise UserError("the generated sample was too short for the requested sizes")
    flat = [t for _, s in kept for t in s]
    vocab = Vocabulary.build(np.array(sum(CLASSES.values(), [])), min_count=1)
    corpus = Corpus(name="synthetic-holdout", vocab=vocab, ids=vocab.encode(flat),
                    bounds=(sizes[0], sizes[0] + sizes[1]))
    return corpus, [t for s in held for t in s]


def token_groups(contexts: np.ndarray, targets: np.ndarray, pairs, vocab) -> dict[str, np.ndarray]:
    """Masks (K,) of the groups completing / after / other (module docstring)."""
    completing, after = np.zeros(len(targets), bool), np.zeros(len(targets), bool)
    for a, b in pairs:
        A, B = vocab.encode(sorted(forms(a))), vocab.encode(sorted(forms(b)))
        inA, inB = np.isin(contexts, A).any(axis=1), np.isin(contexts, B).any(axis=1)
        completing |= (inA & np.isin(targets, B)) | (inB & np.isin(targets, A))
        after |= inA & inB
    after &= ~completing
    return {"completing": completing, "after": after, "other": ~completing & ~after}


def scores(lp_held: np.ndarray, lp_test: np.ndarray, groups: dict) -> dict:
    """Mean natural-log probability per token on the removed sentences (all, per group) and on
    ordinary test sentences, and the two perplexities."""
    out = {"heldout": float(lp_held.mean()), **{g: float(lp_held[m].mean()) for g, m in groups.items()},
           "ordinary": float(lp_test.mean())}
    out["heldout_ppl"], out["ordinary_ppl"] = float(np.exp(-out["heldout"])), float(np.exp(-out["ordinary"]))
    return out


def scored(lp_held: np.ndarray, lp_test: np.ndarray, groups: dict) -> dict:
    """A row's scores and its gap (removed sentences minus ordinary ones, nats per token)."""
    s = scores(lp_held, lp_test, groups)
    return {"scores": s, "gap": gap(s["heldout"], s["ordinary"])}


def network_method(cell: str, variant: str, corpus, held: tuple, groups: dict, learned_rms: dict,
                   pca: np.ndarray) -> Method:
    """The network with table ``variant`` on one cell, as a protocol method. A fixed table is rescaled
    to the root mean square ``learned_rms[seed]`` of the learned C of the same seed."""
    (hc, ht), V = held, corpus.V

    def build(lr, seed):
        model = FusedNPLM(replace(NETWORK, V=V, seed=seed))
        if variant != "learned":
            table = pca if variant == "fixed_pca" else model.params["C"].astype(np.float64)  # its own random start
            model.params["C"][:] = table * (learned_rms[seed] / rms(table))
        return model, replace(TRAIN, frozen="" if variant == "learned" else "C")

    def extra(model):  # scored once per seed, with the test set
        out = scored(model.log_prob(hc, ht), model.log_prob(*corpus.windows("test", NETWORK.n)), groups)
        return {**out, "C_rms": rms(model.params["C"])} if variant == "learned" else out

    stamp = {"cell": cell, "variant": variant, "corpus_seed": CORPUS_SEED}
    if variant != "learned":
        stamp["learned_C_rms"] = [learned_rms[s] for s in sorted(learned_rms)]
    return Method(f"{cell}/{variant}", build, SplitScores(extra), stamp)


def count_rows(cell: str, corpus, held_tokens: list, held: tuple, groups: dict) -> list[dict]:
    """The exact grammar and the n-grams on the removed sentences and on ordinary test sentences: one row
    each (no seed: they are the same for every seed)."""
    (hc, ht), (tc, tt) = held, corpus.windows("test", NETWORK.n)
    hmm, V = GrammarHMM(), corpus.V
    c0 = time.process_time()
    stream = hmm.log_probs(corpus.vocab.decode(corpus.ids))  # the grammar, from the first sentence on
    found = {"grammar": scored(hmm.log_probs(held_tokens)[NETWORK.n - 1:], stream[corpus.bounds[1]:], groups)}
    for name, lm in (("kn5", KneserNey(5, V).fit(corpus.train)), ("kn3", KneserNey(3, V).fit(corpus.train)),
                     ("interpolated_trigram", InterpolatedTrigram(V, verbose=False)
                      .fit(corpus.train, valid=corpus.windows("valid", 3)))):
        k = lm.order - 1
        found[name] = scored(lm.log_prob(hc[:, -k:], ht), lm.log_prob(tc[:, -k:], tt), groups)
    seconds = round(time.process_time() - c0, 2)
    return [{"run": f"{cell}/{name}", "method": f"{cell}/{name}", "cell": cell, "model": name, "seed": None,
             **row, **({"cpu_seconds_counts": seconds} if name == "grammar" else {})} for name, row in found.items()]


def cell_info(pairs, corpus, held: list, hc_ht: tuple, groups: dict) -> dict:
    """What a cell is: its pairs, its token counts, the share of sentences removed."""
    periods = sum(1 for t in held if t == ".")
    return {"pairs": [list(p) for p in pairs],
            "tokens": {"train": int(len(corpus.train)), "valid": int(len(corpus.valid)),
                       "ordinary_test": int(len(corpus.test)), "heldout": int(len(hc_ht[1])),
                       **{g: int(m.sum()) for g, m in groups.items()}},
            "heldout_sentences_share": round(periods / (periods + int(np.sum(corpus.ids == corpus.vocab.index["."]))),
                                             4)}


def run_cell(family: str, n_train: int, test_tokens: int, ctx: Ctx) -> None:
    """Every model on one family and one training size: the count models' rows, then the network with
    each table under the protocol (the learned one first: the fixed tables take its scale)."""
    pairs, cell = FAMILIES[family], f"{family}/{n_train}"
    corpus, held = holdout_corpus(pairs, n_train, CORPUS_SEED, test_tokens)
    hc, ht = windows(corpus.vocab.encode(held), NETWORK.n)  # every removed token after the first 4
    groups = token_groups(hc, ht, pairs, corpus.vocab)
    if f"{cell}/grammar" not in ctx.done():
        rows = count_rows(cell, corpus, held, (hc, ht), groups)
        rows[0].update(cell_info(pairs, corpus, held, (hc, ht), groups))
        ctx.write(rows)
    pca = pca_features(corpus.train, corpus.V, NETWORK.m)
    learned_rms: dict = {}
    for variant in VARIANTS:
        method = network_method(cell, variant, corpus, (hc, ht), groups, learned_rms, pca)
        rows = train_seeds(method, cell, f"network_{variant}", corpus, ctx)
        if variant == "learned":
            learned_rms.update({s: r["C_rms"] for s, r in rows.items()})


def header(quick: bool) -> dict:
    """What every process filling the results file states the same (settings, design, the grammar's optimum;
    its ``note`` a description, never compared: ``protocol.DESCRIPTIONS``)."""
    sizes, test = (QUICK["sizes"], QUICK["test"]) if quick else (SIZES, TEST_TOKENS)
    return {
        "quick": quick,
        "design": {"families": {k: [list(p) for p in v] for k, v in FAMILIES.items()},
                   "train_tokens": list(sizes), "valid_fraction": VALID_FRACTION, "ordinary_test_tokens": test,
                   "corpus_seed": CORPUS_SEED, "design_chosen_on_corpus_seed": DEVELOPMENT_SEED,
                   "network": {k: v for k, v in asdict(NETWORK).items() if k not in ("V", "seed")},
                   "train": {k: v for k, v in asdict(TRAIN).items()
                             if k in ("batch", "decay_rate", "weight_decay", "frozen")},
                   "variants": list(VARIANTS), "groups": list(GROUPS),
                   "fixed_tables": "rescaled to the root mean square of the learned C of the same seed",
                   "pca": "first m principal components of sqrt(co-occurrence frequencies) at offsets -2,-1,+1,+2",
                   "gap": "mean log-probability per token on the removed sentences minus on ordinary test sentences"},
        "brown_design": brown_design(quick),
        "note": "mean natural-log probability per token (higher is better), every model on the same 4-word "
                "windows; heldout: every sentence of the sample pairing the family's words, removed from "
                "training and validation; ordinary: test sentences without the pairs; tables: per cell and model, "
                "mean, sample std (ddof 1) and each seed's value; count models have one value (no seed)",
        "grammar_optimum": {"entropy_rate_nats": round(entropy_rate(), 6),
                            "perplexity": round(float(np.exp(entropy_rate())), 4),
                            "perplexity_with_window": {str(k): round(float(np.exp(window_entropy(k))), 4)
                                                       for k in range(5)}},
    }


def run_central_claim(opts: CentralClaimOptions | None = None, out=None, quiet: bool = False) -> Path:
    """The parts ``opts`` names (module docstring), their rows merged into the results file; returns its path."""
    opts = opts or CentralClaimOptions()
    families, brown_parts = opts.family_list(), opts.brown_list()
    if not (opts.synthetic or opts.brown):
        raise UserError("nothing to run: both the synthetic and the Brown part are off", setting="synthetic")
    started = time.monotonic()
    out = results_file(out, "central-claim", opts.quick)  # checked before any work
    protocol = QUICK["protocol"] if opts.quick else PROTOCOL
    ctx = Ctx(out, header(opts.quick), protocol, runs_for(opts.runs_dir, out), opts.force, quiet, started)
    corpus = load_corpus("brown") if opts.brown else None  # first, so that a missing corpus fails at once
    if opts.synthetic:
        sizes, test = (QUICK["sizes"], QUICK["test"]) if opts.quick else (SIZES, TEST_TOKENS)
        for family in families:
            for n_train in sizes:
                if not quiet:
                    print(f"== {family}, {n_train:,} training tokens", flush=True)
                run_cell(family, n_train, test, ctx)
    if corpus is not None:
        run_brown(corpus, ctx, opts.quick, brown_parts)
    print(f"wrote {out}")
    return out

