"""What a chapter shows of a comparison made by one protocol (the output layers' results file): a table of
every method and a figure of validation perplexity against training time.

The file holds one row per method and seed (``runs``, with each epoch's validation perplexity and
seconds), a summary per method (``summary``: mean ± std over the seeds, the speed-up per update, the
time to quality) and the reference the times are measured against (``reference``: the full
softmax's best validation perplexity, mean over its seeds). Both functions take the file as it
stands: a method not trained yet is left out, a method with fewer seeds shows the seeds it has, and
before the reference's rows exist the times to quality are shown as a dash.

    doc = read_comparison("data/results/output_layers.json")
    show_comparison_table(doc)   # method, lr, epochs, valid, test, CPU s an epoch, speed-up, time to 5% and 1%
    show_grid_table(doc)         # each learning rate of the grid: validation perplexity after its epochs
    plot_comparison(doc)         # valid perplexity against CPU seconds, mean and spread of the seeds
    outcome_sentences(doc)       # what the table shows, in words computed from it

Whether two methods differ beyond what the seeds alone could give is decided by one rule, the
recurrent table's (:func:`~nplm_edu.analysis.recurrent_table.differences`): their seeds' ranges
overlap or not.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .quality import whole_epoch_cpu
from .recurrent_table import difference, differences, judged, neighbours_text, runs_by_model, spread, verdict
from .report import listed, pm, show_table

HEAD = [["method", "lr", "epochs", "valid", "test", "CPU s / epoch", "x full", "to 5%", "to 1%"]]
EDGES = {"top": "the top of the grid", "bottom": "the bottom of the grid"}


def read_comparison(path) -> dict:
    """The results document at ``path`` (or ``path`` itself if it is one already)."""
    return path if isinstance(path, dict) else json.loads(Path(path).read_text(encoding="utf-8"))


def time_cell(q: dict | None, clock: str = "cpu_seconds") -> str:
    """The time to one quality: '1,234 s' (mean over the seeds that reached it), with '(2/3)' when not every
    seed did, 'never (262.1)' with the best reached, '-' before there is a reference.

    >>> time_cell({"reached": 2, "seeds": 3, "cpu_seconds": {"mean": 1234.4}, "best_valid_ppl": {"mean": 250.0}})
    '1,234 s (2/3)'
    >>> time_cell({"reached": 0, "seeds": 3, "cpu_seconds": {"mean": None}, "best_valid_ppl": {"mean": 262.14}})
    'never (262.1)'
    """
    if q is None:
        return "-"
    if not q["reached"]:
        return f"never ({q['best_valid_ppl']['mean']:.1f})"
    return f"{q[clock]['mean']:,.0f} s{seeds_note(q)}"


def never_text(q: dict) -> str:
    """'never within 5% or 1% (best 262.1)': no seed within 5% (so none within 1%), and the best reached."""
    return f"never within 5% or 1% (best {q['best_valid_ppl']['mean']:.1f})"


def seeds_note(q: dict) -> str:
    """' (2/3)' when not every seed came within the quality ``q``, else ''."""
    return "" if q["reached"] == q["seeds"] else f" ({q['reached']}/{q['seeds']})"


def time_rows(doc: dict, clocks=("cpu_seconds", "wall_seconds")) -> list[list]:
    """One row per method of the times to 5% and to 1% of the reference, on each of ``clocks``: mean ± std
    in seconds over the seeds that came within it (the mean alone when one seed did; '(2/3)' when not all
    did). A quality no seed reached is one cell across its clocks' columns, 'never (best 262.1)'; a method
    that reached neither says so once, across all the columns (1% is the stricter, so never within 5%
    means never within 1%). Cells are :func:`~nplm_edu.analysis.report.table_html`'s: text, or (text, span).

    >>> q = {"reached": 2, "seeds": 3, "cpu_seconds": {"mean": 1234.4, "std": 10.2}, "best_valid_ppl": {"mean": 250.0}}
    >>> time_rows({"summary": {"a": {"time_to_quality": [q, {**q, "reached": 0}]}}}, ("cpu_seconds",))
    [['a', '1,234 ± 10 s (2/3)', ('never (best 250.0)', 1)]]
    """
    rows = []
    for name, s in doc.get("summary", {}).items():
        cells = []
        for q in (s.get("time_to_quality") or [None, None])[:2]:
            if q is None:
                cells += ["-"] * len(clocks)
            elif not q["reached"]:
                cells.append((f"never (best {q['best_valid_ppl']['mean']:.1f})", len(clocks)))
            else:
                cells += [f"{pm(q[clock], 0)} s{seeds_note(q)}" for clock in clocks]
        if len(cells) == 2 and all(isinstance(c, tuple) for c in cells):
            cells = [(never_text(q), 2 * len(clocks))]
        rows.append([name, *cells])
    return rows


def grid_edge(doc: dict, lr: float) -> str | None:
    """"top" or "bottom" when ``lr`` is the largest or smallest value of the protocol's grid, else None: a
    choice at the edge says a value beyond the grid might have done better.

    >>> grid_edge({"protocol": {"lrs": [0.3, 1.0, 3.0]}}, 3.0), grid_edge({"protocol": {"lrs": [0.3, 1.0, 3.0]}}, 1.0)
    ('top', None)
    """
    lrs = doc.get("protocol", {}).get("lrs") or []
    if len(lrs) < 2 or lr is None:
        return None
    return "top" if lr == max(lrs) else "bottom" if lr == min(lrs) else None


def lr_cell(doc: dict, lr: float) -> str:
    """The chosen learning rate, marked when it sits at an edge of the grid: '3 (top)'."""
    edge = grid_edge(doc, lr)
    return f"{lr:g}" + (f" ({edge})" if edge else "")


def epoch_cpu_seconds(history: list[dict]) -> float | None:
    """The mean CPU seconds of one whole epoch (updates and the validation perplexity) over a run's epochs,
    leaving out an epoch timed only in part (:func:`~nplm_edu.analysis.quality.whole_epoch_cpu`)."""
    whole = whole_epoch_cpu(history)
    return float(np.mean(whole)) if whole else None


def runs_of(doc: dict, method: str) -> list[dict]:
    """The seed rows of ``method``, by seed (:func:`~nplm_edu.analysis.recurrent_table.runs_by_model`)."""
    return runs_by_model(doc).get(method, [])


def cpu_per_epoch(doc: dict, method: str) -> dict:
    """Mean ± std over the seeds of :func:`epoch_cpu_seconds` (the recurrent table's
    :func:`~nplm_edu.analysis.recurrent_table.spread`)."""
    return spread(epoch_cpu_seconds(r["history"]) for r in runs_of(doc, method))


def comparison_rows(doc: dict, clock: str = "cpu_seconds", span: bool = False) -> list[list]:
    """One row of text cells per method in the file (:data:`HEAD`): the chosen learning rate (marked at an
    edge of the grid), each seed's epochs, validation and test perplexity (mean ± std over the seeds),
    the CPU seconds of an epoch, the speed-up per update over the full softmax (mean over the seeds),
    and the ``clock`` seconds to come within 5% and 1% of the reference. With ``span``, a method that
    came within neither says so once across both columns (a (text, 2) cell of
    :func:`~nplm_edu.analysis.report.table_html`)."""
    rows = []
    for name, s in doc.get("summary", {}).items():
        quality = s.get("time_to_quality") or [None, None]
        speed = s.get("speedup_vs_full")
        rows.append([name, lr_cell(doc, s["lr"]), ", ".join(map(str, s["epochs"])), pm(s["valid_ppl"]),
                     pm(s["test_ppl"]), pm(cpu_per_epoch(doc, name), 0) or "-",
                     f"x{speed['mean']:.2f}" if speed and speed.get("mean") is not None else "-",
                     *quality_cells(quality, clock, span)])
    return rows


def quality_cells(quality: list, clock: str, span: bool) -> list:
    """:func:`comparison_rows`' two time-to-quality cells, or one across both (``span``, 5% never reached)."""
    if span and quality[0] is not None and not quality[0]["reached"]:
        return [(never_text(quality[0]), 2)]
    return [time_cell(q, clock) for q in quality[:2]]


