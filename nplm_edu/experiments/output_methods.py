"""The methods of ``reproduce output-layers``: one network per output layer, a timed trainer backend,
the exact evaluation, and the slice of Brown the energy network is trained on.

Every method is MLP9 of Table 1 (n 5, h 100, m 30, no direct connections) with another output
layer; the classes and trees are built from the training set only (its word counts and bigrams)::

    full             the paper's softmax (FusedNPLM, the fast path of Table 1)
    class-frequency  class-factored, classes by frequency binning (Mikolov et al. 2011)
    class-exchange   class-factored, classes from the exchange algorithm (the class-based n-gram's)
    class-file       class-factored, classes read from a file ("word class" per line; optional)
    tree-huffman     tree softmax, Huffman tree on the training counts
    tree-cluster     tree softmax, the exchange classes joined two by two (Brown et al. 1992),
                     a Huffman tree inside each class
    is               importance sampling, unigram proposal, k samples (Bengio & Senecal 2003)
    is-adaptive      importance sampling, unigram adapted to the network during training
    is-target        importance sampling with the target among the candidates (sampled softmax)
    nce              noise-contrastive estimation, k unigram noise words, normalizer fixed to 1
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..data.corpus import Corpus, Vocabulary
from ..data.vocab import UNK
from ..errors import UserError
from ..models.class_softmax import ClassSoftmax, check_n_classes, default_n_classes, frequency_classes
from ..models.ngram.classes import exchange_classes
from ..models.nplm import NPLMConfig
from ..models.sampled_softmax import (AdaptiveImportanceSampling, ImportanceSampling, ImportanceSamplingWithTarget,
                                      NCESoftmax, SampledSoftmax)
from ..models.sparse_output import train_counts
from ..models.tree_softmax import TreeSoftmax
from ..models.trees import Tree, cluster_merges, huffman_merges
from ..numerics.fused import FusedNPLM
from ..numerics.sparse import SparseNPLM
from ..training.checkpoint import data_fingerprint
from ..training.backends import SerialBackend

METHODS = ("full", "class-frequency", "class-exchange", "class-file", "tree-huffman", "tree-cluster", "is",
           "is-adaptive", "is-target", "nce")
EXCHANGE_PASSES = 3  # as the class-based n-grams of Table 1


def parse_methods(text: str | None, class_file: str | None) -> list[str]:
    """'nce,full' -> ['full', 'nce'] (table order, the full softmax always first); all by default."""
    if text is None:
        names = [m for m in METHODS if m != "class-file" or class_file]
    else:
        names = [t.strip().lower() for t in text.split(",") if t.strip()]
        for name in names:
            if name not in METHODS:
                raise UserError(f"unknown method {name!r}: choose from {', '.join(METHODS)}")
    if "class-file" in names and not class_file:
        raise UserError("class_file is needed by the class-file method (a file of 'word class' lines)",
                        setting="class_file")
    return [m for m in METHODS if m in set(names) | {"full"}]


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


def build_model(method: str, corpus, net: NPLMConfig, opts, cache: Path | None = None, quiet: bool = True):
    """(model, description of its output layer) for one method (module docstring)."""
    V, h = corpus.V, net.h
    counts = train_counts(corpus.train, V)
    C = check_n_classes(opts.n_classes, V) if opts.n_classes is not None else default_n_classes(V)
    if method == "full":
        return FusedNPLM(net), {"cost_per_example": V}
    if method.startswith("class-"):
        labels = {"class-frequency": lambda: frequency_classes(counts, C),
                  "class-exchange": lambda: exchange_labels(corpus, C, cache, quiet),
                  "class-file": lambda: read_class_file(opts.class_file, corpus.vocab)}[method]()
        layer = ClassSoftmax(V, h, labels)
        p = counts / max(counts.sum(), 1)
        desc = {"n_classes": layer.n_classes, "largest_class": int(layer.sizes.max()),
                "cost_per_example": round(layer.n_classes + float(p @ layer.sizes[layer.labels]), 1)}
    elif method.startswith("tree-"):
        merges = (huffman_merges(counts) if method == "tree-huffman"
                  else cluster_merges(corpus.train, exchange_labels(corpus, C, cache, quiet), counts))
        tree = Tree(merges, V)
        layer = TreeSoftmax(V, h, tree)
        desc = {"mean_depth": round(tree.mean_depth(counts), 2), "max_depth": int(tree.depth.max()),
                "cost_per_example": round(tree.mean_depth(counts), 2)}
    else:
        k = opts.k_nce if method == "nce" else opts.k_is
        cls = {"is": ImportanceSampling, "is-adaptive": AdaptiveImportanceSampling,
               "is-target": ImportanceSamplingWithTarget, "nce": NCESoftmax}[method]
        layer = cls(V, h, counts, k, seed=net.seed)
        desc = {"k": k, "cost_per_example": k + 1}
    return SparseNPLM(net, layer), desc


class TimedBackend(SerialBackend):
    """The serial backend, timing the updates and the validation apart, in wall-clock seconds and in
    this process's CPU seconds (fairer on a shared machine: time spent waiting for a core is not
    counted); each epoch's seconds go into the history (``train_seconds``, ``train_cpu_seconds``,
    ``valid_seconds``; ``timing_partial`` for an epoch resumed from a checkpoint inside it, whose
    updates before the interruption were not timed)."""

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
        if self.partial:
            out["timing_partial"] = True
        self.t_train = self.t_train_cpu = self.t_valid = 0.0
        self.partial = False
        return out


def evaluate(model, corpus, batch: int = 1024) -> dict:
    """Exact valid and test perplexities; test-set examples/s of that exact evaluation; for the sampled
    objectives also log Z over the test set and the self-normalized perplexity exp(-mean y_w)."""
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
    out_layer = getattr(model, "output", None)
    if isinstance(out_layer, SampledSoftmax):
        ctx, tgt = corpus.windows("test", n)
        logZ, yt, seconds = [], [], 0.0
        for i in range(0, len(tgt), batch):
            inputs = model.forward(ctx[i:i + batch])["inputs"]
            t0 = time.perf_counter()
            yt.append(out_layer.log_prob_unnormalized(model.params, inputs, tgt[i:i + batch]))
            seconds += time.perf_counter() - t0
            logZ.append(out_layer.log_normalizer(model.params, inputs))
        logZ, yt = np.concatenate(logZ), np.concatenate(yt)
        out.update(test_log_Z_mean=float(logZ.mean()), test_log_Z_std=float(logZ.std()),
                   test_log_Z_abs_mean=float(np.abs(logZ).mean()),
                   test_ppl_self_normalized=float(np.exp(-yt.mean())),
                   eval_output_examples_per_s_self_normalized=len(tgt) / max(seconds, 1e-9))
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
