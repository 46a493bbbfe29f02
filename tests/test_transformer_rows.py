"""analysis.transformer_rows: the Transformer rows' sentences, built from small results dicts."""

import pytest

from nplm_edu.analysis.recurrent_table import compare_text, spread
from nplm_edu.analysis.transformer_rows import cpu_hours, grid_hours, pair_rows, standing_text, window_text


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
    t4, t32 = standing_text(DOC)
    # transformer-4's seeds 240..244 lie above every other row's range and below the 5-gram's 250 (a point);
    # mixed (each seed 20 lower), still above the others'; the 5-gram is not mixed with itself
    assert t4 == ("On test perplexity transformer-4 is ahead of the Kneser-Ney 5-gram and behind transformer-32, "
                  "nplm-dropout and lstm, beyond the seeds' spread each time; mixed with the 5-gram, it is behind "
                  "transformer-32, nplm-dropout and lstm, beyond the seeds' spread each time.")
    # transformer-32's 201..205 meet lstm's 200..204 and nplm-dropout's 199..207
    assert t32 == ("On test perplexity transformer-32 is ahead of transformer-4 and the Kneser-Ney 5-gram, beyond the "
                   "seeds' spread each time; level with nplm-dropout and lstm, within the seeds' spread; mixed with "
                   "the 5-gram, it is ahead of transformer-4, beyond the seeds' spread; level with nplm-dropout and "
                   "lstm, within the seeds' spread.")


def test_the_table_holds_each_pair_once():
    rows = pair_rows(DOC)
    assert [r[:2] for r in rows] == [["transformer-4", "transformer-32"], ["transformer-4", "nplm-dropout"],
                                     ["transformer-4", "lstm"], ["transformer-4", "the Kneser-Ney 5-gram"],
                                     ["transformer-32", "nplm-dropout"], ["transformer-32", "lstm"],
                                     ["transformer-32", "the Kneser-Ney 5-gram"]]
    # 242 - 203 = 39 with the spread sqrt(2^2 + 2^2) = 2.8; the 5-gram has no mixed column
    assert rows[0][2] == rows[0][3] == "+39.0 ± 2.8, beyond the seeds' spread" and rows[3][3] == ""
    assert rows[4][2].startswith("+0.0 ± 4.5, within")  # 203 - 203; sqrt(2^2 + 4^2) = 4.47


def test_one_seed_against_a_point_is_not_judged():
    one = {"kn5": {"test": 250.0}, "runs": rows("transformer-4", [240])}
    assert standing_text(one) == ["On test perplexity transformer-4 is lower than the Kneser-Ney 5-gram, with no "
                                  "spread to judge by."]


def test_absent_rows_give_no_sentence_and_hours_sum_the_seeds():
    assert standing_text({"runs": rows("lstm", [200, 204])}) == pair_rows({"runs": rows("lstm", [200, 204])}) == []
    assert cpu_hours(DOC) == pytest.approx({"transformer-4": 6.0, "transformer-32": 3.0})
    assert cpu_hours({"runs": []}) == {}


def test_the_grid_is_costed_at_the_seeds_epochs():
    # 4 rates, 2 epochs each; the chosen rate's grid run is seed 0's start: 3 x 2 epochs of 600 and 1200
    # CPU seconds (the partly timed 5,000 left out), a mean of 900 s: 3 * 2 * 900 / 3600 = 1.5 CPU hours
    partial = {"cpu_seconds": 5000.0, "timing_partial": True}
    runs = [{**run("transformer-4", i, 240), "history": [{"cpu_seconds": c}, partial]} for i, c in enumerate((600.0, 1200.0))]
    doc = {"protocol": {"lrs": [1, 3, 10, 30], "grid_epochs": 2}, "runs": runs}
    assert grid_hours(doc) == pytest.approx({"transformer-4": 1.5})


def test_each_longer_context_is_set_against_its_4_word_kind():
    both = {"runs": DOC["runs"] + rows("lstm-4", [210, 214, 212])}
    # transformer-32's mean 203 against transformer-4's 242: 39 lower, 39 / 242 = 16.1%, the ranges apart;
    # lstm's 202 against lstm-4's 212: 10 lower, 10 / 212 = 4.7%, 200..204 and 210..214 apart
    assert window_text(both) == (
        "What a longer context buys, each network against its kind reading only the last 4 words: transformer-32 "
        "scores 203.0 against transformer-4's 242.0, lower by 39.0 (16.1%), beyond the seeds' spread; lstm scores "
        "202.0 against lstm-4's 212.0, lower by 10.0 (4.7%), beyond the seeds' spread.")
    assert window_text(DOC).endswith("(16.1%), beyond the seeds' spread.")  # no lstm-4: one clause
    assert window_text({"runs": rows("lstm", [200])}) == ""