def grid_rows(doc: dict) -> tuple[list[list[str]], list[list[str]]]:
    """(body, head) of the grid's table: per method, the validation perplexity after the grid's epochs at
    each learning rate of the protocol ('diverged' where the run did), and the value chosen."""
    lrs = doc.get("protocol", {}).get("lrs") or []
    head = [["method", *(f"lr {lr:g}" for lr in lrs), "chosen"]]
    body = []
    for name, g in doc.get("grid", {}).items():
        values = {float(k): v for k, v in g.get("lr_grid", {}).items()}
        cells = [("-" if lr not in values else "diverged" if values[lr] is None else f"{values[lr]:.1f}") for lr in lrs]
        edge = grid_edge(doc, g["chosen_lr"])
        body.append([name, *cells, f"{g['chosen_lr']:g}" + (f", {EDGES[edge]}" if edge else "")])
    return body, head


def show_grid_table(doc, caption: str | None = None) -> None:
    """Display :func:`grid_rows` as an HTML table."""
    doc = read_comparison(doc)
    p = doc.get("protocol", {})
    body, head = grid_rows(doc)
    show_table(body, head, caption or (f"Validation perplexity after {p.get('grid_epochs')} epochs (seed "
                                       f"{(p.get('seeds') or [0])[0]}) at each learning rate of the grid; the lowest "
                                       "is chosen"))


