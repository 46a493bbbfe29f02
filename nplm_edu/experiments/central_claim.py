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
context), ``after`` (both words of a pair in the context), ``other``. Models: the exact grammar
(the best possible), Kneser-Ney 5- and 3-grams, the deleted-interpolation trigram, and the network
of chapter 6 (n 5, m 10, h 30, direct connections; K 32, eps_0 0.3, weight decay 1e-4, early
stopping with patience 3, at most 50 epochs) with three tables C: learned, fixed at its random
initial values, fixed to principal components of co-occurrence counts (both fixed tables rescaled
to the root mean square of the learned C of the same seed). Three seeds each; 8,000 and 40,000
training tokens (sparse and plentiful data).

The design (families, sizes, groups) was settled on a development sample (corpus seed 100); the
reported numbers use corpus seed 0, never looked at before. The Brown part is in
:mod:`.central_claim_brown`. Results: ``data/results/central_claim.json`` (under an hour on one
core, most of it the Brown networks, which checkpoint: rerun the command to resume).

    python -m nplm_edu reproduce central-claim            # synthetic grammar and Brown
    python -m nplm_edu reproduce central-claim --no-brown # the synthetic grammar only (minutes)
    python -m nplm_edu reproduce central-claim --quick    # the whole pipeline in about a minute
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
from ..training.trainer import TrainConfig, train
from .central_claim_brown import rescale, run_brown
from .common import runs_root
from .skeleton import results_file, write_whole

FAMILIES = {"animal-verb": (("cat", "walking"), ("horse", "sleeping"), ("bird", "eating")),
            "time-animal": (("yesterday", "cat"), ("now", "horse"), ("then", "bird"), ("today", "rabbit"))}
SIZES, VALID_FRACTION, TEST_TOKENS = (8_000, 40_000), 0.125, 10_000
CORPUS_SEED, DEVELOPMENT_SEED = 0, 100
NETWORK = NPLMConfig(V=2, n=5, m=10, h=30, direct=True)
TRAIN = TrainConfig(epochs=50, batch=32, lr=0.3, weight_decay=1e-4, patience=3)
QUICK = dict(sizes=(4_000,), seeds=1, epochs=5, test=2_000)
VARIANTS = ("learned", "fixed_random", "fixed_pca")
GROUPS = ("completing", "after", "other")


@dataclass
class CentralClaimOptions:
    """``seeds``: networks per variant on the synthetic grammar; ``brown``: also the Brown part;
    ``quick``: the whole pipeline in about a minute (into runs/results/central_claim_quick.json); ``runs_dir``:
    where the Brown networks checkpoint; ``force``: train them again from scratch."""

    seeds: int = 3
    brown: bool = True
    quick: bool = False
    runs_dir: str | None = None
    force: bool = False


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


def mean_over_seeds(runs: list[dict]) -> dict:
    keys = runs[0].keys()
    return {"mean": {k: round(float(np.mean([r[k] for r in runs])), 4) for k in keys},
            "std": {k: round(float(np.std([r[k] for r in runs])), 4) for k in keys},
            "seeds": [{k: round(v, 4) for k, v in r.items()} for r in runs]}


def network_scores(corpus, held: tuple, test: tuple, groups: dict, seeds: int, epochs: int, family: str,
                   quiet: bool) -> dict:
    """The network with each table C (VARIANTS), ``seeds`` times: mean, std and each seed's scores."""
    (hc, ht), (tc, tt) = held, test
    V = corpus.V
    data = (corpus.windows("train", NETWORK.n), corpus.windows("valid", NETWORK.n))
    runs = {v: [] for v in VARIANTS}
    epochs_run = {v: [] for v in VARIANTS}
    pca = pca_features(corpus.train, V, NETWORK.m)
    for seed in range(seeds):
        cfg, tcfg = replace(NETWORK, V=V, seed=seed), replace(TRAIN, seed=seed, epochs=epochs)
        learned = None
        for v in VARIANTS:
            model = FusedNPLM(cfg)
            if v != "learned":
                table = pca if v == "fixed_pca" else model.params["C"].astype(np.float64)  # its own random start
                model.params["C"][:] = rescale(table, learned.params["C"])
            hist = train(model, data, replace(tcfg, frozen="" if v == "learned" else "C"), quiet=True)
            learned = model if v == "learned" else learned
            runs[v].append(scores(model.log_prob(hc, ht), model.log_prob(tc, tt), groups))
            epochs_run[v].append(len(hist["epochs"]))
        if not quiet:
            print(f"   {family} {len(corpus.train):,} tokens, seed {seed}: held-out per token "
                  + ", ".join(f"{v} {runs[v][-1]['heldout']:.3f}" for v in VARIANTS), flush=True)
    return {f"network_{v}": {**mean_over_seeds(runs[v]), "epochs_run": epochs_run[v]} for v in VARIANTS}


