"""Time to quality for the recurrent table: how long each row's seeds took to come within 5% and 1% of a
reference quality, in CPU and wall seconds, beside the CPU seconds of one epoch.

The reference is fixed by rule, as the output-layer comparison fixes the full softmax (the method the
others stand in for): the paper's network trained by the same protocol with the recurrent rows' size
and dropout (``nplm-dropout``, :data:`REFERENCE`), the row every other is an alternative to. Its
quality is the mean over its seeds of each seed's best validation perplexity
(:func:`~nplm_edu.analysis.quality.reference_of`). The times are computed when the results file is
read, from the epochs every seed's row keeps (:func:`~nplm_edu.analysis.quality.times_to_quality`),
and shown with the output-layer comparison's cells (:func:`~nplm_edu.analysis.comparison.time_rows`).

Which clock: a seed's wall seconds count the time its process waited for the processor while other
runs shared it; its CPU seconds count only what it computed. :func:`cpu_share` says how far apart the
two were for the file's seeds, :func:`epoch_cpu_swing` how much one seed's CPU seconds of an epoch
moved from epoch to epoch (the same work each epoch).

    doc = json.loads(Path("data/results/recurrent.json").read_text())
    show_time_table(doc, order=["rnn", "lstm", "gru"])  # the rows named first, the others after
"""

from __future__ import annotations

from .comparison import cpu_per_epoch, time_rows
from .quality import times_to_quality, whole_epoch_cpu
from .recurrent_table import spread
from .report import pm, show_table

REFERENCE = "nplm-dropout"  # the paper's network at the recurrent rows' size and dropout
CLOCKS = ("cpu_seconds", "wall_seconds")  # the table's clocks: CPU seconds first, the one to read
HEAD = [["model", "CPU s / epoch", ("to within 5%", 2), ("to within 1%", 2)],
        ["", "", "CPU s", "wall s", "CPU s", "wall s"]]


def quality_doc(doc: dict, reference: str = REFERENCE, order=None) -> dict:
    """The times to quality of the results file ``doc`` in the shape the comparison's cells read:
    ``reference`` (:func:`~nplm_edu.analysis.quality.reference_of`) and ``summary``, {model:
    {"time_to_quality": [within 5%, within 1%]}}, the models of ``order`` first, then the file's others."""
    ref, times = times_to_quality(doc.get("runs", []), reference, (doc.get("protocol") or {}).get("seeds"))
    models = [m for m in (order or []) if m in times] + [m for m in times if m not in (order or [])]
    return {"reference": ref, "summary": {m: {"time_to_quality": times[m]} for m in models}}


def time_table(doc: dict, reference: str = REFERENCE, order=None) -> tuple[list, list]:
    """(body, :data:`HEAD`): per model, the CPU seconds of one epoch (mean ± std over the seeds,
    :func:`~nplm_edu.analysis.comparison.cpu_per_epoch`), then the CPU and wall seconds to come within
    5% and 1% of the reference (:func:`~nplm_edu.analysis.comparison.time_rows`: mean ± std over the
    seeds that did, '(2/3)' when not all did, 'never' with the best reached)."""
    rows = time_rows(quality_doc(doc, reference, order), CLOCKS)
    return [[name, pm(cpu_per_epoch(doc, name), 0) or "-", *cells] for name, *cells in rows], HEAD


def time_caption(doc: dict, reference: str = REFERENCE) -> str:
    """What :func:`time_table`'s numbers are, the reference's quality read from the file."""
    ref = quality_doc(doc, reference)["reference"]
    quality = f", {ref['best_valid_ppl']['mean']:.1f}" if ref else " (not in the file yet)"
    return (f"Seconds of training (whole epochs, the validation included) until a seed's validation perplexity "
            f"first came within 5% and 1% of {reference}'s mean best validation perplexity{quality}: mean ± "
            "standard deviation over the seeds that came within it; CPU s / epoch: mean ± standard deviation "
            "over the seeds")


def show_time_table(doc: dict, reference: str = REFERENCE, order=None) -> None:
    """Display :func:`time_table` with :func:`time_caption`."""
    body, head = time_table(doc, reference, order)
    show_table(body, head, time_caption(doc, reference))


def cpu_share(doc: dict) -> dict:
    """:func:`~nplm_edu.analysis.recurrent_table.spread` over the file's seeds of each one's CPU seconds of
    training over its wall seconds: 1 for a process that never waited.

    >>> cpu_share({"runs": [{"cpu_seconds_training": 40.0, "wall_seconds_training": 100.0},
    ...                     {"cpu_seconds_training": 90.0, "wall_seconds_training": 100.0}]})["min"]
    0.4
    """
    return spread(r["cpu_seconds_training"] / r["wall_seconds_training"] for r in doc.get("runs", [])
                  if r.get("cpu_seconds_training") and r.get("wall_seconds_training"))


def epoch_cpu_swing(doc: dict) -> float | None:
    """The largest ratio, over the file's seeds, of a seed's dearest epoch to its cheapest in CPU seconds,
    minus one: how much the CPU seconds of the same work moved (None: no epoch timed). Only epochs timed
    whole (:func:`~nplm_edu.analysis.quality.whole_epoch_cpu`)."""
    swings = [max(c) / min(c) - 1 for r in doc.get("runs", []) if (c := whole_epoch_cpu(r.get("history", [])))]
    return max(swings, default=None)
