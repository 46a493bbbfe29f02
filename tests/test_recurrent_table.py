"""analysis.recurrent_table: the recurrent table read from a results file, finished or partial."""

import math

import pytest

from nplm_edu.analysis.recurrent_table import (difference, differences, judged, neighbours_text, pm, recurrent_table,
                                               row_descriptions, row_summaries, spread, verdict, within_spread,
                                               without_models)
from nplm_edu.errors import UserError


def run(method, seed, test, valid=None, mix=None, epochs=10):
    return {"run": f"{method}/seed{seed}", "method": method, "seed": seed, "lr": 10.0, "epochs": epochs,
            "parameters": 1000 + len(method), "valid_ppl": valid or test + 5, "test_ppl": test,
            "mix_test_ppl": mix or test - 20, "stopped_early": True, "reached_max_epochs": False,
            "samples": {"prompt": "the cat sat on", "seeds": [0, 1, 2], "texts": [f"{method} {seed} a", "b", "c"]}}


DOC = {"runs": [run("lstm", 0, 200), run("lstm", 1, 204), run("lstm", 2, 202),
                run("lstm-4", 0, 230), run("lstm-4", 1, 236), run("lstm-4", 2, 233),
                run("nplm-dropout", 0, 203), run("nplm-dropout", 1, 199), run("nplm-dropout", 2, 207)]}


def test_summaries_are_mean_and_sample_std_of_the_seeds():
    s = row_summaries(DOC)
    assert s["lstm"]["test_ppl"]["mean"] == pytest.approx(202) and s["lstm"]["test_ppl"]["std"] == pytest.approx(2)
    assert s["lstm"]["seeds"] == [0, 1, 2] and s["lstm"]["epochs"] == [10, 10, 10] and s["lstm"]["lr"] == 10.0
    assert pm(s["lstm"]["test_ppl"]) == "202.0 ± 2.0"


def test_control_differences_say_whether_the_seeds_overlap():
    d = {x["b"]: x for x in differences(DOC)}
    assert d["lstm-4"]["difference"] == pytest.approx(202 - 233) and d["lstm-4"]["within_spread"] is False
    assert d["lstm-4"]["std"] == pytest.approx(math.hypot(2, 3))
    assert d["nplm-dropout"]["within_spread"] is True  # 199..207 meets 200..204
    body, _ = recurrent_table(DOC, order=("lstm", "lstm-4", "nplm-dropout"))
    text = [row[1][0] for row in body[3:]]  # (text, columns spanned)
    assert "beyond the seeds' spread" in text[0] and "within the seeds' spread" in text[1]
    assert [row[0] for row in body[:3]] == ["lstm", "lstm-4", "nplm-dropout"]


def test_a_partial_file_shows_what_it_has():
    partial = {"runs": [run("lstm", 0, 200), run("lstm-4", 1, 230)]}
    body, head = recurrent_table(partial)
    assert len(head[0]) == 8 and all(sum(c[1] if isinstance(c, tuple) else 1 for c in r) == 8 for r in body)
    assert body[0][6] == "200.0" and body[2][1][0] == "-30.0, one seed each: no spread to judge by"  # 200 - 230
    assert len(differences(partial)) == 1  # nplm-dropout not trained yet
    assert recurrent_table({"runs": []}) == ([], [head[0]])
    assert within_spread(spread([]), spread([1.0])) is None


def test_a_chapter_can_read_the_file_without_another_chapters_rows():
    doc = {**DOC, "runs": DOC["runs"] + [run("transformer-4", 0, 190)], "kn5": {"test": 240.0},
           "summary": {"lstm": {}, "transformer-4": {}}, "grid": {"lstm": {}, "transformer-4": {}},
           "parameters": {"lstm": 7, "transformer-4": 9, "nplm-dropout/lstm": 1.0}}
    mine = without_models(doc, ["transformer-4"])
    assert set(row_summaries(mine)) == {"lstm", "lstm-4", "nplm-dropout"} and mine["runs"] == DOC["runs"]
    assert list(mine["summary"]) == list(mine["grid"]) == ["lstm"] and mine["kn5"] == {"test": 240.0}
    assert mine["parameters"] == {"lstm": 7, "nplm-dropout/lstm": 1.0}
    assert len(doc["runs"]) == 10 and "transformer-4" in doc["summary"]  # the file itself is left as it was


def test_the_parameter_column_does_not_depend_on_which_seed_comes_first():
    doc = {"runs": [{**run("lstm", 0, 200), "parameters": None}, run("lstm", 1, 204)]}
    assert row_summaries(doc)["lstm"]["parameters"] == 1004 and recurrent_table(doc)[0][0][3] == "1,004"


def test_each_model_is_described_by_the_file_else_by_the_fallback():
    package = {"lstm": "package lstm", "transformer-4": "package transformer", "gru": "package gru"}
    doc = {**DOC, "rows": {"lstm": "file lstm"}, "parameters": {"lstm": 7, "nplm-dropout/lstm": 1.0},
           "descriptions": {"transformer-4": {"what": "file transformer", "parameters": 9}}}
    names = ("lstm", "transformer-4", "gru", "xyz")
    assert row_descriptions(doc, names, package) == {"lstm": "file lstm", "transformer-4": "file transformer",
                                                     "gru": "package gru", "xyz": None}
    # a file last merged by older code: no descriptions, the default rows' alone
    older = row_descriptions({"rows": {"lstm": "file lstm"}}, names[:2], package)
    assert older == {"lstm": "file lstm", "transformer-4": "package transformer"}
    unscored = {**doc, "runs": [{**run("transformer-4", 0, 300), "parameters": None}]}
    assert row_summaries(unscored)["transformer-4"]["parameters"] == 9  # the header's count when no seed has one


