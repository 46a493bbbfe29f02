"""The rows of the recurrent table, each one entry of ``ROWS``, and what is measured of each trained seed.

A row is a :class:`Row`: a name, one line saying what it is, ``make(V, seed, sizes)`` building its
model, and its kind; :meth:`Row.method` is the :class:`~nplm_edu.experiments.protocol.Method` the
protocol trains. Three kinds of model exist:

- a *stream* model (:func:`stream_method`) reads the training text as B parallel streams with
  truncated backpropagation through time, its state carried from batch to batch
  (:mod:`nplm_edu.training.stream`); it is scored over every token with its state carried through
  each split, and again with the state reset at every paragraph mark;
- a *window* model (:func:`window_method`) predicts each word from the n-1 words before it, trained
  by the NPLM's trainer on shuffled windows of B T examples an update (the tokens a stream update
  reads), with the same clipping; it is scored over every token from its window;
- a *blocks* model (:func:`block_method`), a Transformer, is trained on blocks of its window with a
  prediction at every position (:mod:`nplm_edu.training.blocks`), B T words an update, the same
  clipping and no dropout; it is scored over every token from the n_ctx words before it, and sampled
  from the same prompt as the others, its window growing from the prompt's words.

Every row shares one training rule (``RULE``, ``STREAM``): the mean NLL per token, SGD with
the learning rate the grid chooses, decayed by 0.8 per epoch, the gradient norm clipped at 0.25,
inverted dropout 0.3 on the inputs of the recurrent (or hidden) layer and on the output layer's
input (Zaremba et al. 2014), no weight decay. A new row is one call of :func:`register`.

Each trained seed's row (:func:`seed_extras`): validation and test perplexity, the mixture with the
modified Kneser-Ney 5-gram of the same slice (one weight fitted by EM on validation; the 5-gram is
computed once per corpus and cached, :func:`kn5_log_probs`), the parameter count, three samples of
30 words from fixed seeds (:func:`~nplm_edu.analysis.sampling.seeded_samples`) and, for seed 0 of a stream model, the gradient
through time.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from ..analysis.evaluation import r3
from ..analysis.mixture import batched_log_prob
from ..analysis.recurrent import gradient_through_time, mixture_with, ppl
from ..analysis.sampling import seeded_samples
from ..data.files import atomic_write
from ..models.ngram import KneserNey
from ..models.nplm import NPLMConfig
from ..models.rnn import RecurrentConfig
from ..models.transformer import TransformerConfig
from ..numerics.fused import FusedNPLM
from ..numerics.recurrent import recurrent_model
from ..numerics.transformer import FastTransformer
from ..numerics.window_recurrent import WindowRecurrent, WindowRecurrentConfig
from ..training.backends import SerialBackend
from ..training.blocks import BlockBackend
from ..training.config import TrainConfig
from ..training.stream import StreamBackend, StreamConfig, paragraph_id, split_log_probs, split_stream
from .lightrnn_char import char_lstm
from .protocol import Method

RULE = TrainConfig(epochs=40, batch=32, lr=1.0, decay_rate=0.0, lr_decay=0.8, weight_decay=0.0, threads=1,
                   dropout_x=0.3, dropout_a=0.3, patience=3, seed=0)
STREAM = StreamConfig(T=35, clip=0.25)
SIZES = {"m": 256, "h": 256}
QUICK = {"m": 32, "h": 32, "batch": 8, "T": 10}  # --quick: a small network on a tiny slice
N = 5  # the window rows' order: the NPLM's n, four words of context
GRAD_K = 50  # steps back of the gradient-through-time measurement
GRAD_CELLS = ("rnn", "lstm")  # the cells it is measured for


@dataclass(frozen=True)
class Row:
    """A row of the table: ``make(V, seed, sizes)`` -> its model, of ``kind`` "stream", "window" or "blocks"."""

    name: str
    what: str
    make: Callable
    kind: str

    def method(self, corpus, quick: bool, kn: dict) -> Method:
        """The protocol's Method of this row on ``corpus`` (``kn``: the KN 5-gram's log-probabilities)."""
        methods = {"stream": stream_method, "window": window_method, "blocks": block_method}
        return methods[self.kind](self.name, self.make, corpus, quick, kn)


ROWS: dict[str, Row] = {}


def register(name: str, what: str, make: Callable, kind: str) -> Row:
    """Add a row to the table (a new model is one call): ``make(V, seed, sizes)`` -> the model."""
    if kind not in ("stream", "window", "blocks"):
        raise ValueError(f"a row's kind is stream, window or blocks, got {kind!r}")
    ROWS[name] = Row(name, what, make, kind)
    return ROWS[name]


def sizes(quick: bool) -> dict:
    return {**SIZES, "batch": RULE.batch, "T": STREAM.T, **(QUICK if quick else {})}


def rule(lr: float, seed: int, quick: bool, window: bool = False) -> TrainConfig:
    """The training rule with the grid's ``lr`` and ``seed``; a window model's batch holds B T examples."""
    s = sizes(quick)
    return replace(RULE, lr=lr, seed=seed, batch=s["batch"] * s["T"] if window else s["batch"])


# --------------------------------------------------------------------------- the two kinds of model
def stream_method(name: str, make: Callable, corpus, quick: bool, kn: dict) -> Method:
    """A stream model: ``make(V, seed, sizes)`` -> a recurrent model (:mod:`nplm_edu.models.rnn`'s interface)."""
    stream = replace(STREAM, T=sizes(quick)["T"])

    def build(lr, seed):  # the vocabulary's words too, for a row that reads spellings
        model, cfg = make(corpus.V, seed, {**sizes(quick), "words": corpus.vocab.words}), rule(lr, seed, quick)
        return model, cfg, StreamBackend(model, cfg, stream)

    lp = SplitLogProbs(split_log_probs)
    return Method(name, build, score=lambda m, c, s: r3(ppl(lp(m, c, s))), stamp={"stream": asdict(stream)},
                  extra=lambda m, c: seed_extras(m, c, kn, lp, stream=True))


def window_method(name: str, make: Callable, corpus, quick: bool, kn: dict) -> Method:
    """A window model: ``make(V, seed, sizes)`` -> a model with the NPLM's interface (``order``,
    ``loss_and_grads(contexts, targets, mask_x, mask_a)``, ``log_prob``), trained with clipping."""

    def build(lr, seed):
        model, cfg = make(corpus.V, seed, sizes(quick)), rule(lr, seed, quick, window=True)
        return model, cfg, SerialBackend(model, cfg, clip=STREAM.clip)

    lp = SplitLogProbs(window_log_probs)
    return Method(name, build, score=lambda m, c, s: r3(ppl(lp(m, c, s))), stamp={"clip": STREAM.clip},
                  extra=lambda m, c: seed_extras(m, c, kn, lp))


def block_method(name: str, make: Callable, corpus, quick: bool, kn: dict) -> Method:
    """A Transformer: ``make(V, seed, sizes)`` -> a :class:`~nplm_edu.models.transformer.Transformer`,
    trained on K = B T / n_ctx blocks an update (B T words predicted, as a stream update reads) with the
    same clipping, no dropout; read through its :meth:`~nplm_edu.models.transformer.Transformer.window_model`."""

    def build(lr, seed):
        s = sizes(quick)
        model = make(corpus.V, seed, s)
        cfg = replace(rule(lr, seed, quick), batch=max(1, s["batch"] * s["T"] // model.config.n_ctx), dropout_x=0.0,
                      dropout_a=0.0, tie=model.tied)
        return model, cfg, BlockBackend(model, cfg, clip=STREAM.clip)

    lp = SplitLogProbs(window_log_probs)
    return Method(name, build, score=lambda m, c, s: r3(ppl(lp(m.window_model(), c, s))),
                  stamp={"clip": STREAM.clip, "dropout": 0.0},
                  extra=lambda m, c: seed_extras(m.window_model(), c, kn, lp))


class SplitLogProbs:
    """``log_probs(model, corpus, split)`` computed once per trained model and split: the perplexity and
    the mixture read the same numbers."""

    def __init__(self, log_probs: Callable):
        self.log_probs, self.model, self.done = log_probs, None, {}

    def __call__(self, model, corpus, split: str) -> np.ndarray:
        if model is not self.model:
            self.model, self.done = model, {}
        if split not in self.done:
            self.done[split] = self.log_probs(model, corpus, split)
        return self.done[split]


def window_log_probs(model, corpus, split: str) -> np.ndarray:
    return batched_log_prob(model, *corpus.windows(split, model.order), batch=1024)


# --------------------------------------------------------------------------- the rows
def _cell(cell: str):
    return lambda V, seed, s: recurrent_model(RecurrentConfig(V=V, cell=cell, m=s["m"], h=s["h"], seed=seed))


def _lstm_window(V, seed, s):
    return WindowRecurrent(WindowRecurrentConfig(V=V, cell="lstm", n=N, m=s["m"], h=s["h"], seed=seed))


def _char_lstm(V, seed, s):  # the parameter count does not depend on the spellings: any V words count it
    return char_lstm(s.get("words") or [str(i) for i in range(V)], seed, s)


def _nplm(V, seed, s):
    return FusedNPLM(NPLMConfig(V=V, n=N, m=s["m"], h=s["h"], direct=False, seed=seed))


register("rnn", "Elman network (Elman 1990; Mikolov et al. 2010), state carried", _cell("rnn"), "stream")
register("lstm", "LSTM (Hochreiter and Schmidhuber 1997; forget gate of Gers et al. 2000), state carried",
         _cell("lstm"), "stream")
register("gru", "GRU (Cho et al. 2014), state carried", _cell("gru"), "stream")
register("char-lstm", "the LSTM reading each word from its spelling (Kim et al. 2016: character convolutions of "
         "widths 1 to 6, max over time, a highway layer; m = 525) instead of C, state carried", _char_lstm, "stream")
register("lstm-4", f"the same LSTM fed only the last {N - 1} words (a window model: zero state, {N - 1} steps)",
         _lstm_window, "window")
register("nplm-dropout", f"the NPLM (n = {N}, no direct connections) with the LSTM's sizes, dropout and clipping",
         _nplm, "window")


def _transformer(n_ctx: int):
    return lambda V, seed, s: FastTransformer(TransformerConfig(V=V, n_ctx=n_ctx, m=s["m"], heads=4, layers=2,
                                                                d_ff=4 * s["m"], tie=True, seed=seed))


for _n_ctx in (N - 1, 32):
    register(f"transformer-{_n_ctx}", f"a decoder-only Transformer (Vaswani et al. 2017; Radford et al. 2019) reading "
             f"the last {_n_ctx} words: 2 blocks of 4 heads, d_ff 4m, output tied to C, no dropout, trained on blocks "
             f"of {_n_ctx} words with every position predicted", _transformer(_n_ctx), "blocks")


def parameter_counts(V: int, quick: bool = False, names=None) -> dict:
    """The parameter counts of the rows ``names`` (default all) at vocabulary size V (built, not trained)."""
    return {name: int(ROWS[name].make(V, 0, sizes(quick)).num_params()) for name in (names or ROWS)}


# --------------------------------------------------------------------------- one trained seed
def seed_extras(model, corpus, kn: dict, lp: SplitLogProbs, stream: bool = False) -> dict:
    """What a seed's row holds beside its perplexities (read from ``lp``, after the protocol scored the
    test set with it, once): the KN 5-gram mixture, the parameter count, the samples; a stream model
    also its test perplexity with the state reset at paragraph marks, and seed 0 its gradient through time."""
    valid, test = lp(model, corpus, "valid"), lp(model, corpus, "test")
    mix = mixture_with(valid, kn["valid"], test, kn["test"])
    row = {"mix_weight": mix["weight"], "mix_valid_ppl": r3(mix["valid"]), "mix_test_ppl": r3(mix["test"]),
           "parameters": model.num_params()}
    if stream and paragraph_id(corpus.vocab) is not None:
        row["test_reset_ppl"] = r3(ppl(split_log_probs(model, corpus, "test", reset_at_paragraph=True)))
    if stream and model.config.seed == 0 and model.kind in GRAD_CELLS:  # the vanishing gradient, on validation
        row["gradient_through_time"] = gradient_through_time(model, split_stream(corpus, "valid")[0], K=GRAD_K)
    row["samples"] = seeded_samples(model, corpus)
    return row


# --------------------------------------------------------------------------- the KN 5-gram, once
def corpus_key(corpus) -> str:
    """A short digest of the corpus's ids, split bounds and vocabulary size."""
    h = hashlib.sha256(np.ascontiguousarray(corpus.ids, dtype=np.int64).tobytes())
    h.update(f"{corpus.bounds}|{corpus.V}".encode())
    return h.hexdigest()[:16]


def kn5_log_probs(corpus, folder) -> dict:
    """Our modified Kneser-Ney 5-gram fitted on ``corpus``'s training split: log P of every validation
    and test token, in order; cached in ``folder`` (computed once per corpus)."""
    path = Path(folder) / f"kn5-{corpus_key(corpus)}.npz"
    if path.exists():
        with np.load(path) as f:
            return {"valid": f["valid"], "test": f["test"]}
    kn5 = KneserNey(5, corpus.V).fit(corpus.train)
    out = {s: batched_log_prob(kn5, *corpus.windows(s, 5)) for s in ("valid", "test")}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: np.savez(f, **out))
    return out
