"""The methods of ``reproduce output-layers``: one network per output layer and a timed trainer backend.

Every method is MLP9 of Table 1 (n 5, h 100, m 30, no direct connections) with another output
layer (the energy network: the same n, m and h, its output read off the hidden layer); the classes, trees, frequency bands and proposals are built from the training set only (its
word counts and bigrams)::

    full             the paper's softmax (FusedNPLM, the fast path of Table 1)
    class-frequency  class-factored, classes by frequency binning (Mikolov et al. 2011)
    class-exchange   class-factored, classes from the exchange algorithm (the class-based n-gram's)
    class-file       class-factored, classes read from a file ("word class" per line; optional)
    tree-huffman     tree softmax, Huffman tree on the training counts
    tree-cluster     tree softmax, the exchange classes joined two by two (Brown et al. 1992),
                     a Huffman tree inside each class
    differentiated   differentiated softmax (Chen et al. 2016): three frequency bands reading
                     60, 25 and 15 of the h = 100 hidden units
    adaptive         adaptive softmax (Grave et al. 2017): a head and two tails reading h/4 = 25 and
                     h/16 = 6 projected features
    lightrnn         LightRNN (Li et al. 2016): the words in a 134 x 134 table, each read as a row and a
                     column vector and predicted as a row then a column; the table reassigned after
                     every epoch (:mod:`~nplm_edu.experiments.lightrnn_char`)
    energy           the energy-minimization network of the paper's section 5 (EnergyNPLM): the
                     candidate word's features C(w_t) join the context's, one energy read off the
                     hidden units for each of the |V| candidates; named explicitly (not in the
                     default list: about 75 times the full softmax's epoch, see ``EXPLICIT``)
    is               importance sampling, unigram proposal, k samples (Bengio & Senecal 2003)
    is-adaptive      importance sampling, unigram adapted to the network during training
    is-ess           importance sampling as Bengio & Senecal ran it: the adaptive proposal and the
                     sample grown by blocks of k until the effective sample size reaches 50
                     (at most 2,000 words a batch); the sample sizes of each epoch are recorded
    is-target        importance sampling with the target among the candidates (sampled softmax)
    nce              noise-contrastive estimation, k unigram noise words, normalizer fixed to 1

The frequency bands, fixed before any run, are those of Brown's |V| = 17,907 ranked by training
count: the 2,000 most frequent words, the next 4,000, the other 11,907 (``BANDS``; for another
vocabulary the same fractions of |V|). The differentiated softmax gives them 60, 25 and 15 hidden
units (``DIFF_WIDTHS``, fractions of h); the adaptive softmax's head is the first band plus two
tail tokens, its tails the other two bands (``div`` 4).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..models.adaptive_softmax import AdaptiveSoftmax
from ..models.class_softmax import ClassSoftmax, check_n_classes, default_n_classes, frequency_classes
from ..models.differentiated_softmax import DifferentiatedSoftmax
from ..models.energy import EnergyConfig, EnergyNPLM
from ..models.ngram.classes import exchange_classes
from ..models.nplm import NPLMConfig
from ..models.sampled_softmax import (AdaptiveImportanceSampling, ESSImportanceSampling, ImportanceSampling,
                                      ImportanceSamplingWithTarget, NCESoftmax, SampledSoftmax)
from ..models.sparse_output import train_counts
from ..models.tree_softmax import TreeSoftmax
from ..models.trees import Tree, cluster_merges, huffman_merges
from ..numerics.fused import FusedNPLM
from ..numerics.adaptive import AdaptiveNPLM
from ..numerics.sparse import SparseNPLM
from ..training.checkpoint import data_fingerprint
from ..training.backends import SerialBackend
from .lightrnn_char import Reassigning, lightrnn_network

METHODS = ("full", "class-frequency", "class-exchange", "class-file", "tree-huffman", "tree-cluster", "differentiated",
           "adaptive", "lightrnn", "energy", "is", "is-adaptive", "is-ess", "is-target", "nce")
# Run only when named: class-file needs a file of classes; energy a hidden layer per candidate word
# (|V| h tanh per example, forward and backward), an epoch about 75 times the full softmax's on Brown.
EXPLICIT = ("class-file", "energy")
EXCHANGE_PASSES = 3  # as the class-based n-grams of Table 1
BROWN_V = 17_907
BANDS = (2_000, 6_000)  # frequency ranks where the second and third bands start, for |V| = 17,907
DIFF_WIDTHS = (0.6, 0.25, 0.15)  # the hidden units each band reads, as fractions of h: 60, 25, 15 of 100
ADAPTIVE_DIV = 4  # the adaptive softmax's tail i reads h / 4^i features
ESS_MIN, K_MAX = 50.0, 2_000  # is-ess: the effective sample size to reach, the largest sample of a batch


def parse_methods(text: str | None, class_file: str | None) -> list[str]:
    """'nce,full' -> ['full', 'nce'] (table order); by default all but ``EXPLICIT`` (class-file too when
    a class file is given)."""
    if text is None:
        names = [m for m in METHODS if m not in EXPLICIT or (m == "class-file" and class_file)]
    else:
        names = [t.strip().lower() for t in text.split(",") if t.strip()]
        for name in names:
            if name not in METHODS:
                raise UserError(f"unknown method {name!r}: choose from {', '.join(METHODS)}")
    if "class-file" in names and not class_file:
        raise UserError("class_file is needed by the class-file method (a file of 'word class' lines)",
                        setting="class_file")
    if not names:
        raise UserError("methods names no method: give one or more of " + ", ".join(METHODS), setting="methods")
    return [m for m in METHODS if m in set(names)]


def read_class_file(path, vocab) -> np.ndarray:
    """Classes from a text file of "word class" lines: labels (|V|,); one UserError if a word of the
    vocabulary has no class, a word is given twice, or a line does not read."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no class file at {path}")
    labels = np.full(len(vocab), -1, np.int64)
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit() or int(parts[1]) < 0:
            raise UserError(f"{path}:{no}: expected 'word class' with a class number >= 0, got {line.strip()!r}")
        i = vocab.index.get(parts[0])
        if i is None:
            continue  # a word outside this vocabulary: ignored
        if labels[i] >= 0:
            raise UserError(f"{path}:{no}: the word {parts[0]!r} is given a class twice")
        labels[i] = int(parts[1])
    missing = np.flatnonzero(labels < 0)
    if len(missing):
        raise UserError(f"{path} does not cover the vocabulary: {len(missing)} of its {len(vocab)} words have no "
                        f"class (e.g. {vocab.words[missing[0]]!r})")
    return labels


