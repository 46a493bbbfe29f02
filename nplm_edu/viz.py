"""Looking at the learned word features C: pictures, neighbours, class separation, learning curves.

Section 5 of the paper suggests starting with m = 2 features per word so that the learned
representation can be displayed; section 1.1 argues that similar words ("cat", "dog") should end up
with similar feature vectors. This module makes both visible:

* :func:`pca` / :func:`project`: a 2-D view of C (m = 2 as is; larger m through PCA, an SVD of the
  centred table, in numpy);
* :func:`nearest_neighbours`: the words whose feature vectors are closest, by cosine similarity
  (or euclidean distance);
* :func:`class_agreement`: how well known word classes separate, as the fraction of words whose
  nearest neighbour has the same class (one number per snapshot, so it can be plotted over training);
* :class:`Snapshots`: a recorder for ``nplm_edu.train.train``'s ``callback`` hook that keeps a
  copy of C (or of selected rows) every few updates;
* plots (matplotlib; every function returns its Figure or Axes and takes ``ax=`` where sensible):
  :func:`plot_features`, :func:`plot_snapshots`, :func:`plot_agreement`, :func:`plot_learning_curves`,
  and :func:`explorer`, an ipywidgets slider over training time with a word picker, which keeps
  working in a static page (the rendered book) with no kernel;
* :func:`spread_labels` / :func:`annotate_words`: word labels placed so that they do not pile up.
"""

from __future__ import annotations

import html
import itertools
import json
import zlib
from pathlib import Path

import numpy as np

from .errors import UserError


# --------------------------------------------------------------------------- projection
def pca(X: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Principal components of the rows of X (N, m) through an SVD of the centred matrix.

    Returns (Z (N, k) the projected rows, components (k, m) orthonormal directions, ratio (k,) the
    share of the total variance each direction explains). Signs are fixed so that the largest
    loading of each component is positive: the same table always gives the same picture.

    >>> Z, comps, ratio = pca(np.array([[0., 0.], [2., 0.], [4., 0.]]), k=1)
    >>> Z.ravel().tolist(), comps.tolist(), ratio.tolist()
    ([-2.0, 0.0, 2.0], [[1.0, 0.0]], [1.0])
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise UserError(f"pca needs a 2-D table (N, m), got shape {X.shape}")
    if not 1 <= k <= min(X.shape):
        raise UserError(f"pca of a {X.shape[0]}x{X.shape[1]} table can keep 1 to {min(X.shape)} components, not {k}")
    Xc = X - X.mean(axis=0)  # (N, m) centred rows
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)  # Xc = U diag(s) Vt
    comps = Vt[:k]  # (k, m)
    big = np.argmax(np.abs(comps), axis=1)
    comps = comps * np.sign(comps[np.arange(k), big])[:, None]  # largest loading positive
    var = s ** 2
    ratio = var[:k] / var.sum() if var.sum() > 0 else np.zeros(k)
    return Xc @ comps.T, comps, ratio  # (N, k), (k, m), (k,)


def project(C: np.ndarray, components: np.ndarray | None = None, mean: np.ndarray | None = None) -> np.ndarray:
    """2-D coordinates of the rows of C (N, m): C itself when m = 2, else its first two principal
    components. Pass ``components`` (2, m) and ``mean`` (m,) to project several snapshots onto the
    same axes (e.g. those of the final table)."""
    C = np.asarray(C, dtype=np.float64)
    if C.shape[1] == 2 and components is None:
        return C
    if components is None:
        return pca(C, 2)[0]
    mean = C.mean(axis=0) if mean is None else mean
    return (C - mean) @ np.asarray(components).T  # (N, 2)


# --------------------------------------------------------------------------- neighbours
def similarity(C: np.ndarray, metric: str = "cosine") -> np.ndarray:
    """(N, N) similarities between the rows of C: cosine, or minus the euclidean distance
    (so that larger is always closer). Zero rows have cosine 0 with everything."""
    C = np.asarray(C, dtype=np.float64)
    if metric == "cosine":
        norm = np.linalg.norm(C, axis=1, keepdims=True)  # (N, 1)
        U = np.divide(C, norm, out=np.zeros_like(C), where=norm > 0)  # unit rows
        return U @ U.T  # (N, N)
    if metric == "euclidean":
        sq = np.sum(C * C, axis=1)  # (N,)
        d2 = sq[:, None] + sq[None, :] - 2 * C @ C.T  # (N, N) squared distances
        return -np.sqrt(np.maximum(d2, 0))
    raise UserError(f"unknown metric {metric!r}: use cosine or euclidean")