def corpus_words(doc: dict) -> str:
    """The corpus in words: "Brown, a slice of 200,000 training and 50,000 validation tokens"."""
    name, _, part = doc.get("corpus", "").partition("[")
    tokens = doc.get("slice") or {}
    if not (part and tokens.get("train") and tokens.get("valid")):
        return name.capitalize()
    return f"{name.capitalize()}, a slice of {tokens['train']:,} training and {tokens['valid']:,} validation tokens"


def comparison_caption(doc: dict) -> str:
    """What the table's numbers are, from the file: the corpus, the seeds, the reference."""
    ref = doc.get("reference")
    where = (f"the full softmax's best validation perplexity, {ref['best_valid_ppl']['mean']:.1f} (mean of "
             f"{len(ref['seeds'])} seeds)" if ref else "the full softmax's best validation perplexity (not in the file yet)")
    return (f"{corpus_words(doc)} (|V| = {doc.get('V', 0):,}): mean ± standard deviation over the seeds; "
            f"x full: training examples per CPU second of updates over the full softmax's; to 5% and 1%: CPU "
            f"seconds of training (validation included) to come within 5% and 1% of {where}")


def show_comparison_table(doc, clock: str = "cpu_seconds") -> None:
    """Display :func:`comparison_rows` as an HTML table (:func:`~nplm_edu.analysis.report.show_table`)."""
    doc = read_comparison(doc)
    show_table(comparison_rows(doc, clock, span=True), HEAD, comparison_caption(doc))


# --------------------------------------------------------------------------- what the table shows, in words
def against_reference(doc: dict, measure: str = "test_ppl") -> list[dict]:
    """Each method with at least two seeds against the reference method (the full softmax) by the recurrent
    table's rule (:func:`~nplm_edu.analysis.recurrent_table.differences`): the difference of the means
    of ``measure``, its spread, and whether the two methods' seeds overlap (``within_spread``)."""
    ref = doc.get("reference_method", "full")
    pairs = [(m, ref) for m in doc.get("summary", {}) if m != ref]
    return [d for d in differences(doc, pairs, measure) if min(d["seeds"]) >= 2]


def difference_phrase(d: dict, reference_mean: float, what: str = "test perplexity") -> str:
    """One method against the reference in words: '3.1% lower test perplexity than the full softmax's,
    beyond the seeds' spread' (:func:`~nplm_edu.analysis.recurrent_table.verdict`)."""
    rel = d["difference"] / reference_mean
    side = "lower" if rel < 0 else "higher"
    return f"{abs(rel):.1%} {side} {what} than the full softmax's, {verdict(d)}"


def ranking_sentence(doc: dict, measure: str = "test_ppl", what: str = "test perplexity") -> str:
    """The methods whose ``measure`` ended below the full softmax's, within the seeds' spread of it, and
    above it (:func:`against_reference`: two seeds or more on both sides, so the book's one rule,
    :func:`~nplm_edu.analysis.recurrent_table.judged`, always judges)."""
    groups = {"lower": [], "within": [], "higher": []}
    for d in against_reference(doc, measure):
        groups["within" if judged(d) == "within" else "lower" if d["difference"] < 0 else "higher"].append(d["a"])
    heads = {"lower": "lower, beyond the seeds' spread", "higher": "higher, beyond the seeds' spread",
             "within": "within the seeds' spread (the seeds alone could give either order)"}
    parts = [f"{heads[k]}: {listed(v)}" for k, v in groups.items() if v]
    return f"Against the full softmax's {what}, " + "; ".join(parts) + "." if parts else ""


