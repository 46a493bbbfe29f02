"""Two rows of the comparisons that change how words enter and leave a network: LightRNN's word table
(Li et al. 2016) in ``reproduce output-layers``, and the character-aware LSTM (Kim et al. 2016) in
``reproduce recurrent``. Each is built here, fixed before any run, so the targets add it as one entry.

* ``lightrnn``: MLP9 (n 5, h 100, m 30, no direct connections) with LightRNN's input vectors
  (15 row and 15 column features a word) and output layer on a table of R x C_t = 134 x 134 slots for
  Brown's |V| = 17,907, first filled at random from the seed; after every epoch's validation the
  table is reassigned on the training windows (:func:`~nplm_edu.models.lightrnn_table.reassign`, 5
  candidate rows and 5 columns a row per word), and the perplexities before and after go into that
  epoch's history line (``reassign``), with the CPU seconds it took (``reassign_cpu_seconds``).
* ``char-lstm``: the LSTM of the recurrent table reading each word through Kim et al.'s small
  character-aware layer (d = 15 features a character, widths 1 to 6 with 25 w filters, m = 525, one
  highway layer; the same layer in --quick runs) instead of the table C; the spelling rules are those of
  :mod:`nplm_edu.models.char_input` (an unknown character shares one id; words cut at 20 characters).
"""

from __future__ import annotations

import time

from ..models.char_input import CharConfig, CharInput
from ..models.input import WithInput
from ..models.lightrnn import LightInput, LightOutput
from ..models.lightrnn_table import reassign
from ..models.nplm import NPLM, NPLMConfig
from ..models.rnn import RecurrentConfig
from ..numerics.recurrent import recurrent_model

CANDIDATES = 5  # LightRNN: each word's candidate rows, and columns in each of them
CHAR = CharConfig()  # Kim et al.'s small layer: m = 525
CHAR_QUICK = CharConfig(d=8, widths=(1, 2, 3), filters=4)  # a small layer for quick checks: m = 24


def lightrnn_network(corpus, net: NPLMConfig):
    """(model, description) of the ``lightrnn`` row: ``net`` (no direct connections, even m) with
    LightRNN's input and output layers."""
    V = corpus.V
    out = LightOutput(V, net.h)
    model = WithInput(NPLM(net, output=out), LightInput(V, net.m), seed=net.seed)
    return model, {"table": [out.R, out.C_t], "candidates": CANDIDATES,
                   "cost_per_example": out.R + out.C_t + net.h}  # rows of h multiply-adds: Y^r, Y^c and A


class Reassigning:
    """A training backend's mixin for LightRNN (before the backend in the bases): after every epoch's
    validation, the table is reassigned on the training windows; the history line gets the result."""

    def batches(self, data, config):
        n = self.model.order
        self.train_windows = data.windows("train", n)
        self.valid_windows = data.windows("valid", n) if len(data.valid) else None
        return super().batches(data, config)

    def epoch_extra(self) -> dict:
        out = super().epoch_extra()
        c = time.process_time()
        result = reassign(self.model, *self.train_windows, k=CANDIDATES, valid=self.valid_windows)
        return {**out, "reassign": {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()},
                "reassign_cpu_seconds": round(time.process_time() - c, 2)}


def char_lstm(words: list[str], seed: int, sizes: dict, quick: bool = False):
    """The ``char-lstm`` row: an LSTM of ``sizes["h"]`` units reading its words through the
    character-aware layer (its m is the layer's)."""
    layer = CharInput(words, CHAR_QUICK if quick else CHAR)
    net = recurrent_model(RecurrentConfig(V=len(words), cell="lstm", m=layer.m, h=sizes["h"], seed=seed))
    return WithInput(net, layer, seed=seed)