def exchange_labels(corpus, n_classes: int, cache: Path | None, quiet: bool) -> np.ndarray:
    """The exchange algorithm's classes on the training set, cached in ``cache`` (a folder) by data."""
    key = data_fingerprint(corpus.V, corpus.train)
    path = cache / f"exchange_{n_classes}_{key}.npy" if cache is not None else None
    if path is not None and path.exists():
        return np.load(path)
    if not quiet:
        print(f"   exchange algorithm: {n_classes} classes, {EXCHANGE_PASSES} passes over the training set", flush=True)
    labels, _ = exchange_classes(corpus.train, corpus.V, n_classes, passes=EXCHANGE_PASSES, progress=not quiet)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, labels)
    return labels


def band_cutoffs(V: int) -> list[int]:
    """Where the second and third frequency bands start (``BANDS``), as the same fractions of |V|
    for a vocabulary other than Brown's; at least one cutoff, each between 1 and |V| - 1."""
    cut = sorted({min(V - 1, max(1, round(V * c / BROWN_V))) for c in BANDS})
    return cut or [1]


def band_widths(h: int, bands: int) -> list[int]:
    """The hidden units each band of the differentiated softmax reads (``DIFF_WIDTHS`` of h, the
    rest to the first band), each at least 1."""
    w = [max(1, round(h * f)) for f in DIFF_WIDTHS[1:bands]]
    return [h - sum(w)] + w