def nearest_neighbours(C: np.ndarray, queries, k: int = 5, metric: str = "cosine",
                       candidates=None) -> tuple[np.ndarray, np.ndarray]:
    """The k rows of C most similar to each query row (the query itself excluded).

    ``queries``: row ids (Q,); ``candidates``: row ids allowed as neighbours (default: all).
    Returns (ids (Q, k), scores (Q, k)) best first; scores are cosine similarities, or minus
    euclidean distances. Ties go to the smaller id."""
    C = np.asarray(C, dtype=np.float64)
    q = np.atleast_1d(np.asarray(queries, dtype=np.int64))
    cand = np.arange(len(C)) if candidates is None else np.asarray(candidates, dtype=np.int64)
    if k < 1 or k > len(cand) - 1:
        raise UserError(f"k must be between 1 and {len(cand) - 1}, got {k}")
    S = similarity(C, metric)[np.ix_(q, cand)]  # (Q, |cand|)
    S[q[:, None] == cand[None, :]] = -np.inf  # a word is not its own neighbour
    order = np.argsort(-S, axis=1, kind="stable")[:, :k]  # (Q, k)
    return cand[order], np.take_along_axis(S, order, axis=1)


def neighbours(C: np.ndarray, vocab, words, k: int = 5, metric: str = "cosine") -> dict[str, list[tuple[str, float]]]:
    """word -> [(neighbour, score), ...] for each word in ``words`` (strings in ``vocab``)."""
    missing = [w for w in words if w not in vocab.index]
    if missing:
        raise UserError(f"not in the vocabulary: {', '.join(missing)}")
    ids, scores = nearest_neighbours(C, [vocab.index[w] for w in words], k, metric)
    return {w: [(vocab.words[j], float(s)) for j, s in zip(row, srow)]
            for w, row, srow in zip(words, ids, scores)}


# --------------------------------------------------------------------------- class separation
def class_labels(vocab, classes: dict[str, str]) -> np.ndarray:
    """One label per id of ``vocab`` (an object array): the word's class, or None if it has none."""
    return np.array([classes.get(w) for w in vocab.words], dtype=object)


def class_agreement(C: np.ndarray, labels, metric: str = "cosine") -> float:
    """Fraction of labelled words whose nearest labelled neighbour has the same label.

    ``labels``: one label per row of C; rows labelled None take no part (neither as query nor as
    neighbour). 1.0: every word sits next to a word of its own class. Chance level is about
    sum_c (n_c / N) (n_c - 1) / (N - 1) for classes of n_c words.
    """
    lab = np.asarray(labels, dtype=object)
    if len(lab) != len(C):
        raise UserError(f"{len(lab)} labels for {len(C)} rows of C")
    keep = np.flatnonzero(lab != None)  # noqa: E711 (elementwise)
    if len(keep) < 2:
        raise UserError("class agreement needs at least two labelled words")
    S = similarity(np.asarray(C)[keep], metric)  # (L, L)
    np.fill_diagonal(S, -np.inf)  # not its own neighbour
    nn = np.argmax(S, axis=1)  # (L,) first maximum: ties go to the smaller id
    return float(np.mean(lab[keep] == lab[keep][nn]))


def chance_agreement(labels) -> float:
    """Expected class agreement of a random table: sum_c (n_c / N) (n_c - 1) / (N - 1)."""
    lab = np.asarray(labels, dtype=object)
    lab = lab[lab != None]  # noqa: E711
    _, n = np.unique(lab.astype(str), return_counts=True)
    N = n.sum()
    return float(np.sum(n / N * (n - 1) / (N - 1)))


