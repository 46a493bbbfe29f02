"""The m = 2 explorer: a slider over training time and a word picker that work in a static page.

Every snapshot is drawn in advance as an SVG picture in an ipywidgets ``Stack``, and ``jslink`` ties
the slider to it; a second ``Stack`` holds one small style sheet per word, tied to the word picker,
that draws that word's lines to its nearest neighbours and dims the rest. The rendered book ships
the widget state, so both controls work without a kernel; in a live kernel it is the same widget.
"""

from __future__ import annotations

import html
import itertools
import zlib

import numpy as np

from ..errors import UserError
from .features import Snapshots, nearest_neighbours, project
from .labels import class_colours, spread_labels


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
