"""Looking at the learned word features C and at training: plots, and word labels that do not pile up.

Every function returns its Figure or Axes and takes ``ax=`` where sensible: :func:`plot_features`,
:func:`plot_snapshots`, :func:`plot_agreement`, :func:`plot_learning_curves`;
:func:`~nplm_edu.analysis.labels.spread_labels` and :func:`~nplm_edu.analysis.labels.annotate_words`
place word labels without overlaps. The numbers behind the pictures are in
:mod:`nplm_edu.analysis.features` and the slider over training time in
:mod:`nplm_edu.analysis.explorer`; both are re-exported here, so a chapter needs one import.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import UserError
from .explorer import explorer
from .features import (Snapshots, chance_agreement, class_agreement, class_labels, nearest_neighbours, neighbours,
                       pca, project, similarity)
from .labels import annotate_words, class_colours, spread_labels

__all__ = ["plot_features", "plot_snapshots", "plot_agreement", "load_history", "plot_learning_curves",
           # re-exported, so that a chapter needs one import:
           "Snapshots", "chance_agreement", "class_agreement", "class_labels", "nearest_neighbours", "neighbours",
           "pca", "project", "similarity", "explorer", "annotate_words", "class_colours", "spread_labels"]


# --------------------------------------------------------------------------- plots
def _axes(ax, figsize=(5, 5)):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_features(C: np.ndarray, words, labels=None, ax=None, highlight=None, k: int = 5,
                  metric: str = "cosine", title: str | None = None, annotate: bool = True,
                  xy: np.ndarray | None = None, lim=None):
    """Scatter the words in 2-D (m = 2 directly, else PCA), coloured by class, names beside points.

    ``highlight``: a word (in ``words``) drawn large, with lines to its ``k`` nearest neighbours
    (found in the full m-dimensional table). ``xy``: precomputed 2-D coordinates. ``lim``:
    ((xmin, xmax), (ymin, ymax)). Returns the Axes."""
    ax = _axes(ax)
    words = list(words)
    C = np.asarray(C, dtype=np.float64)
    xy = project(C) if xy is None else np.asarray(xy)
    if labels is not None:
        colours = class_colours(labels)
        col = [colours.get(c, (0.6, 0.6, 0.6, 1.0)) for c in labels]
        for c, rgba in colours.items():  # legend, one entry per class
            ax.scatter([], [], color=rgba, label=c, s=20)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # outside, right
    else:
        col = ["C0"] * len(words)
    ax.scatter(xy[:, 0], xy[:, 1], c=col, s=18, zorder=2)
    if annotate:
        for (x, y), w in zip(xy, words):
            ax.annotate(w, (x, y), fontsize=7, xytext=(2, 2), textcoords="offset points", zorder=3)
    if highlight is not None:
        if highlight not in words:
            raise UserError(f"{highlight!r} is not among the plotted words")
        i = words.index(highlight)
        nn, _ = nearest_neighbours(C, [i], k, metric)
        for j in nn[0]:
            ax.plot(*xy[[i, j]].T, color="k", lw=0.8, zorder=1)
        ax.scatter(*xy[nn[0]].T, s=80, facecolors="none", edgecolors="k", zorder=4)
        ax.scatter(*xy[i], s=160, marker="*", color="crimson", zorder=5)
    if lim is not None:
        ax.set_xlim(*lim[0])
        ax.set_ylim(*lim[1])
    ax.set_xlabel("feature 1" if C.shape[1] == 2 else "principal component 1")
    ax.set_ylabel("feature 2" if C.shape[1] == 2 else "principal component 2")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def plot_snapshots(snaps: Snapshots, words, labels=None, which=None, ncols: int = 4, size: float = 3.2,
                   annotate: bool = False):
    """Small multiples: the 2-D features at a few training times (default 4, evenly spaced,
    first and last included). Returns the Figure."""
    import matplotlib.pyplot as plt

    if len(snaps) == 0:
        raise UserError("no snapshots recorded")
    which = np.unique(np.linspace(0, len(snaps) - 1, 4).round().astype(int)) if which is None else list(which)
    nrows = -(-len(which) // ncols)
    fig, axes = plt.subplots(nrows, min(ncols, len(which)), figsize=(size * min(ncols, len(which)), size * nrows),
                             squeeze=False)
    for ax, i in zip(axes.ravel(), which):
        step, C = snaps[i]
        plot_features(C, words, labels, ax=ax, annotate=annotate, title=f"after {step:,} updates")
        if ax.get_legend():
            ax.get_legend().remove()
        ax.set_xlabel("")
        ax.set_ylabel("")
    for ax in axes.ravel()[len(which):]:
        ax.axis("off")
    fig.tight_layout()
    if labels is not None:  # one legend for all panels, to the right
        fig.legend(*axes.ravel()[0].get_legend_handles_labels(), loc="center left", bbox_to_anchor=(1.0, 0.5),
                   fontsize=8, frameon=False)
    return fig


def plot_agreement(steps, values, ax=None, chance: float | None = None, label: str | None = None):
    """Class agreement (nearest-neighbour class match) against the number of updates. Returns the Axes."""
    ax = _axes(ax, (5, 3.2))
    ax.plot(steps, values, marker="." if len(values) <= 60 else None, label=label)
    if chance is not None:
        ax.axhline(chance, color="grey", ls="--", lw=1, label="chance")
    ax.set_xlabel("updates")
    ax.set_ylabel("nearest-neighbour class agreement")
    ax.set_ylim(0, 1.02)
    if chance is not None or label is not None:
        ax.legend(frameon=False)
    return ax


def load_history(history) -> dict:
    """A training history: the dict ``nplm_edu.train.train`` returns, or the path of its history.json."""
    if isinstance(history, (str, Path)):
        p = Path(history)
        if not p.exists():
            raise UserError(f"no such history file: {p}")
        try:
            history = json.loads(p.read_text())
        except json.JSONDecodeError as e:
            raise UserError(f"{p} is not JSON: {e}") from None
    if "epochs" not in history:
        raise UserError("a training history needs an 'epochs' list (per-epoch train_ppl / valid_ppl)")
    return history


def plot_learning_curves(history, ax=None, label: str | None = None, log: bool = True):
    """Per-epoch training and validation perplexity from a history dict or history.json. Returns the Axes."""
    ax = _axes(ax, (5, 3.2))
    ep = load_history(history)["epochs"]
    x = [e["epoch"] for e in ep]
    pre = f"{label}: " if label else ""
    line, = ax.plot(x, [e["train_ppl"] for e in ep], marker="o", ms=3, label=f"{pre}train")
    if any("valid_ppl" in e for e in ep):
        ax.plot([e["epoch"] for e in ep if "valid_ppl" in e], [e["valid_ppl"] for e in ep if "valid_ppl" in e],
                marker="s", ms=3, ls="--", color=line.get_color(), label=f"{pre}validation")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("perplexity")
    ax.legend(frameon=False)
    return ax
