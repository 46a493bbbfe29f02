"""Figure 1 of the paper, drawn with matplotlib: the network's architecture with the book's shapes.

From the bottom up: the indices of the n-1 context words; a look-up in the one table C (|V| x m,
the same parameters for every position) giving x = (C(w_{t-1}), ..., C(w_{t-n+1})) of length
(n-1)m; the hidden layer a = tanh(d + H x) of h units; the output y = b + W x + U a of |V| units
and its softmax, P(w_t = i | context). The direct connections W (optional) are dashed, as in the
paper. :func:`draw_architecture` returns the figure; at its default size it is 7 inches wide, 700
pixels at 100 dpi, the width of the book's column.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

INK, FILL, SHARED, DIRECT = "#222222", "#eef3fa", "#c0392b", "#1f6fb4"


def _box(ax, x, y, w, h, text, fill=FILL, size=10, edge=INK, style="round,pad=0.02,rounding_size=0.08", **kw):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle=style, fc=fill, ec=edge, lw=1.2, **kw))
    ax.text(x, y, text, ha="center", va="center", fontsize=size, color=INK)


def _arrow(ax, a, b, dashed=False, color=INK, rad=0.0, lw=1.1):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=11, lw=lw, color=color,
                                 linestyle=(0, (4, 3)) if dashed else "-", connectionstyle=f"arc3,rad={rad}",
                                 shrinkA=0, shrinkB=0))


def draw_architecture(n: int = 4, direct: bool = True, figsize=(5.1, 4.6), ax=None):
    """Draw the architecture for a context of n-1 words (3 drawn columns when n > 4, with dots).

    Returns the matplotlib Figure. ``direct``: draw the direct connections W x (dashed). The default
    size, 510 px wide at 100 dpi, keeps its 9 to 11 pt text readable in a phone's column."""
    if n < 2:
        raise ValueError("n must be at least 2 (one context word)")
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize)
    else:
        fig = ax.figure
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.99)
    ax.set_xlim(-0.1, 10.4)
    ax.set_ylim(0, 7.8)
    ax.axis("off")
    # the context columns, oldest word on the left (as in the paper's figure)
    names = [f"$w_{{t-{k}}}$" if k > 1 else "$w_{t-1}$" for k in range(n - 1, 0, -1)]
    if n - 1 > 3:
        names = ["$w_{t-n+1}$", "...", "$w_{t-1}$"]
    mid = 5.0
    xs = [mid - 2.3, mid, mid + 2.3][:len(names)] if len(names) > 1 else [mid]
    if len(names) == 2:
        xs = [mid - 1.3, mid + 1.3]
    y_idx, y_C, y_hid, y_out = 0.5, 2.35, 4.55, 6.8

    # the look-up table C, shared by every position: one band around the feature boxes
    left, right = min(xs[0], mid - 2.3) - 1.05, max(xs[-1], mid + 2.3) + 1.05
    ax.add_patch(FancyBboxPatch((left, y_C - 0.6), right - left, 1.2, boxstyle="round,pad=0.02,rounding_size=0.1",
                                fc="none", ec=SHARED, lw=1.3, linestyle=(0, (2, 2))))
    ax.text(right + 0.12, y_C, "look-up\nin $C$,\n$|V| \\times m$:\none table\nfor every\nword", ha="left", va="center",
            fontsize=9, color=SHARED)
    for x, name in zip(xs, names):
        if name == "...":
            ax.text(x, y_C, "...", ha="center", va="center", fontsize=14)
            ax.text(x, y_idx, "...", ha="center", va="center", fontsize=14)
            continue
        _box(ax, x, y_idx, 1.9, 0.55, f"index {name}", fill="white", size=9)
        _box(ax, x, y_C, 1.75, 0.75, "$C(" + name.strip("$") + ")$", size=11)
        _arrow(ax, (x, y_idx + 0.28), (x, y_C - 0.38))
    ax.text(left - 0.1, y_C, "$x$:\n$(n-1)m$", ha="right", va="center", fontsize=10)

    # hidden layer and output layer
    hid_w, out_w = 5.4, 7.6
    _box(ax, mid, y_hid, hid_w, 0.95, "$a = \\tanh(d + Hx)$,  $h$ units\n$H$: $h \\times (n-1)m$", size=11)
    _box(ax, mid, y_out, out_w, 0.95, "softmax:  $P(w_t = i \\mid$ context$)$,  $i = 1, \\dots, |V|$\n"
         + ("$y = b + Wx + Ua$" if direct else "$y = b + Ua$") + ",  $|V|$ units", size=11,
         fill="#fbeee6")
    ax.text(mid + out_w / 2, y_out + 0.55, "most of the computation", ha="right", va="bottom", fontsize=9,
            style="italic")
    for x in xs:
        _arrow(ax, (x, y_C + 0.38), (mid + 0.35 * (x - mid), y_hid - 0.48))
    _arrow(ax, (mid, y_hid + 0.48), (mid, y_out - 0.48))
    ax.text(mid + 0.12, (y_hid + y_out) / 2 - 0.05, "$U$: $|V| \\times h$", ha="left", va="center", fontsize=9)
    if direct:  # the direct connections W, dashed, around the hidden layer
        for x, side in ((xs[0], -1), (xs[-1], 1)):
            _arrow(ax, (x + 0.55 * side, y_C + 0.38), (mid + side * (out_w / 2 - 0.5), y_out - 0.48),
                   dashed=True, color=DIRECT)
        ax.text(left - 0.1, y_hid + 0.2, "direct\nconnections\n$W$: $|V| \\times$\n$(n-1)m$\n(optional)",
                ha="right", va="center", fontsize=9, color=DIRECT)
    return fig
