"""What a chapter shows of a comparison made by one protocol (the output layers' results file): a table of
every method and a figure of validation perplexity against training time.

The file holds one row per method and seed (``runs``, with each epoch's validation perplexity and
seconds), a summary per method (``summary``: mean ± std over the seeds, the speed-up per update, the
time to quality) and the reference the times are measured against (``reference``: the full
softmax's best validation perplexity, mean over its seeds). Both functions take the file as it
stands: a method not trained yet is left out, a method with fewer seeds shows the seeds it has, and
before the reference's rows exist the times to quality are shown as a dash.

    doc = read_comparison("data/results/output_layers.json")
    show_comparison_table(doc)           # method, lr, epochs, valid, test, speed-up, time to 5% and 1%
    plot_comparison(doc)                 # valid perplexity against CPU seconds, mean and spread of the seeds
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .report import show_table

HEAD = [["method", "lr", "epochs", "valid", "test", "x full", "to 5%", "to 1%"]]


def read_comparison(path) -> dict:
    """The results document at ``path`` (or ``path`` itself if it is one already)."""
    return path if isinstance(path, dict) else json.loads(Path(path).read_text(encoding="utf-8"))


def pm(stat: dict | None, digits: int = 1) -> str:
    """'251.3 ± 2.1' from a mean_std dict (the mean alone for one seed; '' for none).

    >>> pm({"mean": 251.34, "std": 2.06, "n": 3}), pm({"mean": 251.34, "std": None, "n": 1})
    ('251.3 ± 2.1', '251.3')
    """
    if not stat or stat.get("mean") is None:
        return ""
    mean = f"{stat['mean']:,.{digits}f}"
    return mean if stat.get("std") is None else f"{mean} ± {stat['std']:,.{digits}f}"


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
    seeds = "" if q["reached"] == q["seeds"] else f" ({q['reached']}/{q['seeds']})"
    return f"{q[clock]['mean']:,.0f} s{seeds}"


def comparison_rows(doc: dict, clock: str = "cpu_seconds") -> list[list[str]]:
    """One row of text cells per method in the file (:data:`HEAD`): the chosen learning rate, each seed's
    epochs, validation and test perplexity (mean ± std over the seeds), the speed-up per update over the
    full softmax (mean over the seeds), and the ``clock`` seconds to come within 5% and 1% of the
    reference."""
    rows = []
    for name, s in doc.get("summary", {}).items():
        quality = s.get("time_to_quality") or [None, None]
        speed = s.get("speedup_vs_full")
        rows.append([name, f"{s['lr']:g}", ", ".join(map(str, s["epochs"])), pm(s["valid_ppl"]), pm(s["test_ppl"]),
                     f"x{speed['mean']:.2f}" if speed and speed.get("mean") is not None else "-",
                     *(time_cell(q, clock) for q in quality[:2])])
    return rows


def comparison_caption(doc: dict) -> str:
    """What the table's numbers are, from the file: the corpus, the seeds, the reference."""
    ref = doc.get("reference")
    where = (f"the full softmax's best validation perplexity, {ref['best_valid_ppl']['mean']:.1f} (mean of "
             f"{len(ref['seeds'])} seeds)" if ref else "the full softmax's best validation perplexity (not in the file yet)")
    return (f"{doc.get('corpus', '')} (|V| = {doc.get('V', 0):,}): mean ± standard deviation over the seeds; "
            f"x full: training examples per CPU second of updates over the full softmax's; to 5% and 1%: CPU "
            f"seconds of training (validation included) to come within 5% and 1% of {where}")


def show_comparison_table(doc, clock: str = "cpu_seconds") -> None:
    """Display :func:`comparison_rows` as an HTML table (:func:`~nplm_edu.analysis.report.show_table`)."""
    doc = read_comparison(doc)
    show_table(comparison_rows(doc, clock), HEAD, comparison_caption(doc))


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
    ax.set_xlabel("CPU seconds of training" if clock == "cpu_seconds" else "seconds of training", fontsize=9)
    ax.set_ylabel("validation perplexity", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    return ax