# --------------------------------------------------------------------------- snapshots
class Snapshots:
    """Records copies of the feature table C during training; use it as ``train``'s callback.

    >>> snaps = Snapshots(rows=[0, 2])
    >>> class Fake: params = {"C": np.arange(6.0).reshape(3, 2)}
    >>> snaps(0, Fake)            # the initial table, before any update
    >>> snaps.steps, snaps.C.shape
    ([0], (1, 2, 2))

    With ``train(model, corpus, config, callback=snaps, callback_every=50)`` it records after
    every 50 updates; ``every`` records only steps that are multiples of it (default: every call).
    ``rows``: ids of the rows to keep (default all); ``C`` stacks the copies into (S, rows, m).
    """

    def __init__(self, rows=None, every: int = 1):
        if every < 1:
            raise UserError(f"every must be at least 1, got {every}")
        self.rows = None if rows is None else np.asarray(rows, dtype=np.int64)
        self.every = every
        self.steps: list[int] = []
        self._tables: list[np.ndarray] = []

    def __call__(self, step: int, model) -> None:
        if step % self.every:
            return
        C = model.params["C"]
        self.steps.append(int(step))
        self._tables.append(C.copy() if self.rows is None else C[self.rows].copy())

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, i: int) -> tuple[int, np.ndarray]:
        return self.steps[i], self._tables[i]

    @property
    def C(self) -> np.ndarray:
        """All snapshots stacked: (S, rows, m)."""
        return np.stack(self._tables)

    def agreement(self, labels, metric: str = "cosine") -> np.ndarray:
        """:func:`class_agreement` of every snapshot (S,); ``labels`` per recorded row."""
        return np.array([class_agreement(T, labels, metric) for T in self._tables])

    def save(self, path) -> None:
        """Write the steps and tables to an .npz file (plain arrays: loads with allow_pickle=False)."""
        np.savez_compressed(path, steps=np.array(self.steps), C=self.C,
                            rows=np.array([]) if self.rows is None else self.rows, every=self.every)

    @classmethod
    def load(cls, path) -> "Snapshots":
        """Read what :meth:`save` wrote."""
        with np.load(path, allow_pickle=False) as z:
            s = cls(rows=z["rows"] if len(z["rows"]) else None, every=int(z["every"]))
            s.steps = [int(t) for t in z["steps"]]
            s._tables = list(z["C"])
        return s


