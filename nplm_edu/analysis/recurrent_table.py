"""What a chapter shows of the recurrent table's results file (the rows trained by one protocol over several seeds).

A results file of the recurrent table (``reproduce recurrent``) holds one row per model and seed
(``runs``), each with its learning rate chosen on validation, its epochs, its parameter count, its
validation and test perplexity, and its test perplexity mixed with the Kneser-Ney 5-gram. These
functions read such a file, finished or not (a model with one seed so far shows its one value, no
spread), and give:

- :func:`is_scored`: whether a seed's row has scores (a seed that diverged before its first validation has
  none);
- :func:`without_models`: the file without some models' rows;
- :func:`row_summaries`: per model, mean ± standard deviation over its seeds of each perplexity;
- :func:`differences`: the difference of two models' mean test perplexities, with the seeds' spread,
  and whether the difference is within it (:func:`within_spread`);
- :func:`judged`: the book's one rule for such a difference ("within" or "beyond" the seeds' spread, None
  with no spread to judge by), and :func:`verdict` it in words, which :func:`difference_text` (a table's
  cell) and :func:`compare_text` (a sentence) end with, and :func:`neighbours_text` applies to each two
  neighbours of a list;
- :func:`recurrent_table` / :func:`show_recurrent_table`: both as one HTML table;
- :func:`row_descriptions`: what each model is, as the file says, else as the caller's list says.
"""

from __future__ import annotations

import math

from ..errors import UserError
from .quality import mean_std
from .report import pm, show_table

# the two controls of the recurrent table: what the words beyond the last four buy the LSTM, and the
# LSTM against the NPLM at equal dropout and about equal size
CONTROLS = (("lstm", "lstm-4"), ("lstm", "nplm-dropout"))
MEASURES = ("valid_ppl", "test_ppl", "mix_test_ppl")
PER_MODEL = ("rows", "summary", "grid", "descriptions", "parameters")  # the file's sections keyed by model


def is_scored(row: dict) -> bool:
    """Whether a seed's row has scores: not one of a seed that diverged before its first validation
    (``valid_ppl`` None: :func:`~nplm_edu.experiments.protocol.unscored_row`), which is counted, never averaged
    or shown as numbers.

    >>> is_scored({"seed": 0, "valid_ppl": 210.5}), is_scored({"seed": 1, "valid_ppl": None, "diverged": "epoch 1"})
    (True, False)
    """
    return row.get("valid_ppl") is not None


def runs_by_model(doc: dict) -> dict[str, list[dict]]:
    """The seed rows of the file, grouped by model in the order the file first lists them, by seed."""
    out: dict[str, list[dict]] = {}
    for r in doc.get("runs", []):
        out.setdefault(r["method"], []).append(r)
    return {m: sorted(rows, key=lambda r: r["seed"]) for m, rows in out.items()}


def without_models(doc: dict, models) -> dict:
    """The file ``doc`` as if ``models`` had never been trained: their seed rows (``runs``) and their
    entries in the per-model sections left out, the rest shared with ``doc`` (a chapter that reads only
    its own rows of a file another chapter adds rows to).

    >>> d = {"runs": [{"method": "lstm"}, {"method": "transformer-4"}], "summary": {"lstm": 1, "transformer-4": 2}}
    >>> without_models(d, ["transformer-4"])
    {'runs': [{'method': 'lstm'}], 'summary': {'lstm': 1}}
    """
    drop = set(models)
    out = {k: ({m: v for m, v in section.items() if m not in drop} if k in PER_MODEL and isinstance(section, dict)
               else section) for k, section in doc.items()}
    out["runs"] = [r for r in doc.get("runs", []) if r["method"] not in drop]
    return out


def spread(values) -> dict:
    """:func:`~nplm_edu.analysis.quality.mean_std` of the values that are not None, with their min and max.

    >>> spread([3.0, None, 1.0, 2.0])
    {'mean': 2.0, 'std': 1.0, 'n': 3, 'values': [3.0, 1.0, 2.0], 'min': 1.0, 'max': 3.0}
    """
    s = mean_std(x for x in values if x is not None)
    return {**s, "min": min(s["values"], default=None), "max": max(s["values"], default=None)}


