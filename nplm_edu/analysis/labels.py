"""Word labels placed so that they do not pile up, and one colour per word class (for every picture
of the word features: the static plots and the explorer)."""

from __future__ import annotations

import numpy as np


def class_colours(labels) -> dict:
    """A fixed colour per class (tab20, in order of first appearance)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab20"]
    seen = [c for c in dict.fromkeys(labels) if c is not None]
    return {c: cmap(i % 20) for i, c in enumerate(seen)}


def spread_labels(xy, widths, height: float, bounds, gap: float = 2.0, point: float = 4.0) -> np.ndarray:
    """Where to write the label of each point so that no two labels overlap and none covers a point.

    In pixels: ``xy`` (N, 2) the points, ``widths`` (N,) and ``height`` the size of each label's box,
    ``bounds`` (x0, y0, x1, y1) the area the labels must stay in, ``point`` the radius of a point (one
    for all, or (N,) one per point, for points drawn larger than the others).
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
    point = np.broadcast_to(np.asarray(point, dtype=np.float64), (N,))  # (N,)
    dots = np.hstack([xy - point[:, None], xy + point[:, None]])  # (N, 4) a square around each point
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
            reach = gap + point[i] + r
            cand.append(np.stack([xy[i, 0] + np.cos(a) * (w[i] / 2 + reach),
                                  xy[i, 1] - np.sin(a) * (height / 2 + reach)], axis=1))
        c = np.concatenate(cand)  # (M, 2) candidate centres, nearest first
        boxes = np.hstack([c - [w[i] / 2, height / 2], c + [w[i] / 2, height / 2]])  # (M, 4)
        others = np.vstack([placed, dots])  # (K, 4): the labels placed so far and every point, its own too
        ix = np.clip(np.minimum(boxes[:, None, 2], others[None, :, 2]) - np.maximum(boxes[:, None, 0], others[None, :, 0]), 0, None)
        iy = np.clip(np.minimum(boxes[:, None, 3], others[None, :, 3]) - np.maximum(boxes[:, None, 1], others[None, :, 1]), 0, None)
        outside = (np.clip(x0 - boxes[:, 0], 0, None) + np.clip(boxes[:, 2] - x1, 0, None)
                   + np.clip(y0 - boxes[:, 1], 0, None) + np.clip(boxes[:, 3] - y1, 0, None))
        cost = np.sum(ix * iy, axis=1) + 50 * outside * height  # (M,)
        best = int(np.argmax(cost == 0)) if np.any(cost == 0) else int(np.argmin(cost + 1e-3 * np.arange(len(c))))
        centres[i] = c[best]
        placed = np.vstack([placed, boxes[best]])
    return centres


def annotate_words(ax, xy, words, fontsize: float = 10, colour="0.1", sizes=20):
    """Write each word beside its point on a matplotlib Axes without pile-ups (:func:`spread_labels`);
    a thin grey line joins a label to its point when it had to move away. ``sizes``: the points' sizes
    as given to ``scatter`` (one for all, or one per point), so that no label covers a larger marker.
    Call it once the axes' limits are final (it freezes them). Returns the Text objects."""
    xy = np.asarray(xy, dtype=np.float64)
    ax.set_xlim(ax.get_xlim())
    ax.set_ylim(ax.get_ylim())
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    px = ax.transData.transform(xy)  # (N, 2) display pixels, y up
    texts = [ax.text(x, y, w, fontsize=fontsize, color=colour, ha="center", va="center", zorder=3)
             for (x, y), w in zip(xy, words)]
    ext = [t.get_window_extent(renderer) for t in texts]
    point = 0.5 * np.sqrt(np.broadcast_to(np.asarray(sizes, dtype=np.float64), (len(xy),))) * fig.dpi / 72  # (N,) radii, px
    centres = spread_labels(px, [e.width + 2 for e in ext], max(e.height for e in ext), ax.bbox.extents,
                            point=point)
    inv = ax.transData.inverted()
    for t, e, c, p, radius in zip(texts, ext, centres, px, point):
        t.set_position(inv.transform(c))
        edge = np.clip(p, c - [e.width / 2, e.height / 2], c + [e.width / 2, e.height / 2])  # nearest point of the box
        if np.hypot(*(edge - p)) > radius + 6:
            ax.plot(*inv.transform(np.array([p, edge])).T, color="0.55", lw=0.6, zorder=1)
    return texts