def expected(counts: np.ndarray, cost: np.ndarray) -> float:
    """The mean of a per-word cost (|V|,) under the training unigram."""
    return round(float(counts @ cost / max(counts.sum(), 1)), 1)


def class_or_tree_layer(method: str, corpus, counts, h: int, C: int, opts, cache, quiet: bool):
    """A class-factored or tree softmax, and its description."""
    if method.startswith("class-"):
        labels = {"class-frequency": lambda: frequency_classes(counts, C),
                  "class-exchange": lambda: exchange_labels(corpus, C, cache, quiet),
                  "class-file": lambda: read_class_file(opts.class_file, corpus.vocab)}[method]()
        layer = ClassSoftmax(corpus.V, h, labels)
        return layer, {"n_classes": layer.n_classes, "largest_class": int(layer.sizes.max()),
                       "cost_per_example": expected(counts, layer.n_classes + layer.sizes[layer.labels])}
    merges = (huffman_merges(counts) if method == "tree-huffman"
              else cluster_merges(corpus.train, exchange_labels(corpus, C, cache, quiet), counts))
    tree = Tree(merges, corpus.V)
    return TreeSoftmax(corpus.V, h, tree), {"mean_depth": round(tree.mean_depth(counts), 2),
                                            "max_depth": int(tree.depth.max()),
                                            "cost_per_example": round(tree.mean_depth(counts), 2)}


def banded_layer(method: str, V: int, counts, h: int):
    """The differentiated or adaptive softmax on the frequency bands, and its description (the cost in
    rows of h multiply-adds per example)."""
    cut = band_cutoffs(V)
    sizes = np.diff([0, *cut, V])
    if method == "differentiated":
        widths = band_widths(h, len(sizes))
        return (DifferentiatedSoftmax(V, h, cut, widths, counts),
                {"cutoffs": cut, "widths": widths, "cost_per_example": round(float(sizes @ widths) / h, 1)})
    layer = AdaptiveSoftmax(V, h, cut, counts, div=ADAPTIVE_DIV)
    tail_cost = np.r_[0.0, [d + size * d / h for d, size in zip(layer.d, sizes[1:])]]  # Proj_i, then U_i
    return layer, {"cutoffs": cut, "tail_features": layer.d,
                   "cost_per_example": round(len(layer.order[:cut[0]]) + layer.n
                                             + expected(counts, tail_cost[layer.cluster]), 1)}


def sampled_layer(method: str, V: int, counts, h: int, opts, seed: int):
    """Importance sampling or NCE with its number of samples, and its description."""
    k = opts.k_nce if method == "nce" else opts.k_is
    if method == "is-ess":
        k_max = max(K_MAX, k)  # drawn with replacement: a sample may exceed |V|
        return (ESSImportanceSampling(V, h, counts, k, seed=seed, ess_min=ESS_MIN, k_max=k_max),
                {"k": k, "ess_min": ESS_MIN, "k_max": k_max, "cost_per_example": None})
    cls = {"is": ImportanceSampling, "is-adaptive": AdaptiveImportanceSampling,
           "is-target": ImportanceSamplingWithTarget, "nce": NCESoftmax}[method]
    return cls(V, h, counts, k, seed=seed), {"k": k, "cost_per_example": k + 1}


def build_model(method: str, corpus, net: NPLMConfig, opts, cache: Path | None = None, quiet: bool = True):
    """(model, description of its output layer) for one method (module docstring); ``opts``: the
    target's options (``n_classes``, ``k_is``, ``k_nce``, ``class_file``)."""
    V, h = corpus.V, net.h
    if method not in METHODS:
        raise UserError(f"unknown method {method!r}: choose from {', '.join(METHODS)}", setting="methods")
    if method == "full":
        return FusedNPLM(net), {"cost_per_example": V}
    if method == "lightrnn":
        return lightrnn_network(corpus, net)
    if method == "energy":  # the paper's section 5: no output weights U, an energy per candidate word
        model = EnergyNPLM(EnergyConfig(V=V, n=net.n, m=net.m, h=net.h, seed=net.seed))
        return model, {"cost_per_example": V, "per_candidate": f"a hidden layer of h = {h} (tanh), then v"}
    counts = train_counts(corpus.train, V)
    C = check_n_classes(opts.n_classes, V) if opts.n_classes is not None else default_n_classes(V)
    if method.startswith(("class-", "tree-")):
        layer, desc = class_or_tree_layer(method, corpus, counts, h, C, opts, cache, quiet)
    elif method in ("differentiated", "adaptive"):
        layer, desc = banded_layer(method, V, counts, h)
    else:
        layer, desc = sampled_layer(method, V, counts, h, opts, net.seed)
    return (AdaptiveNPLM if method == "adaptive" else SparseNPLM)(net, layer), desc