def quality_sentence(doc: dict, index: int = 0, clock: str = "cpu_seconds") -> str:
    """Who came within the ``index``-th quality (5%, then 1%) of the reference's best validation perplexity,
    listed by the mean CPU seconds of its seeds, who came with some seeds only, who never came (with the best
    it reached); and for each two neighbours of that list, whether one is ahead of the other beyond the seeds'
    spread or the two are within it
    (:func:`~nplm_edu.analysis.recurrent_table.neighbours_text`)."""
    ref = doc.get("reference")
    if not ref:
        return ""
    every, some, never = [], [], []
    for name, s in doc.get("summary", {}).items():
        q = (s.get("time_to_quality") or [None, None])[index]
        if q is None:
            continue
        if q["reached"] == q["seeds"]:
            every.append((q[clock]["mean"], name, spread(q[clock]["values"])))
        elif q["reached"]:
            some.append(f"{name} ({q['reached']} of {q['seeds']} seeds)")
        else:
            never.append((q["best_valid_ppl"]["mean"], name))
    pct = (5, 1)[index]
    target = ref["best_valid_ppl"]["mean"] * (1 + pct / 100)
    parts = []
    every.sort()
    if every:
        first = (f"every seed of {listed([f'{n} ({t:,.0f} CPU s)' for t, n, _ in every])} came within {pct}% of the full "
                 f"softmax's best validation perplexity (to {target:.1f} or below)"
                 + (f", listed by mean time: {neighbours_text([(n, s) for _, n, s in every])}" if len(every) > 1 else ""))
        parts.append(first)
    if some:
        parts.append(f"only some seeds of {listed(some)} came within {pct}%")
    if never:
        never.sort()
        parts.append(f"{listed([n for _, n in never])} never came within {pct}% (best "
                     + ", ".join(f"{b:.1f}" for b, _ in never) + ")")
    text = "; ".join(parts) + "."
    return text[0].upper() + text[1:]


def time_verdict(doc: dict, method: str, q: dict) -> str:
    """', the full softmax after 322, a difference within the seeds' spread': ``method``'s time to 5% ``q`` judged
    (:func:`~nplm_edu.analysis.recurrent_table.verdict`); '' for the reference or unless all seeds of both came."""
    ref = doc.get("reference_method", "full")
    r = (doc["summary"].get(ref, {}).get("time_to_quality") or [None])[0]
    if method == ref or r is None or not q["reached"] or q["reached"] < q["seeds"] or r["reached"] < r["seeds"]:
        return ""
    d = difference(spread(q["cpu_seconds"]["values"]), spread(r["cpu_seconds"]["values"]))
    return f", the full softmax after {r['cpu_seconds']['mean']:,.0f}, a difference {verdict(d)}"


def method_sentence(doc: dict, method: str, label: str = "") -> str:
    """One method's row in words, after its name and ``label`` in brackets: its speed-up per update, its
    epochs, its test perplexity against the full softmax's (:func:`difference_phrase`) and its time to come
    within 5%, judged by :func:`time_verdict` ('' for a method not in the file)."""
    s = doc.get("summary", {}).get(method)
    if not s:
        return ""
    ref = doc.get("reference_method", "full")
    speed = s.get("speedup_vs_full") or {}
    parts = [f"{speed['mean']:.1f} times the full softmax's training examples per CPU second of updates"
             if speed.get("mean") is not None else "",
             f"stopped after {', '.join(map(str, s['epochs']))} epochs"]
    d = next((x for x in against_reference(doc) if x["a"] == method), None)
    if d is not None:
        parts.append(difference_phrase(d, doc["summary"][ref]["test_ppl"]["mean"]))
    q = (s.get("time_to_quality") or [None])[0]
    if q is not None and q["reached"]:
        some = "" if q["reached"] == q["seeds"] else f" ({q['reached']} of {q['seeds']} seeds)"
        parts.append(f"within 5% of the full softmax's best validation perplexity after "
                     f"{q['cpu_seconds']['mean']:,.0f} CPU seconds{some}{time_verdict(doc, method, q)}")
    elif q is not None:
        parts.append(f"never within 5% of the full softmax's best validation perplexity (its own best: "
                     f"{q['best_valid_ppl']['mean']:.1f})")
    return f"`{method}`" + (f" ({label})" if label else "") + ": " + "; ".join(p for p in parts if p) + "."