def row_descriptions(doc: dict, names, fallback: dict | None = None) -> dict[str, str | None]:
    """What each model of ``names`` is: as the results file describes it (``descriptions``, else ``rows``,
    which a file written without descriptions has alone, for the default models), else as
    ``fallback`` ({model: text}, e.g. the package's list) does, else None."""
    described, listed = doc.get("descriptions") or {}, doc.get("rows") or {}
    return {m: (described.get(m) or {}).get("what") or (listed.get(m) if isinstance(listed, dict) else None)
            or (fallback or {}).get(m) for m in names}


def described_parameters(doc: dict, model: str) -> int | None:
    """The parameter count the results file's header gives ``model`` (None: none)."""
    described = (doc.get("descriptions") or {}).get(model) or {}
    return described.get("parameters") or (doc.get("parameters") or {}).get(model)


def row_summaries(doc: dict) -> dict[str, dict]:
    """Per model: its seeds, chosen learning rate, epochs per seed, parameter count (its seeds', else the
    header's), how many runs stopped early or reached the epoch cap, and :func:`spread` of each of
    :data:`MEASURES`."""
    out = {}
    for model, rows in runs_by_model(doc).items():
        out[model] = {"seeds": [r["seed"] for r in rows], "lr": rows[0]["lr"], "epochs": [r["epochs"] for r in rows],
                      "parameters": next((r["parameters"] for r in rows if r.get("parameters")), None)
                      or described_parameters(doc, model),
                      "stopped_early": sum(bool(r.get("stopped_early")) for r in rows),
                      "reached_max_epochs": sum(bool(r.get("reached_max_epochs")) for r in rows),
                      **{k: spread(r.get(k) for r in rows) for k in MEASURES}}
    return out


def within_spread(a: dict, b: dict) -> bool | None:
    """Whether two models' seeds overlap: the range of one's values meets the other's (None: a model
    has no value yet). Overlapping seeds mean the seeds alone could give either order."""
    if not a["n"] or not b["n"]:
        return None
    return a["min"] <= b["max"] and b["min"] <= a["max"]


def difference(x: dict, y: dict) -> dict:
    """Two :func:`spread` dicts compared: mean(x) - mean(y), the spread of that difference (the standard
    deviation of one seed of x minus one seed of y, sqrt(std_x^2 + std_y^2); None with fewer than two
    values of either), :func:`within_spread` and the number of values of each.

    >>> d = difference(spread([1.0, 2.0, 3.0]), spread([5.0, 6.0, 7.0]))
    >>> d["difference"], round(d["std"], 4), d["within_spread"], d["seeds"]
    (-4.0, 1.4142, False, (3, 3))
    """
    sd = math.hypot(x["std"], y["std"]) if x["std"] is not None and y["std"] is not None else None
    return {"difference": x["mean"] - y["mean"], "std": sd, "within_spread": within_spread(x, y),
            "seeds": (x["n"], y["n"])}


def judged(d: dict) -> str | None:
    """The book's one rule for a :func:`difference`: "within" when the ranges of the two rows' values meet
    (:func:`within_spread`: the seeds alone could give either order), "beyond" when they do not. A row with one
    value (the Kneser-Ney 5-gram, which has no seed, or a model with one seed so far) is judged as a point
    against the other's range; when neither row has two values (or one has none) there is no spread to judge
    by: None.

    >>> [judged(difference(spread(a), spread(b))) for a, b in (([1, 3], [2]), ([1, 3], [4]), ([1], [4]))]
    ['within', 'beyond', None]
    """
    if max(d["seeds"]) < 2 or d["within_spread"] is None:
        return None
    return "within" if d["within_spread"] else "beyond"


def verdict(d: dict) -> str:
    """:func:`judged`, in words.

    >>> [verdict(difference(spread(a), spread(b))) for a, b in (([1, 3], [2]), ([1, 3], [4]), ([1], [4]))]
    ["within the seeds' spread", "beyond the seeds' spread", 'one seed each: no spread to judge by']
    """
    j = judged(d)
    return "one seed each: no spread to judge by" if j is None else f"{j} the seeds' spread"


