"""Training a recurrent model on one continuous stream, with the NPLM's trainer (section 4's Brown
is one stream of words with paragraph and text marks).

The training stream of N tokens is cut into B equal parts, laid side by side as the rows of a
(B, L) array (L = N // B; the last N - B L tokens are not used). An epoch reads the columns from
left to right, T at a time: batch j feeds the words in columns jT .. jT+T-1 and predicts the ones in
columns jT+1 .. jT+T (the last batch may be shorter), so each of the B rows is one long stretch of
text read in order, never shuffled. The state after batch j is where batch j+1 starts (truncated
backpropagation through time, :mod:`nplm_edu.models.rnn`); it is reset to zeros at the start of
every epoch, and, with ``reset_at_paragraph``, before every paragraph mark ``<p>`` is read.

:class:`StreamBackend` is a backend of :func:`nplm_edu.training.trainer.train`: the same loop, the
same checkpoints (the carried state and the clipping statistics go into the checkpoint's extra
arrays, so a resumed run continues bit for bit), early stopping on validation, progress bar and
stop on a non-finite loss as the NPLM. Each update: dropout masks (Zaremba et al. 2014, ``dropout_x``
on x_t and ``dropout_a`` on h_t), the gradient of the mean NLL over the batch's B T tokens,
gradient-norm clipping at ``clip`` (:mod:`nplm_edu.training.clip`), then SGD with weight decay on
C, Wx, Wh, U. The validation perplexity is scored over every validation token, as one stream read
in order with the state carried through all of it (:func:`split_log_probs`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..data.corpus import Corpus
from ..data.vocab import PARAGRAPH
from ..errors import UserError
from ..models.char_input import CharConfig, CharInput
from ..models.input import WithInput
from ..models.rnn import ALL_CELLS, RecurrentConfig
from ..numerics.recurrent import recurrent_model
from ..numerics.threads import set_threads
from .backends import Backend
from .checkpoint import TrainState, build_from_meta, network_from_checkpoint
from .clip import check_clip, clip_grad_norm
from .optim import dropout_mask, sgd_step


@dataclass
class StreamConfig:
    """Truncation length T (time steps per batch; the batch's B is TrainConfig.batch), the clipping
    threshold on the gradient norm, and whether the state is reset at every paragraph mark in training."""

    T: int = 35
    clip: float = 1.0
    reset_at_paragraph: bool = False

    def validate(self) -> None:
        if not isinstance(self.T, (int, np.integer)) or self.T < 1:
            raise UserError(f"T (time steps per batch) must be a whole number >= 1, got {self.T}", setting="T")
        check_clip(self.clip)


def split_stream(corpus, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) that score every token of ``split`` in order: targets[t] is predicted after
    reading inputs[..t]. Validation and test start from the last token of the split before them
    (as the NPLM's windows reach back); training starts at its second token."""
    corpus.split(split)
    lo = {"train": 1, "valid": corpus.bounds[0], "test": corpus.bounds[1]}[split]
    hi = {"train": corpus.bounds[0], "valid": corpus.bounds[1], "test": len(corpus.ids)}[split]
    return corpus.ids[lo - 1:hi - 1], corpus.ids[lo:hi]


def paragraph_id(vocab) -> int | None:
    return vocab.index.get(PARAGRAPH)


def split_log_probs(model, corpus, split: str, reset_at_paragraph: bool = False) -> np.ndarray:
    """log P of every token of ``split`` (N,) float64: one stream read in order from a zero state,
    the state carried through all of it, or reset to zeros before every ``<p>`` is read."""
    inputs, targets = split_stream(corpus, split)
    resets = None
    if reset_at_paragraph:
        p = paragraph_id(corpus.vocab)
        if p is None:
            raise UserError(f"the corpus {corpus.name} has no paragraph mark {PARAGRAPH} to reset at")
        resets = inputs == p
    return model.log_prob_stream(inputs, targets, resets)


class StreamBatches:
    """The plan of one epoch for the trainer: the (B, T) windows of the (B, L) stream array, in order."""

    unit = "tok"

    def __init__(self, train: np.ndarray, valid, B: int, T: int, reset_id: int | None = None):
        train = np.asarray(train)
        L = len(train) // B
        if L < 2:
            raise UserError(f"a training stream of {len(train)} tokens cannot be cut into B = {B} streams of "
                            "at least 2 tokens: use a smaller batch")
        self.data = train[:B * L].reshape(B, L)  # (B, L): row b is the b-th part of the stream
        self.B, self.T, self.L, self.reset_id = B, T, L, reset_id
        self.n_batches = -(-(L - 1) // T)
        self.per_epoch = B * (L - 1)  # tokens predicted per epoch
        self.valid = valid
        self.fingerprint = (train, None if valid is None else valid[1])

    def order(self, rng):
        return None  # a stream is read in order: nothing is drawn

    def limit(self, order, updates_left):
        return order

    def done(self, batches: int) -> int:
        return self.B * min(batches * self.T, self.L - 1)

    def batch(self, order, j: int):
        lo = j * self.T
        hi = min(lo + self.T, self.L - 1)
        X, Y = self.data[:, lo:hi], self.data[:, lo + 1:hi + 1]  # (B, T) inputs and next words
        resets = None if self.reset_id is None else X == self.reset_id
        return (X, Y, resets, j == 0), X.size


class StreamBackend(Backend):
    """One process training a recurrent model on the stream (see the module docstring); the
    parameters and checkpoint hooks of :class:`~nplm_edu.training.backends.Backend`."""

    def __init__(self, model, config, stream: StreamConfig | None = None):
        super().__init__(model)
        self.config, self.stream = config, stream or StreamConfig()
        self.stream.validate()
        set_threads(config.threads)  # the output layer split among this many threads (numerics.threads)
        if config.batch < 1:
            raise UserError(f"batch (B, the parallel streams) must be at least 1, got {config.batch}", setting="batch")
        if config.optimizer != "sgd":
            raise UserError("recurrent models are trained with SGD and gradient clipping (optimizer sgd)")
        if config.tie:
            raise UserError("tied embeddings are not offered for the recurrent models")
        self.state = None  # the carried state: a tuple of (B, h) arrays
        self.drop_rng = np.random.default_rng([config.seed, 1])  # the dropout masks
        self.norms = np.zeros(3)  # this epoch: sum of gradient norms, updates, updates clipped
        self.valid_seconds = 0.0

    def batches(self, data, config):
        """The epoch plan from a Corpus, or from (train ids, valid ids or None)."""
        config.validate()
        if isinstance(data, Corpus):
            train, valid = data.train, split_stream(data, "valid") if len(data.valid) else None
            reset_id = paragraph_id(data.vocab) if self.stream.reset_at_paragraph else None
        else:
            train, v = data
            valid = None if v is None else (np.asarray(v)[:-1], np.asarray(v)[1:])
            reset_id = None
        if self.stream.reset_at_paragraph and reset_id is None:
            raise UserError(f"reset_at_paragraph needs a corpus with the paragraph mark {PARAGRAPH}")
        return StreamBatches(train, valid, config.batch, self.stream.T, reset_id)

    def update(self, X, Y, resets, first: bool, lr: float) -> float:
        """One truncated-BPTT update on a (B, T) batch; returns its mean NLL before the update."""
        c, m = self.config, self.model
        B, T = X.shape
        if first or self.state is None:
            self.state = m.initial_state(B)  # a new epoch: every stream starts from zeros
        dt = np.dtype(m.config.dtype)
        mx = dropout_mask(self.drop_rng, (T, B, m.config.m), c.dropout_x, dt)
        ma = dropout_mask(self.drop_rng, (T, B, m.config.h), c.dropout_a, dt)
        rows = {}
        if m.sparse_grads:  # the fast path: only the batch's rows of dL/dC
            loss, grads, self.state, rows["C"] = m.loss_and_sparse_grads(X, Y, self.state, mx, ma, resets)
        else:
            loss, grads, self.state = m.loss_and_grads(X, Y, self.state, mx, ma, resets)
        norm = clip_grad_norm(grads, self.stream.clip)  # the zero rows of dL/dC add nothing to the norm
        self.norms += (norm, 1, norm > self.stream.clip)
        sgd_step(m.params, grads, lr, c.weight_decay, m.decayed, rows, fast=True)
        return loss

    def batch_bytes(self, K: int) -> int:
        """The scores of the K T positions of one batch (K: the parallel streams B)."""
        return K * self.stream.T * self.model.V * np.dtype(self.model.config.dtype).itemsize

    def epoch_extra(self) -> dict:
        s, n, clipped = self.norms
        self.norms = np.zeros(3)
        return {"grad_norm_mean": round(float(s / max(n, 1)), 4), "clipped_fraction": round(float(clipped / max(n, 1)), 4),
                "valid_seconds": round(self.valid_seconds, 2)}

    def perplexity(self, inputs, targets) -> float:
        t0 = time.monotonic()
        out = self.model.perplexity(inputs, targets)
        self.valid_seconds = time.monotonic() - t0
        return out

    def _settings(self) -> np.ndarray:
        return np.array([self.stream.T, self.stream.clip, float(self.stream.reset_at_paragraph)])

    def extra_arrays(self) -> dict:
        out = {"stream/settings": self._settings(), "stream/norms": self.norms.copy()}
        out.update({f"stream/state{i}": s for i, s in enumerate(self.state or ())})
        return out

    def load_extra(self, arrays: dict, state: TrainState) -> None:
        got = arrays.get("stream/settings")
        if got is None or not np.array_equal(got, self._settings()):
            old = "unknown" if got is None else f"T={int(got[0])}, clip={got[1]:g}, reset_at_paragraph={bool(got[2])}"
            raise UserError(f"cannot resume with T={self.stream.T}, clip={self.stream.clip:g}, reset_at_paragraph="
                            f"{self.stream.reset_at_paragraph}: the checkpoint used {old}")
        self.norms = arrays["stream/norms"].copy()
        carried = [arrays[f"stream/state{i}"] for i in range(self.model.n_state) if f"stream/state{i}" in arrays]
        self.state = tuple(s.copy() for s in carried) or None
        if state.drop_state is not None:
            self.drop_rng.bit_generator.state = state.drop_state

    def save_rng(self, state: TrainState) -> None:
        state.drop_state = self.drop_rng.bit_generator.state


def recurrent_from_checkpoint(path, best: bool = True):
    """The fast recurrent model of a checkpoint, with its best parameters (lowest validation
    perplexity) when stored and ``best``, else the latest; one clear error for another kind of model."""
    def build(meta):
        return build_from_meta(path, lambda config: recurrent_model(RecurrentConfig(**config)), meta["model"])

    return network_from_checkpoint(path, ALL_CELLS, "a recurrent one (RNN, LSTM or GRU)", build, best)


def char_recurrent_network(path, meta: dict, params: dict, words):
    """The recurrent network of a checkpoint whose parameters hold the character-aware input layer's
    (``Q``, ``F_w`` ...) instead of C, rebuilt with that layer spelling ``words`` (the vocabulary it was
    trained on, in id order: the layer spells each id's word); its parameters are not yet set. The
    layer's shape is the one the meta records (``input``), else, in a checkpoint written before the meta
    recorded it, the one its parameters' shapes give, words cut at the default length."""
    if len(words) != meta["model"].get("V"):
        raise UserError(f"{path} holds a network over {meta['model'].get('V')} words, not the {len(words)} given")
    shape = meta.get("input", {}).get("char")
    if shape is None:
        widths = sorted(int(k[2:]) for k in params if k.startswith("F_"))
        if "Q" not in params or not widths:
            raise UserError(f"{path} holds a recurrent network with neither a table C nor a character-aware input")
        shape = {"d": params["Q"].shape[1], "widths": widths, "filters": params[f"F_{widths[0]}"].shape[0] // widths[0]}
    layer = build_from_meta(path, lambda c: CharInput(words, CharConfig(**{**c, "widths": tuple(c["widths"])})), shape)
    net = build_from_meta(path, lambda config: recurrent_model(RecurrentConfig(**config)), meta["model"])
    return WithInput(net, layer, seed=net.config.seed)