class TimedBackend(SerialBackend):
    """The serial backend, timing the updates and the validation apart, in wall-clock seconds and in
    this process's CPU seconds (fairer on a shared machine: time spent waiting for a core is not
    counted); each epoch's seconds go into the history (``train_seconds``, ``train_cpu_seconds``,
    ``valid_seconds``; ``timing_partial`` for an epoch resumed from a checkpoint inside it, whose
    updates before the interruption were not timed); for a layer whose sample size varies (is-ess),
    the mean, least and largest sample size of the epoch's batches (``k_mean``, ``k_min``, ``k_max``)."""

    def __init__(self, model, config):
        super().__init__(model, config)
        self.t_train = self.t_train_cpu = self.t_valid = 0.0
        self.partial = False

    def load_extra(self, arrays, state):
        super().load_extra(arrays, state)
        self.partial = state.batch_in_epoch > 0  # resumed inside an epoch

    def update(self, contexts, targets, lr):
        t, c = time.perf_counter(), time.process_time()
        loss = super().update(contexts, targets, lr)
        self.t_train += time.perf_counter() - t
        self.t_train_cpu += time.process_time() - c
        return loss

    def perplexity(self, contexts, targets):
        t = time.perf_counter()
        ppl = super().perplexity(contexts, targets)
        self.t_valid += time.perf_counter() - t
        return ppl

    def epoch_extra(self) -> dict:
        out = {"train_seconds": self.t_train, "train_cpu_seconds": self.t_train_cpu, "valid_seconds": self.t_valid}
        k_used = getattr(getattr(self.model, "output", None), "k_used", None)
        if k_used:  # a sample size set batch by batch: how large it was this epoch
            out.update(k_mean=float(np.mean(k_used)), k_min=int(min(k_used)), k_max=int(max(k_used)))
            k_used.clear()
        if self.partial:
            out["timing_partial"] = True
        self.t_train = self.t_train_cpu = self.t_valid = 0.0
        self.partial = False
        return out


class LightRNNBackend(Reassigning, TimedBackend):
    """The timed backend reassigning LightRNN's table after every epoch's validation (``lightrnn``)."""


def sampled_extra(model, corpus, batch: int = 1024) -> dict:
    """For a network trained by a sampled objective: over the test set, log Z = log sum_v exp(y_v) (mean,
    std, and the mean absolute value: 0 for a self-normalized network) and the self-normalized perplexity
    exp(-mean y_w); {} for any other network."""
    layer = getattr(model, "output", None)
    if not isinstance(layer, SampledSoftmax):
        return {}
    ctx, tgt = corpus.windows("test", model.order)
    logZ, yt = [], []
    for i in range(0, len(tgt), batch):
        inputs = model.forward(ctx[i:i + batch])["inputs"]
        yt.append(layer.log_prob_unnormalized(model.params, inputs, tgt[i:i + batch]))
        logZ.append(layer.log_normalizer(model.params, inputs))
    logZ, yt = np.concatenate(logZ), np.concatenate(yt)
    return {"test_log_Z_mean": float(logZ.mean()), "test_log_Z_std": float(logZ.std()),
            "test_log_Z_abs_mean": float(np.abs(logZ).mean()), "test_ppl_self_normalized": float(np.exp(-yt.mean()))}