def compare_text(name: str, a: dict, other: str, b: dict) -> str:
    """Two :func:`spread` dicts compared in a sentence: which is lower, by how much, and the :func:`verdict`.

    >>> compare_text("the LSTM", spread([286, 291]), "the GRU", spread([284, 287]))
    "the LSTM scores 288.5 against the GRU's 285.5, higher by 3.0 (1.1%), within the seeds' spread."
    """
    d = difference(a, b)
    side = "lower" if d["difference"] < 0 else "higher" if d["difference"] > 0 else "equal"
    size = f" by {abs(d['difference']):.1f} ({abs(d['difference']) / b['mean']:.1%})" if side != "equal" else ""
    return f"{name} scores {a['mean']:.1f} against {other}'s {b['mean']:.1f}, {side}{size}, {verdict(d)}."


def neighbours_text(rows: list[tuple[str, dict]]) -> str:
    """Each two neighbours of ``rows`` ((name, :func:`spread` of its seeds' values), listed by mean, e.g. of
    their times) judged by the book's one rule, :func:`verdict`: the first ahead of the second beyond the
    seeds' spread, or the two within it.

    >>> neighbours_text([("a", spread([1, 2])), ("b", spread([5, 6])), ("c", spread([5.5, 7]))])
    "`a` ahead of `b` beyond the seeds' spread, `b` and `c` within the seeds' spread"
    """
    out = []
    for (a, x), (b, y) in zip(rows, rows[1:]):
        d = difference(x, y)
        pair = {None: f"`{a}` and `{b}`:", "within": f"`{a}` and `{b}`", "beyond": f"`{a}` ahead of `{b}`"}
        out.append(f"{pair[judged(d)]} {verdict(d)}")
    return ", ".join(out)


def differences(doc: dict, pairs=CONTROLS, measure: str = "test_ppl") -> list[dict]:
    """For each (a, b) of ``pairs`` with both models in the file: :func:`difference` of their ``measure``."""
    s = row_summaries(doc)
    return [{"a": a, "b": b, "measure": measure, **difference(s[a][measure], s[b][measure])}
            for a, b in pairs if a in s and b in s]


def recurrent_table(doc: dict, order=None, pairs=CONTROLS, rest: bool = True) -> tuple[list, list]:
    """(body, head) of the table: one line per model (chosen lr, epochs per seed, parameters, validation,
    test and mixed test perplexity as mean ± std over the seeds), then one line per control difference.
    The models of ``order`` first, in that order, then (``rest``) the file's other models; ``rest`` False
    with no ``order`` would list no model, and raises :class:`~nplm_edu.errors.UserError`."""
    if not order and not rest:
        raise UserError("rest=False shows the models of order alone, and no order was given: the table would "
                        "have no rows", setting="rest")
    s = row_summaries(doc)
    models = [m for m in (order or []) if m in s] + ([m for m in s if m not in (order or [])] if rest else [])
    head = [["model", "lr", "epochs", "parameters", "seeds", "valid", "test", "test, mixed with KN5"]]
    body = [[m, f"{s[m]['lr']:g}", ", ".join(map(str, s[m]["epochs"])),
             f"{s[m]['parameters']:,}" if s[m]["parameters"] else "", str(len(s[m]["seeds"])),
             pm(s[m]["valid_ppl"]), pm(s[m]["test_ppl"]), pm(s[m]["mix_test_ppl"])] for m in models]
    for d in differences(doc, pairs):
        body.append([(f"{d['a']} − {d['b']} (test)", 2), (difference_text(d), 6)])  # wide: no squeezed column
    return body, head


def difference_text(d: dict, digits: int = 1) -> str:
    """A :func:`difference` as a table's cell: '-12.3 ± 4.5, within the seeds' spread' (its :func:`verdict`).

    >>> difference_text({"difference": -0.0253, "std": 0.0427, "within_spread": True, "seeds": (3, 3)}, 3)
    "-0.025 ± 0.043, within the seeds' spread"
    """
    text = f"{d['difference']:+.{digits}f}" + (f" ± {d['std']:.{digits}f}" if d["std"] is not None else "")
    return f"{text}, {verdict(d)}"


