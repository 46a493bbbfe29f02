"""What the cheap output layers share: gradients that touch few rows, training counts, checks.

The paper's output layer reads and updates all |V| rows of U for every example. The layers that replaced
it after 2003 (section 5 of the paper; Goodman 2001, Morin & Bengio 2005, Bengio & Senecal 2003) read
only a few rows per example: the words of the target's class (class-factored softmax), the nodes on the
target's path (tree softmax), the target and k sampled words (importance sampling, NCE). Their gradients
are zero outside those rows, so :meth:`SparseOutputLayer.backward_sparse` returns them as

* :class:`Rows`: ``values[i]`` is added to row ``rows[i]`` (rows may repeat: a tree node on several
  examples' paths, a word sampled twice), or
* :class:`Blocks`: contiguous row ranges, each gradient block a product A^T B of two small factors
  (the words of one class, stored together: dL/dy^T a of the class's examples),

and a plain array for small parameters. :meth:`SparseOutputLayer.backward` makes them dense (the
interface of :mod:`nplm_edu.models.output`: what the gradient checks compare), and the fast trainer
(:mod:`nplm_edu.numerics.sparse`) updates only those rows.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .output import OutputLayer


class Rows:
    """A gradient zero outside some rows: ``values`` (P, width) added to rows ``rows`` (P,) (repeats add)."""

    __slots__ = ("rows", "values")

    def __init__(self, rows: np.ndarray, values: np.ndarray):
        self.rows, self.values = rows, values

    def dense(self, like: np.ndarray) -> np.ndarray:
        g = np.zeros(like.shape, np.result_type(like, self.values))  # (R, width)
        np.add.at(g, self.rows, self.values)  # repeated rows add up
        return g


class Blocks:
    """A gradient zero outside disjoint row ranges, each given by two factors: a list of
    (lo, hi, A (n, hi - lo), B (n, width)) meaning rows lo:hi get A^T B (B None: a bias, A summed
    over its n rows). The fast trainer adds A^T B into the weights in one BLAS call."""

    __slots__ = ("blocks",)

    def __init__(self, blocks: list):
        self.blocks = blocks

    def dense(self, like: np.ndarray) -> np.ndarray:
        g = np.zeros(like.shape, like.dtype)
        for lo, hi, A, B in self.blocks:
            g[lo:hi] += A.T @ B if B is not None else A.sum(axis=0)
        return g


def densify(g, like: np.ndarray) -> np.ndarray:
    """The dense gradient (shaped like the parameter ``like``) of a Rows, Blocks or array."""
    return g.dense(like) if isinstance(g, (Rows, Blocks)) else g


class SparseOutputLayer(OutputLayer):
    """An output layer of one input, a = tanh(d + H x) (``widths = {"U": h}``: the NPLM without direct
    connections, as MLP9), whose gradients are :class:`Rows` / :class:`Blocks`. Subclasses implement
    ``loss``, ``backward_sparse``, ``log_probs`` and (fast) ``log_prob``.

    ``state``: parameters that are not trained (no gradient, no weight decay), e.g. a sampler's
    counter or an adaptive proposal; they are saved in checkpoints with the weights.

    ``lazy_decay``: whether the fast trainer may keep the output weights' decay pending as one scale
    s (true weights = s * stored, the layer fed s a): right when each score is linear in one decayed
    matrix; a layer that multiplies two decayed matrices (the adaptive softmax's projected tails)
    sets it False and has the decay applied at every step."""

    state: tuple[str, ...] = ()
    name = "sparse"
    lazy_decay = True

    def input(self, inputs: dict) -> np.ndarray:
        """The one input a (K, h); one clear line if the network also has direct connections."""
        if set(inputs) != {"U"}:
            raise UserError(f"the {self.name} output layer reads the hidden layer only: build the network "
                            "without direct connections (as MLP9)")
        return inputs["U"]

    def backward_sparse(self, params: dict, cache: dict) -> tuple[dict, dict]:
        """(dL/d inputs, dL/d params as arrays, :class:`Rows` or :class:`Blocks`) of the mean loss."""
        raise NotImplementedError

    def backward(self, params, cache):
        g_in, grads = self.backward_sparse(params, cache)
        return g_in, {k: densify(g, params[k]) for k, g in grads.items()}


def check_targets(targets: np.ndarray, V: int) -> np.ndarray:
    """Targets as an int array of ids in 0..|V|-1, else one UserError."""
    targets = np.asarray(targets)
    if targets.size and (targets.dtype.kind not in "iu" or targets.min() < 0 or targets.max() >= V):
        raise UserError(f"targets must be word ids in 0..{V - 1}")
    return targets


def train_counts(train_ids: np.ndarray, V: int) -> np.ndarray:
    """How often each word occurs in the training set (|V|,) int64: the only frequencies any output
    layer may use (the vocabulary's own counts include the test set)."""
    train_ids = np.asarray(train_ids)
    if train_ids.size and (train_ids.min() < 0 or train_ids.max() >= V):
        raise UserError(f"training ids must lie in 0..{V - 1}")
    return np.bincount(train_ids, minlength=V).astype(np.int64)


def check_counts(counts, V: int) -> np.ndarray:
    """Word counts (|V|,) >= 0, else one UserError."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape != (V,):
        raise UserError(f"word counts must have one entry per word ({V}), got shape {counts.shape}")
    if not np.all(np.isfinite(counts)) or counts.min() < 0:
        raise UserError("word counts must be finite and >= 0")
    return counts


def check_sizes(V: int, h: int) -> None:
    if V < 2:
        raise UserError(f"an output layer needs at least 2 words, got |V| = {V}")
    if h < 1:
        raise UserError(f"an output layer needs hidden units (h >= 1), got h = {h}")