# --------------------------------------------------------------------------- plots
def _axes(ax, figsize=(5, 5)):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def class_colours(labels) -> dict:
    """A fixed colour per class (tab20, in order of first appearance)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    seen = [c for c in dict.fromkeys(labels) if c is not None]
    return {c: cmap(i % 20) for i, c in enumerate(seen)}


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


# --------------------------------------------------------------------------- labels without pile-ups
def spread_labels(xy, widths, height: float, bounds, gap: float = 2.0, point: float = 4.0) -> np.ndarray:
    """Where to write the label of each point so that no two labels overlap and none covers a point.

    In pixels: ``xy`` (N, 2) the points, ``widths`` (N,) and ``height`` the size of each label's box,
    ``bounds`` (x0, y0, x1, y1) the area the labels must stay in, ``point`` the radius of a point.
    Each label takes the nearest free spot on rings of growing radius around its point (the most
    crowded points choose first); when no spot is free, the one it overlaps least. Returns (N, 2)
    the centres of the label boxes.

    >>> c = spread_labels(np.array([[50., 50.], [52., 50.]]), np.array([30., 30.]), 10, (0, 0, 200, 100))
    >>> bool(abs(c[0, 1] - c[1, 1]) >= 10 or abs(c[0, 0] - c[1, 0]) >= 30)  # the boxes do not overlap
    True
    """
    xy = np.asarray(xy, dtype=np.float64)
    w = np.asarray(widths, dtype=np.float64)
    x0, y0, x1, y1 = bounds
    N = len(xy)
    dots = np.hstack([xy - point, xy + point])  # (N, 4) a square around each point
    angles = np.deg2rad([0, 45, -45, 90, -90, 135, -135, 180, 22.5, -22.5, 157.5, -157.5, 67.5, -67.5, 112.5, -112.5])
    rings = [(0.0, 8), (8.0, 8), (16.0, 16), (28.0, 16), (42.0, 16), (60.0, 16), (85.0, 16)]
    d2 = np.sum((xy[:, None, :] - xy[None, :, :]) ** 2, axis=-1)  # (N, N)
    order = np.argsort(-np.sum(d2 < (3 * height) ** 2, axis=1), kind="stable")  # crowded first
    placed = np.empty((0, 4))
    centres = np.zeros((N, 2))
    for i in order:
        cand = []
        for r, n_dir in rings:
            a = angles[:n_dir]
            reach = gap + point + r
            cand.append(np.stack([xy[i, 0] + np.cos(a) * (w[i] / 2 + reach),
                                  xy[i, 1] - np.sin(a) * (height / 2 + reach)], axis=1))
        c = np.concatenate(cand)  # (M, 2) candidate centres, nearest first
        boxes = np.hstack([c - [w[i] / 2, height / 2], c + [w[i] / 2, height / 2]])  # (M, 4)
        others = np.vstack([placed, np.delete(dots, i, axis=0)])  # (K, 4)
        ix = np.clip(np.minimum(boxes[:, None, 2], others[None, :, 2]) - np.maximum(boxes[:, None, 0], others[None, :, 0]), 0, None)
        iy = np.clip(np.minimum(boxes[:, None, 3], others[None, :, 3]) - np.maximum(boxes[:, None, 1], others[None, :, 1]), 0, None)
        outside = (np.clip(x0 - boxes[:, 0], 0, None) + np.clip(boxes[:, 2] - x1, 0, None)
                   + np.clip(y0 - boxes[:, 1], 0, None) + np.clip(boxes[:, 3] - y1, 0, None))
        cost = np.sum(ix * iy, axis=1) + 50 * outside * height  # (M,)
        best = int(np.argmax(cost == 0)) if np.any(cost == 0) else int(np.argmin(cost + 1e-3 * np.arange(len(c))))
        centres[i] = c[best]
        placed = np.vstack([placed, boxes[best]])
    return centres


def annotate_words(ax, xy, words, fontsize: float = 10, colour="0.1"):
    """Write each word beside its point on a matplotlib Axes without pile-ups (:func:`spread_labels`);
    a thin grey line joins a label to its point when it had to move away. Call it once the axes'
    limits are final (it freezes them). Returns the Text objects."""
    xy = np.asarray(xy, dtype=np.float64)
    ax.set_xlim(ax.get_xlim())
    ax.set_ylim(ax.get_ylim())
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    px = ax.transData.transform(xy)  # (N, 2) display pixels, y up
    texts = [ax.text(x, y, w, fontsize=fontsize, color=colour, ha="center", va="center", zorder=3)
             for (x, y), w in zip(xy, words)]
    ext = [t.get_window_extent(renderer) for t in texts]
    point = 0.5 * np.sqrt(20) * fig.dpi / 72  # a scatter point of size 20, in pixels
    centres = spread_labels(px, [e.width + 2 for e in ext], max(e.height for e in ext), ax.bbox.extents,
                            point=point)
    inv = ax.transData.inverted()
    for t, e, c, p in zip(texts, ext, centres, px):
        t.set_position(inv.transform(c))
        edge = np.clip(p, c - [e.width / 2, e.height / 2], c + [e.width / 2, e.height / 2])  # nearest point of the box
        if np.hypot(*(edge - p)) > point + 6:
            ax.plot(*inv.transform(np.array([p, edge])).T, color="0.55", lw=0.6, zorder=1)
    return texts


# --------------------------------------------------------------------------- the explorer
_EXPLORERS = itertools.count()
_FONT = 13  # px: the explorer's word labels, legend and axis text


def _hex(rgba) -> str:
    return "#" + "".join(f"{round(255 * v):02x}" for v in rgba[:3])


def _ticks(lo: float, hi: float) -> np.ndarray:
    from matplotlib.ticker import MaxNLocator

    t = MaxNLocator(5).tick_values(lo, hi)
    return t[(t >= lo) & (t <= hi)]


def _explorer_frame(step: int, C: np.ndarray, words, colours, k: int, metric: str, uid: str,
                    size=(540, 450)) -> str:
    """One moment of training as an SVG: points, their words (no pile-ups), axes, and for every word
    the lines to its k nearest neighbours, hidden until the word is chosen (see _explorer_css).
    Single quotes and short class names keep the many frames small in the saved widget state."""
    W, H = size
    left, right, top, bottom = 56, 8, 34, 46
    xy = project(C)  # (N, 2)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    pad = 0.06 * (hi - lo) + 1e-9
    lo, hi = lo - pad, hi + pad
    sx = lambda x: left + (x - lo[0]) / (hi[0] - lo[0]) * (W - left - right)  # noqa: E731
    sy = lambda y: top + (hi[1] - y) / (hi[1] - lo[1]) * (H - top - bottom)  # noqa: E731
    P = np.round(np.stack([sx(xy[:, 0]), sy(xy[:, 1])], axis=1)).astype(int)  # (N, 2) whole pixels, y down
    nn, _ = nearest_neighbours(C, np.arange(len(words)), k, metric)  # (N, k)
    near = [[] for _ in words]  # near[i]: the words i is a neighbour of
    for j, row in enumerate(nn):
        for i in row:
            near[i].append(j)
    widths = np.array([0.6 * _FONT * len(w) + 4 for w in words])
    L = np.round(spread_labels(P, widths, _FONT + 2, (left, top, W - right, H - bottom))).astype(int)
    out = [f"<rect x='{left}' y='{top}' width='{W - left - right}' height='{H - top - bottom}' class='ax'/>"]
    for t in _ticks(lo[0], hi[0]):
        x = round(sx(t))
        out.append(f"<path d='M{x} {H - bottom}v5' class='ax'/><text x='{x}' y='{H - bottom + 19}' class='c'>{t:g}</text>")
    for t in _ticks(lo[1], hi[1]):
        y = round(sy(t))
        out.append(f"<path d='M{left - 5} {y}h5' class='ax'/><text x='{left - 8}' y='{y}' class='r'>{t:g}</text>")
    names = ("feature 1", "feature 2") if C.shape[1] == 2 else ("principal component 1", "principal component 2")
    out.append(f"<text x='{(left + W - right) // 2}' y='{H - 6}' class='c'>{names[0]}</text>"
               f"<text transform='translate(14 {(top + H - bottom) // 2}) rotate(-90)' class='c'>{names[1]}</text>"
               f"<text x='{left}' y='{top - 12}' class='h'>after {step:,} updates</text>")
    for j, row in enumerate(nn):
        out.append(f"<path class='hl w{j}' d='" + "".join(f"M{P[j, 0]} {P[j, 1]}L{P[i, 0]} {P[i, 1]}" for i in row) + "'/>")
    for i in range(len(words)):
        edge = np.clip(P[i], L[i] - [widths[i] / 2, (_FONT + 2) / 2], L[i] + [widths[i] / 2, (_FONT + 2) / 2])
        if np.hypot(*(edge - P[i])) > 10:
            out.append(f"<path d='M{P[i, 0]} {P[i, 1]}L{edge[0]:.0f} {edge[1]:.0f}' class='ld'/>")
    for i, w in enumerate(words):
        cls = " ".join([f"w{i}"] + [f"n{j}" for j in near[i]])
        out.append(f"<circle class='{cls} k{colours[i]}' cx='{P[i, 0]}' cy='{P[i, 1]}' r='4.5'/>")
    for i, w in enumerate(words):
        cls = " ".join([f"w{i}"] + [f"n{j}" for j in near[i]])
        out.append(f"<text class='t {cls}' x='{L[i, 0]}' y='{L[i, 1]}'>{html.escape(w, quote=False)}</text>")
    return (f"<div class='{uid}'><svg viewBox='0 0 {W} {H}' width='{W}' height='{H}' role='img' "
            f"aria-label='the words after {step:,} updates'>{''.join(out)}</svg></div>")


def _explorer_css(uid: str, palette: list[str]) -> str:
    """The frames' look, shared by all of them (colours by class, text, axes, hidden lines)."""
    u = f".{uid}"
    return ("<style>"
            f"{u} svg{{max-width:100%;height:auto;background:#fff;font:{_FONT}px sans-serif;fill:#222}}"
            f"{u} .ax{{fill:none;stroke:#888}}{u} .ld{{stroke:#aaa}}{u} .hl{{display:none;stroke:#222;stroke-width:1.3}}"
            f"{u} .c,{u} .t{{text-anchor:middle}}{u} .r{{text-anchor:end}}{u} .r,{u} .t{{dominant-baseline:central}}"
            f"{u} .h{{font-size:{_FONT + 2}px;font-weight:bold}}"
            + "".join(f"{u} .k{c}{{fill:{hexa}}}" for c, hexa in enumerate(palette))
            + "</style>")


