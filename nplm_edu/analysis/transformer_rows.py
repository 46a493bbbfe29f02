"""What the book says of the Transformer rows of the recurrent results file: one sentence per
comparison (against the NPLM, the LSTMs, the Kneser-Ney 5-gram, and each mixed with it), each built
from the rows by :func:`~nplm_edu.analysis.recurrent_table.compare_text` (the book's one rule: the seeds'
ranges overlap or they do not), and the CPU hours the rows cost."""

from __future__ import annotations

from .recurrent_table import compare_text, row_summaries, runs_by_model, spread

TRANSFORMERS = ("transformer-4", "transformer-32")
OTHERS = ("nplm-dropout", "lstm", "lstm-4")


def transformer_verdicts(doc: dict, transformers=TRANSFORMERS, others=OTHERS) -> list[str]:
    """One sentence per (Transformer, other row) on test perplexity, one against the 5-gram, and one
    per pair on the test perplexity mixed with the 5-gram; only for the rows the file holds."""
    s = row_summaries(doc)
    kn5 = doc.get("kn5", {}).get("test")
    out = []
    present = [t for t in transformers if t in s]
    for i, t in enumerate(present):
        for o in (o for o in (*present[i + 1:], *others) if o in s):  # each pair of Transformers once
            out.append(compare_text(t, s[t]["test_ppl"], o, s[o]["test_ppl"]))
        if kn5 is not None:
            out.append(compare_text(t, s[t]["test_ppl"], "the Kneser-Ney 5-gram", spread([kn5])))
        for o in (o for o in others if o in s and s[o]["mix_test_ppl"]["n"] and s[t]["mix_test_ppl"]["n"]):
            out.append("Mixed with the 5-gram, " + compare_text(t, s[t]["mix_test_ppl"], o, s[o]["mix_test_ppl"]))
    return out


def cpu_hours(doc: dict, models=TRANSFORMERS) -> dict[str, float]:
    """CPU hours of training, summed over each model's seeds (``cpu_seconds_training`` of its runs)."""
    by = runs_by_model(doc)
    return {m: sum(r.get("cpu_seconds_training") or 0 for r in by[m]) / 3600 for m in models if m in by}