def grid_sentence(doc: dict) -> str:
    """The methods whose learning rate was chosen at an edge of the grid, and what that leaves open."""
    edges = {}
    for name, s in doc.get("summary", {}).items():
        edge = grid_edge(doc, s["lr"])
        if edge:
            edges.setdefault((edge, s["lr"]), []).append(name)
    parts = [f"{listed(names)} chose {lr:g}, {EDGES[edge]}" for (edge, lr), names in sorted(edges.items())]
    if not parts:
        return "Every method chose a learning rate inside the grid."
    return ("; ".join(parts) + ": a rate beyond the grid, not tried, might have done better for "
            + ("it." if sum(map(len, edges.values())) == 1 else "them."))


def outcome_sentences(doc) -> dict[str, str]:
    """The sentences a chapter builds from the file (each '' when the file cannot say it yet): ``grid``,
    ``within_5``, ``within_1``, ``test`` and ``valid``."""
    doc = read_comparison(doc)
    return {"grid": grid_sentence(doc), "within_5": quality_sentence(doc, 0), "within_1": quality_sentence(doc, 1),
            "test": ranking_sentence(doc), "valid": ranking_sentence(doc, "valid_ppl", "validation perplexity")}


# --------------------------------------------------------------------------- the figure
def seed_curve(history: list[dict], clock: str = "cpu_seconds") -> tuple[np.ndarray, np.ndarray]:
    """(seconds of training at the end of each epoch, validation perplexity after it) of one run."""
    epochs = [e for e in history if "valid_ppl" in e]
    return np.cumsum([e.get(clock, 0.0) for e in epochs]), np.array([e["valid_ppl"] for e in epochs])


def method_curve(runs: list[dict], clock: str = "cpu_seconds", points: int = 80):
    """The seeds' curves of one method on a common time axis (log-spaced, from the latest first epoch to
    the earliest end, where every seed has a value): (t, mean, lowest, highest) of validation perplexity,
    interpolated between epochs in log time. One seed: its own epochs."""
    curves = [seed_curve(r["history"], clock) for r in runs]
    curves = [(x, y) for x, y in curves if len(x)]
    if len(curves) == 1:
        x, y = curves[0]
        return x, y, y, y
    lo, hi = max(x[0] for x, _ in curves), min(x[-1] for x, _ in curves)
    t = np.geomspace(lo, max(hi, lo), points)
    ys = np.array([np.interp(np.log(t), np.log(x), y) for x, y in curves])  # (seeds, points)
    return t, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)


def plain_log_ticks(ax) -> None:
    """Label both log axes with plain numbers ('400', '1,000') rather than powers of ten, without minor labels."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    lo, hi = ax.get_ylim()
    steps = [t for t in (200, 250, 300, 350, 400, 450, 500, 600, 700, 800, 1000, 1200, 1500, 2000) if lo <= t <= hi]
    if len(steps) >= 2:
        ax.set_yticks(steps)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())


def plot_comparison(doc, methods=None, ax=None, clock: str = "cpu_seconds", top: float = 2.0):
    """Validation perplexity against training seconds (``clock``: "cpu_seconds" or wall "seconds"), one
    curve per method (the mean of its seeds, a band from the lowest to the highest), log-log, with the
    reference's 5% and 1% lines; ``methods``: those to draw (default every one in the file); the
    perplexity axis stops at ``top`` times the reference. Sized to be read 390 pixels wide."""
    import matplotlib.pyplot as plt

    doc = read_comparison(doc)
    names = [m for m in (methods or doc.get("summary", {})) if any(r["method"] == m for r in doc.get("runs", []))]
    if ax is None:
        _, ax = plt.subplots(figsize=(3.9, 4.4), dpi=100, layout="constrained")
    colors = plt.get_cmap("tab20").colors
    for i, name in enumerate(names):
        t, mean, low, high = method_curve([r for r in doc["runs"] if r["method"] == name], clock)
        color = colors[(2 * i) % 20 if i < 10 else (2 * i + 1) % 20]
        ax.plot(t, mean, color=color, lw=1.4, ls="-" if i < 7 else "--", label=name)
        ax.fill_between(t, low, high, color=color, alpha=0.2, lw=0)
    ref = doc.get("reference")
    if ref:
        best = ref["best_valid_ppl"]["mean"]
        for w, style in ((0.05, ":"), (0.01, "-.")):
            ax.axhline(best * (1 + w), color="0.3", lw=0.8, ls=style)
        ax.set_ylim(best * 0.97, best * top)
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log_ticks(ax)
    ax.set_xlabel("CPU seconds of training" if clock == "cpu_seconds" else "seconds of training", fontsize=9)
    ax.set_ylabel("validation perplexity", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    return ax