def _explorer_style(uid: str, j: int | None) -> str:
    """The CSS that highlights word j (None: no word) and its neighbours in every frame."""
    if j is None:
        return "<style></style>"
    u = f".{uid}"
    return ("<style>"
            f"{u} .hl.w{j}{{display:inline}}"
            f"{u} circle.w{j}{{stroke:crimson;stroke-width:6px}}"
            f"{u} circle.n{j}{{stroke:#111;stroke-width:3px}}"
            f"{u} text.w{j}{{fill:crimson;font-weight:bold}}"
            f"{u} text.n{j}{{font-weight:bold}}"
            f"{u} circle:not(.w{j}):not(.n{j}),{u} text.t:not(.w{j}):not(.n{j}){{opacity:.5}}"
            "</style>")


def _frame_indices(n: int, frames: int) -> list[int]:
    """Which of n snapshots to draw: all when n <= frames, else the first frames // 2 and then
    further and further apart (training moves fastest at the start), the last one always."""
    if n <= frames:
        return list(range(n))
    head = frames // 2
    tail = np.round(np.geomspace(head, n - 1, frames - head)).astype(int)
    return sorted(set(range(head)) | set(tail.tolist()))


def explorer(snaps: Snapshots, words, labels=None, k: int = 5, metric: str = "cosine", start: str | None = None,
             frames: int = 40):
    """An ipywidgets explorer of the m = 2 features during training (paper, section 5: "so that the
    learned representation can be displayed"): a slider over the snapshots moves the points; a word
    picker highlights a word and its k nearest neighbours (in the full table of that snapshot).

    It needs no kernel once drawn, so it also works in the rendered book: every frame (at most
    ``frames`` snapshots: all the early ones, then further apart) is drawn here as SVG, with every
    word's neighbour lines hidden in it; ipywidgets' ``jslink``, which runs in the browser, ties the
    slider to a Stack of the frames and the picker to a Stack of style sheets, one per word, that
    show that word's lines. Returns the widget: VBox([HBox([slider, picker]), HBox([frames,
    legend]), styles]); display it as a cell's last expression."""
    import ipywidgets as widgets

    if len(snaps) == 0:
        raise UserError("no snapshots recorded")
    if frames < 2:
        raise UserError(f"frames must be at least 2, got {frames}")
    words = list(words)
    if len(words) != len(snaps[0][1]):
        raise UserError(f"{len(words)} words for {len(snaps[0][1])} rows in each snapshot")
    table = class_colours(labels) if labels is not None else {}
    palette = [_hex(rgba) for rgba in table.values()] + ["#999999" if labels is not None else "#1f77b4"]
    slot = {c: n for n, c in enumerate(table)}
    colours = [slot.get(c, len(table)) for c in labels] if labels is not None else [0] * len(words)
    which = _frame_indices(len(snaps), frames)
    uid = f"nplmx{next(_EXPLORERS)}-{zlib.crc32(repr((words, snaps.steps)).encode()):08x}"  # CSS scope
    first = widgets.HTML()
    layout, style = first.layout, first.style  # one of each, shared by every frame: a smaller saved state
    html_widget = lambda value: widgets.HTML(value, layout=layout, style=style)  # noqa: E731
    pictures = widgets.Stack([html_widget(_explorer_frame(*snaps[i], words, colours, k, metric, uid)) for i in which],
                             selected_index=len(which) - 1)
    styles = widgets.Stack([html_widget(_explorer_style(uid, j)) for j in [None, *range(len(words))]])
    legend = "".join(f"<div><span style='display:inline-block;width:11px;height:11px;border-radius:50%;"
                     f"background:{_hex(rgba)};margin-right:6px'></span>{html.escape(str(c))}</div>"
                     for c, rgba in table.items())
    legend = widgets.HTML(_explorer_css(uid, palette) +
                          f"<div style='font-size:{_FONT}px;line-height:1.55;padding-top:34px'>{legend}</div>")
    slider = widgets.IntSlider(value=len(which) - 1, min=0, max=len(which) - 1, step=1, description="training",
                               readout=False, continuous_update=True)
    picker = widgets.Dropdown(options=["(none)"] + words, value=start if start in words else "(none)",
                              description="word")
    styles.selected_index = picker.index
    box = widgets.VBox([widgets.HBox([slider, picker]), widgets.HBox([pictures, legend]), styles])
    box.links = (widgets.jslink((slider, "value"), (pictures, "selected_index")),
                 widgets.jslink((picker, "index"), (styles, "selected_index")))
    return box