def char_run(seed, char_ppl, word_ppl, skipped=False):
    r = run("char-lstm", seed, 210 + seed)
    bins = [{"bin": "unk", "tokens": 5, "char-lstm": char_ppl, "lstm": word_ppl},
            {"bin": "0-3", "tokens": 7, "char-lstm": None, "lstm": None}]
    oov = ({"skipped": "no words"} if skipped else
           {"unknown_inputs": 5, "spelled_inputs": 4, "spelled_words": 3, "ppl_as_unk": 300.0, "ppl_spelled": 299.5,
            "next_ppl_as_unk": 900.0, "next_ppl_spelled": 850.0, "next_spelled_higher": 0.75})
    r["words"] = {"by_frequency": {"target": bins, "previous": bins}, "oov": oov}
    return r


def test_what_the_chapter_says_of_stopping_and_words():
    from nplm_edu.analysis.recurrent_table import frequency_rows, oov_rows, stopping_text

    capped = {"runs": DOC["runs"][:2] + [{**DOC["runs"][2], "stopped_early": False, "reached_max_epochs": True}]}
    assert stopping_text(capped) == ("2 of the 3 runs stopped early, on validation; these reached the epoch cap: "
                                     "lstm (1 of 3 seeds).")
    # a seed that stopped early at the cap's own epoch is named, so "40, 40, 40" in the table is not read as
    # three seeds at the cap; without the cap in the file, or below it, nothing is added
    named = {"runs": [run("lstm", 0, 200, epochs=8), *capped["runs"][1:]], "protocol": {"max_epochs": 10}}
    assert stopping_text(named) == ("2 of the 3 runs stopped early, on validation (lstm seed 1 at epoch 10, "
                                    "the cap itself: its patience ran out on the last epoch allowed); these reached "
                                    "the epoch cap: lstm (1 of 3 seeds).")
    assert stopping_text({**named, "protocol": {"max_epochs": 11}}) == stopping_text(capped)
    assert frequency_rows(DOC) == ([], [])
    doc = {"runs": DOC["runs"] + [char_run(0, 100.0, 120.0), char_run(1, 104.0, 124.0, skipped=True)]}
    body, head = frequency_rows(doc)
    assert head == [["bin", "tokens", "char-lstm", "lstm"]]
    assert body == [["unk", "5", "102.0 ± 2.8", "122.0 ± 2.8"], ["0-3", "7", "", ""]]
    first_lacks = {"runs": DOC["runs"] + [char_run(1, 104.0, 124.0), char_run(0, 100.0, 120.0)]}
    for b in first_lacks["runs"][-1]["words"]["by_frequency"]["target"]:
        del b["lstm"]  # seed 0 (first by seed) without the word-level column: the column is still there
    body, head = frequency_rows(first_lacks)
    assert head == [["bin", "tokens", "char-lstm", "lstm"]] and body[0] == ["unk", "5", "102.0 ± 2.8", "124.0"]
    body, _ = oov_rows(doc)
    assert body == [["0", "4", "300.0", "299.5", "900.0", "850.0", "75%"]]  # seed 1 had no original words


def test_order_first_and_the_rest_only_when_asked():
    names = [row[0] for row in recurrent_table(DOC, order=("nplm-dropout",), pairs=())[0]]
    assert names == ["nplm-dropout", "lstm", "lstm-4"]  # the order's model, then the file's others
    only = [row[0] for row in recurrent_table(DOC, order=("nplm-dropout", "lstm"), pairs=(), rest=False)[0]]
    assert only == ["nplm-dropout", "lstm"]
    for order in (None, ()):  # no model asked for and the rest left out: said, not an empty table
        with pytest.raises(UserError, match="rest=False shows the models of order alone") as e:
            recurrent_table(DOC, order=order, rest=False)
        assert e.value.setting == "rest"


def test_each_two_neighbours_are_judged_by_the_one_rule():
    # a (1-2) ends below b (5-6): beyond; b and c (5.5-7) meet: within; d has one value inside c's range
    # (judged as a point against it: within); d and e, one value each, have no spread to judge by
    rows = [("a", spread([1.0, 2.0])), ("b", spread([5.0, 6.0])), ("c", spread([5.5, 7.0])), ("d", spread([6.5])),
            ("e", spread([9.0]))]
    assert neighbours_text(rows) == ("`a` ahead of `b` beyond the seeds' spread, `b` and `c` within the seeds' spread, "
                                     "`c` and `d` within the seeds' spread, `d` and `e`: one seed each: no spread to "
                                     "judge by")
    assert neighbours_text(rows[:1]) == ""


def test_judged_is_the_one_rule_and_verdict_its_words():
    cases = [([1.0, 2.0], [2.0, 3.0], "within"),  # the ranges 1..2 and 2..3 meet at 2
             ([1.0, 2.0], [2.5, 3.0], "beyond"),  # 2 < 2.5: they do not meet
             ([1.0, 3.0], [2.0], "within"),  # one value, a point inside the other's range
             ([1.0, 3.0], [4.0], "beyond"),  # a point outside it
             ([1.0], [4.0], None)]  # one value each: no range to judge by, though the two points differ
    for a, b, want in cases:
        d = difference(spread(a), spread(b))
        assert judged(d) == want
        assert verdict(d) == {"within": "within the seeds' spread", "beyond": "beyond the seeds' spread",
                              None: "one seed each: no spread to judge by"}[want]
    # within_spread says False for the two points (1 and 4 do not meet); judged does not take that as beyond
    assert difference(spread([1.0]), spread([4.0]))["within_spread"] is False
    assert judged({"seeds": (0, 3), "within_spread": None}) is None  # a model with no value yet
