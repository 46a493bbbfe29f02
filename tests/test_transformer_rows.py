"""analysis.transformer_rows: the Transformer rows' sentences, built from small results dicts."""

import pytest

from nplm_edu.analysis.recurrent_table import compare_text, spread
from nplm_edu.analysis.transformer_rows import cpu_hours, transformer_verdicts


def run(method, seed, test, mix=None, cpu=3600.0):
    return {"run": f"{method}/seed{seed}", "method": method, "seed": seed, "lr": 0.1, "epochs": 10,
            "valid_ppl": test + 5, "test_ppl": test, "mix_test_ppl": mix or test - 20, "cpu_seconds_training": cpu}


def rows(method, tests, **kw):
    return [run(method, i, t, **kw) for i, t in enumerate(tests)]


DOC = {"kn5": {"test": 250.0},
       "runs": rows("lstm", [200, 204, 202]) + rows("nplm-dropout", [203, 199, 207])
       + rows("transformer-4", [240, 244, 242], cpu=7200.0) + rows("transformer-32", [201, 205, 203])}


def test_each_branch_of_the_rule():
    assert compare_text("a", spread([1.0]), "b", spread([2.0])) == (
        "a scores 1.0 against b's 2.0, lower by 1.0 (50.0%), one seed each: no spread to judge by.")  # 1 / 2
    v = transformer_verdicts(DOC)
    # 242 - 203 = 39, 39 / 203 = 19.2%; 1 / 202 = 0.5%; the 5-gram, one value, is a point: 8 / 250 = 3.2%
    assert "transformer-4 scores 242.0 against transformer-32's 203.0, higher by 39.0 (19.2%), beyond the seeds' spread." in v
    assert "transformer-32 scores 203.0 against lstm's 202.0, higher by 1.0 (0.5%), within the seeds' spread." in v
    assert ("transformer-4 scores 242.0 against the Kneser-Ney 5-gram's 250.0, lower by 8.0 (3.2%), beyond the seeds' "
            "spread.") in v
    assert "Mixed with the 5-gram, transformer-32 scores 183.0 against nplm-dropout's 183.0, equal, within the seeds' spread." in v
    assert not any(s.startswith("transformer-32 scores") and "transformer-4's" in s for s in v)  # each pair once


def test_absent_rows_give_no_sentence_and_hours_sum_the_seeds():
    assert transformer_verdicts({"runs": rows("lstm", [200, 204])}) == []
    assert cpu_hours(DOC) == pytest.approx({"transformer-4": 6.0, "transformer-32": 3.0})
    assert cpu_hours({"runs": []}) == {}