def count_scores(corpus, held_tokens: list, held: tuple, test: tuple, groups: dict) -> dict:
    """The exact grammar and the n-grams on the removed sentences and on ordinary test sentences."""
    (hc, ht), (tc, tt) = held, test
    hmm = GrammarHMM()
    stream = hmm.log_probs(corpus.vocab.decode(corpus.ids))  # the grammar, from the first sentence on
    models = {"grammar": scores(hmm.log_probs(held_tokens)[NETWORK.n - 1:], stream[corpus.bounds[1]:], groups)}
    V = corpus.V
    for name, lm in (("kn5", KneserNey(5, V).fit(corpus.train)), ("kn3", KneserNey(3, V).fit(corpus.train)),
                     ("interpolated_trigram", InterpolatedTrigram(corpus.V, verbose=False)
                      .fit(corpus.train, valid=corpus.windows("valid", 3)))):
        k = lm.order - 1
        models[name] = scores(lm.log_prob(hc[:, -k:], ht), lm.log_prob(tc[:, -k:], tt), groups)
    return {k: {key: round(val, 4) for key, val in m.items()} for k, m in models.items()}


def run_one(family: str, n_train: int, seeds: int, epochs: int, test_tokens: int, quiet: bool) -> dict:
    """Every model on one family and one training size."""
    pairs = FAMILIES[family]
    corpus, held = holdout_corpus(pairs, n_train, CORPUS_SEED, test_tokens)
    hc, ht = windows(corpus.vocab.encode(held), NETWORK.n)  # every removed token after the first 4
    tc, tt = corpus.windows("test", NETWORK.n)
    groups = token_groups(hc, ht, pairs, corpus.vocab)
    models = {**count_scores(corpus, held, (hc, ht), (tc, tt), groups),
              **network_scores(corpus, (hc, ht), (tc, tt), groups, seeds, epochs, family, quiet)}
    periods = sum(1 for t in held if t == ".")
    return {"family": family, "pairs": [list(p) for p in pairs], "train_tokens_target": n_train,
            "tokens": {"train": int(len(corpus.train)), "valid": int(len(corpus.valid)),
                       "ordinary_test": int(len(tt)), "heldout": int(len(ht)),
                       **{g: int(m.sum()) for g, m in groups.items()}},
            "heldout_sentences_share": round(periods / (periods + int(np.sum(corpus.ids == corpus.vocab.index["."]))),
                                             4),
            "models": models}


def run_central_claim(opts: CentralClaimOptions | None = None, out=None, quiet: bool = False) -> Path:
    """Both parts (module docstring); writes the JSON and returns its path."""
    opts = opts or CentralClaimOptions()
    if opts.seeds < 1:
        raise UserError(f"seeds must be at least 1, got {opts.seeds}", setting="seeds")
    started = time.monotonic()
    out = results_file(out, "central-claim", opts.quick)  # checked before any work
    sizes, seeds = (QUICK["sizes"], QUICK["seeds"]) if opts.quick else (SIZES, opts.seeds)
    epochs, test_tokens = (QUICK["epochs"], QUICK["test"]) if opts.quick else (TRAIN.epochs, TEST_TOKENS)
    brown = None
    if opts.brown:  # first, so that a missing corpus fails before the synthetic runs
        corpus = load_corpus("brown")
        runs = runs_root(opts.runs_dir) / ("central_claim_quick" if opts.quick else "central_claim")
        brown = run_brown(corpus, runs, opts.quick, opts.force, quiet)
    synthetic = []
    for family in FAMILIES:
        for n_train in sizes:
            synthetic.append(run_one(family, n_train, seeds, epochs, test_tokens, quiet))
    doc = {
        "quick": opts.quick,
        "design": {"families": {k: [list(p) for p in v] for k, v in FAMILIES.items()},
                   "train_tokens": list(sizes), "valid_fraction": VALID_FRACTION, "ordinary_test_tokens": test_tokens,
                   "corpus_seed": CORPUS_SEED, "design_chosen_on_corpus_seed": DEVELOPMENT_SEED,
                   "network": {k: v for k, v in asdict(NETWORK).items() if k not in ("V", "seed")},
                   "train": {k: v for k, v in asdict(replace(TRAIN, epochs=epochs)).items()
                             if k in ("epochs", "batch", "lr", "decay_rate", "weight_decay", "patience")},
                   "seeds": seeds, "variants": list(VARIANTS), "groups": list(GROUPS),
                   "fixed_tables": "rescaled to the root mean square of the learned C of the same seed",
                   "pca": "first m principal components of sqrt(co-occurrence frequencies) at offsets -2,-1,+1,+2"},
        "note": "mean natural-log probability per token (higher is better), every model on the same 4-word "
                "windows; heldout: every sentence of the sample pairing the family's words, removed from "
                "training and validation; ordinary: test sentences without the pairs; network_* entries: mean, "
                "std and each seed",
        "grammar_optimum": {"entropy_rate_nats": round(entropy_rate(), 6),
                            "perplexity": round(float(np.exp(entropy_rate())), 4),
                            "perplexity_with_window": {str(k): round(float(np.exp(window_entropy(k))), 4)
                                                       for k in range(5)}},
        "synthetic": synthetic,
        "brown": brown,
    }
    write_whole(out, "central-claim", doc, started)
    print(f"wrote {out}")
    return out