def show_recurrent_table(doc: dict, caption: str = "", order=None, pairs=CONTROLS, rest: bool = True) -> None:
    """Display :func:`recurrent_table` in a notebook (:func:`~nplm_edu.analysis.report.show_table`)."""
    body, head = recurrent_table(doc, order, pairs, rest)
    show_table(body, head, caption)


# --------------------------------------------------------------------------- what a chapter says of the file
def stopping_text(doc: dict) -> str:
    """One sentence on how the seeds' runs ended: stopped early, or at the epoch cap (named). A seed that
    stopped early at the cap's own epoch (its patience ran out on the last epoch allowed) is named too,
    so that a row whose epochs all read the cap is not taken to have reached it at every seed."""
    s = row_summaries(doc)
    capped = [f"{m} ({k['reached_max_epochs']} of {len(k['seeds'])} seeds)" for m, k in s.items()
              if k["reached_max_epochs"]]
    cap = (doc.get("protocol") or {}).get("max_epochs")
    at_cap = [f"{m} seed {r['seed']}" for m, rows in runs_by_model(doc).items() for r in rows
              if cap is not None and r.get("stopped_early") and r["epochs"] == cap]
    runs = sum(len(k["seeds"]) for k in s.values())
    early = sum(k["stopped_early"] for k in s.values())
    text = f"{early} of the {runs} runs stopped early, on validation"
    if at_cap:
        text += (f" ({', '.join(at_cap)} at epoch {cap}, the cap itself: "
                 f"{'its' if len(at_cap) == 1 else 'their'} patience ran out on the last epoch allowed)")
    return text + (f"; these reached the epoch cap: {', '.join(capped)}." if capped else ".")


def words_rows(doc: dict, model: str = "char-lstm") -> list[dict]:
    """The ``words`` field of ``model``'s seed rows (those that have one)."""
    return [r["words"] for r in runs_by_model(doc).get(model, []) if r.get("words")]


def frequency_rows(doc: dict, side: str = "target", model: str = "char-lstm") -> tuple[list, list]:
    """(body, head): per training-count bin of the word predicted (``side`` "target") or read last
    ("previous"), the tokens and each model's test perplexity, mean ± std over ``model``'s seeds."""
    tables = [w["by_frequency"][side] for w in words_rows(doc, model)]
    if not tables:
        return [], []
    models = list(dict.fromkeys(k for t in tables for b in t for k in b if k not in ("bin", "tokens")))
    body = [[b["bin"], f"{b['tokens']:,}", *(pm(spread(t[i].get(m) for t in tables)) for m in models)]
            for i, b in enumerate(tables[0])]  # each column over the seeds that have it (any seed may lack one)
    return body, [["bin", "tokens", *models]]


def oov_rows(doc: dict, model: str = "char-lstm") -> tuple[list, list]:
    """(body, head): unknown words read as ``<unk>`` and by their spelling, per seed of ``model``."""
    body = []
    for r in runs_by_model(doc).get(model, []):
        o = (r.get("words") or {}).get("oov")
        if o and "skipped" not in o:
            body.append([str(r["seed"]), f"{o['spelled_inputs']:,}", f"{o['ppl_as_unk']:.1f}",
                         f"{o['ppl_spelled']:.1f}",
                         f"{o['next_ppl_as_unk']:.1f}" if o["next_ppl_as_unk"] else "",
                         f"{o['next_ppl_spelled']:.1f}" if o["next_ppl_spelled"] else "",
                         f"{o['next_spelled_higher']:.0%}" if o["next_spelled_higher"] is not None else ""])
    head = [["", "", ("every test word", 2), ("the word after an unknown one", 3)],
            ["seed", "unknown words read", "as <unk>", "spelled", "as <unk>", "spelled", "more probable spelled"]]
    return body, head
