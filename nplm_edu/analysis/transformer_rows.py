"""What the book says of the Transformer rows of the recurrent results file: where each Transformer
stands against the NPLM, the LSTMs and the Kneser-Ney 5-gram, alone and mixed with the 5-gram
(:func:`standing_text`, one sentence each), the differences behind it (:func:`pair_rows`, a table), each
judged by :func:`~nplm_edu.analysis.recurrent_table.judged` (the book's one rule: the seeds' ranges meet
or they do not), and the CPU hours the rows cost."""

from __future__ import annotations

from .comparison import cpu_per_epoch
from .recurrent_table import (CONTROLS, compare_text, difference, difference_text, judged, row_summaries, runs_by_model,
                              spread)
from .report import listed

TRANSFORMERS = ("transformer-4", "transformer-32")
OTHERS = ("nplm-dropout", "lstm", "lstm-4")
KN5 = "the Kneser-Ney 5-gram"
PAIR_MEASURES = {"test_ppl": "test", "mix_test_ppl": "mixed with the 5-gram"}
WINDOWS = (("transformer-32", "transformer-4"), CONTROLS[0])  # a network, and its kind on the last 4 words


def _against(s: dict, kn5, t: str, o: str) -> dict:
    """{measure: :func:`~nplm_edu.analysis.recurrent_table.difference`} of row ``t`` minus row ``o`` (``o`` the
    5-gram: test only, it is what the others are mixed with)."""
    if o == KN5:
        return {"test_ppl": difference(s[t]["test_ppl"], spread([kn5]))}
    return {k: difference(s[t][k], s[o][k]) for k in PAIR_MEASURES if s[t][k]["n"] and s[o][k]["n"]}


def pair_differences(doc: dict, transformers=TRANSFORMERS, others=OTHERS, both_ways: bool = False):
    """[(Transformer, other row, {measure: difference})] for each Transformer the file holds against each
    other Transformer (each pair once, from the first one's side, unless ``both_ways``), each of ``others``
    and the 5-gram; only rows the file holds."""
    s, kn5 = row_summaries(doc), doc.get("kn5", {}).get("test")
    present = [t for t in transformers if t in s]
    out = []
    for i, t in enumerate(present):
        rivals = [x for x in present if x != t] if both_ways else present[i + 1:]
        rivals += [o for o in others if o in s] + ([KN5] if kn5 is not None else [])
        out += [(t, o, _against(s, kn5, t, o)) for o in rivals]
    return out


def pair_rows(doc: dict) -> list[list[str]]:
    """:func:`pair_differences` as a table's rows: Transformer, other row, then each measure's difference
    (:func:`~nplm_edu.analysis.recurrent_table.difference_text`, '' where it has none)."""
    return [[t, o, *(difference_text(d[k]) if k in d else "" for k in PAIR_MEASURES)]
            for t, o, d in pair_differences(doc)]


def _standing(diffs: list[tuple[str, dict]]) -> str:
    """Where a row stands against others, from (other, difference) pairs, by the difference's sign and
    :func:`~nplm_edu.analysis.recurrent_table.judged`: 'ahead of a and behind b and c, beyond the seeds'
    spread each time; level with d, within it; lower than e, one value each: no spread to judge by'."""
    group: dict[str, list[str]] = {"ahead of": [], "behind": [], "level with": [], "lower than": [], "higher than": []}
    for o, d in diffs:
        j, lower = judged(d), d["difference"] < 0
        if j is None:
            group["lower than" if lower else "higher than"].append(o)
        else:
            group["level with" if j == "within" else "ahead of" if lower else "behind"].append(o)

    def clause(keys, said):
        named = [f"{k} {listed(group[k], code=False)}" for k in keys if group[k]]
        return f"{' and '.join(named)}, {said}" if named else ""

    beyond = sum(len(group[k]) for k in ("ahead of", "behind"))
    clauses = [clause(("ahead of", "behind"), "beyond the seeds' spread" + (" each time" if beyond > 1 else "")),
               clause(("level with",), "within the seeds' spread"),
               clause(("lower than", "higher than"), "with no spread to judge by")]
    return "; ".join(c for c in clauses if c)


def standing_text(doc: dict, transformers=TRANSFORMERS, others=OTHERS) -> list[str]:
    """One sentence per Transformer the file holds: where its test perplexity stands against every other
    row (:func:`pair_differences` both ways), then where it stands mixed with the 5-gram."""
    by: dict = {}
    for t, o, d in pair_differences(doc, transformers, others, both_ways=True):
        for k, dk in d.items():
            by.setdefault(t, {}).setdefault(k, []).append((o, dk))
    out = []
    for t, measures in by.items():
        text = f"On test perplexity {t} is {_standing(measures['test_ppl'])}"
        if measures.get("mix_test_ppl"):
            text += f"; mixed with the 5-gram, it is {_standing(measures['mix_test_ppl'])}"
        out.append(text + ".")
    return out


def window_text(doc: dict, pairs=WINDOWS) -> str:
    """What a longer context buys each network whose 4-word kind the file also holds: its test perplexity
    against that row's (:func:`~nplm_edu.analysis.recurrent_table.compare_text`), one clause a pair; '' for
    none."""
    s = row_summaries(doc)
    said = [compare_text(a, s[a]["test_ppl"], b, s[b]["test_ppl"]).rstrip(".") for a, b in pairs
            if a in s and b in s and s[a]["test_ppl"]["n"] and s[b]["test_ppl"]["n"]]
    lead = "What a longer context buys, each network against its kind reading only the last 4 words: "
    return f"{lead}{'; '.join(said)}." if said else ""


def cpu_hours(doc: dict, models=TRANSFORMERS) -> dict[str, float]:
    """CPU hours of training, summed over each model's seeds (``cpu_seconds_training`` of its runs)."""
    by = runs_by_model(doc)
    return {m: sum(r.get("cpu_seconds_training") or 0 for r in by[m]) / 3600 for m in models if m in by}


def grid_hours(doc: dict, models=TRANSFORMERS) -> dict[str, float]:
    """CPU hours the choice of each model's rate cost beyond its seeds, estimated (the file does not time the
    grid): ``grid_epochs`` epochs at each rate but the chosen one (whose grid run seed 0 continues), at the
    seeds' mean CPU seconds an epoch (:func:`~nplm_edu.analysis.comparison.cpu_per_epoch`): an estimate, not a
    bound (an epoch's CPU seconds vary from epoch to epoch; a rate that diverged early cost less)."""
    by, protocol = runs_by_model(doc), doc.get("protocol", {})
    others = len(protocol.get("lrs", [])) - 1
    return {m: others * protocol.get("grid_epochs", 0) * cpu_per_epoch(doc, m)["mean"] / 3600
            for m in models if m in by}
