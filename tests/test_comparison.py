"""analysis/comparison.py: the table and the figure of a comparison, on a results file with known numbers,
complete or partial (a method missing, the reference missing, one seed)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nplm_edu.analysis.comparison import (HEAD, against_reference, comparison_caption, comparison_rows,  # noqa: E402
                                          difference_phrase, epoch_cpu_seconds, grid_rows, method_curve, method_sentence,
                                          outcome_sentences, plot_comparison, show_comparison_table,
                                          show_grid_table, time_rows)
from nplm_edu.experiments.output_layers import finish  # noqa: E402
from nplm_edu.experiments.protocol import Protocol, with_summaries  # noqa: E402


def run(method, seed, ppls, cpu=10.0, lr=1.0, grid=None):
    history = [{"epoch": i + 1, "valid_ppl": p, "seconds": 2 * cpu, "cpu_seconds": cpu, "train_cpu_seconds": cpu / 2}
               for i, p in enumerate(ppls)]
    return {"run": f"{method}/seed{seed}", "method": method, "seed": seed, "lr": lr, "lr_grid": grid or {"1": 300.0},
            "valid_ppl": min(ppls), "test_ppl": min(ppls) + 5, "epochs": len(ppls), "stopped_early": True,
            "reached_max_epochs": False, "history": history}


def document(runs):
    doc = {"corpus": "brown[comparison]", "V": 17907, "examples_per_epoch": 1000,
           "protocol": Protocol().record(), "runs": runs}
    return finish(with_summaries(doc))


FULL = [run("full", s, [400.0, 300.0, 250.0 + s], cpu=100.0) for s in (0, 1, 2)]  # reference (250+251+252)/3 = 251
TREE = [run("tree-huffman", s, [500.0, 262.0, 255.0], cpu=10.0) for s in (0, 1, 2)]  # 5%: 263.55, 1%: 253.51


def test_the_table_of_a_complete_file():
    doc = document(FULL + TREE)
    rows = {r[0]: r for r in comparison_rows(doc)}
    assert list(rows) == ["full", "tree-huffman"] and len(HEAD[0]) == len(rows["full"])
    assert rows["full"][3] == "251.0 ± 1.0" and rows["full"][4] == "256.0 ± 1.0"
    assert rows["full"][5] == "100 ± 0" and rows["tree-huffman"][5] == "10 ± 0"  # CPU seconds of an epoch
    assert rows["full"][6] == "x1.00" and rows["tree-huffman"][6] == "x10.00"  # 10x fewer CPU seconds per update
    assert rows["tree-huffman"][7] == "20 s"  # within 5% (263.55) at its second epoch: 10 + 10 CPU s
    assert rows["tree-huffman"][8] == "never (255.0)"  # 1% is 253.51
    assert rows["full"][7] == "300 s" and rows["full"][2] == "3, 3, 3" and rows["full"][1] == "1"
    assert "251.0 (mean of 3 seeds)" in comparison_caption(doc)
    assert comparison_caption(doc).startswith("Brown (") and "[" not in comparison_caption(doc)  # the corpus in words
    sliced = {**doc, "slice": {"train": 200_000, "valid": 50_000, "test": None}}
    assert comparison_caption(sliced).startswith("Brown, a slice of 200,000 training and 50,000 validation tokens")


def test_the_times_to_quality_say_never_once():
    """The full softmax's three seeds within 5% after 300 CPU s each (its reference 251 is 251.0 * 1.05 =
    263.55 at 5%; seeds 250, 251, 252 reach it at the third epoch of 100 CPU s, 200 wall s); within 1%
    (253.51) too; the tree's 20 s with 40 wall s, never within 1%; a method at 300 never within either."""
    never = [run("class-frequency", s, [500.0, 400.0, 300.0], cpu=10.0) for s in (0, 1, 2)]
    rows = {r[0]: r[1:] for r in time_rows(document(FULL + TREE + never))}
    assert rows["full"] == ["300 ± 0 s", "600 ± 0 s", "300 ± 0 s", "600 ± 0 s"]
    assert rows["tree-huffman"] == ["20 ± 0 s", "40 ± 0 s", ("never (best 255.0)", 2)]
    assert rows["class-frequency"] == [("never within 5% or 1% (best 300.0)", 4)]
    one = {r[0]: r[1:] for r in time_rows(document(FULL[:1] + TREE[:1]), ("cpu_seconds",))}
    assert one["full"] == ["300 s", "300 s"]  # one seed: the mean alone
    spanned = {r[0]: r[7:] for r in comparison_rows(document(FULL + TREE + never), span=True)}
    assert spanned["class-frequency"] == [("never within 5% or 1% (best 300.0)", 2)]  # once, across both
    assert spanned["tree-huffman"] == ["20 s", "never (255.0)"]  # reached 5%: two cells
    plain = {r[0]: r[7:] for r in comparison_rows(document(FULL + TREE + never))}
    assert plain["class-frequency"] == ["never (300.0)", "never (300.0)"]  # text output: plain cells


def test_a_partial_file_without_the_reference_and_with_one_seed():
    doc = document(TREE[:1])
    (row,) = comparison_rows(doc)
    assert row[0] == "tree-huffman" and row[3] == "255.0" and row[5] == "10" and row[6:] == ["-", "-", "-"]
    assert all(v == "" for v in outcome_sentences(doc).values() if v != outcome_sentences(doc)["grid"])
    assert "not in the file yet" in comparison_caption(doc)
    ax = plot_comparison(doc)
    assert len(ax.get_lines()) == 1  # its one curve, no reference lines
    show_comparison_table(doc)  # displays without error


def test_the_curves_mean_and_spread_of_the_seeds():
    runs = [run("x", 0, [400.0, 300.0], cpu=10.0), run("x", 1, [420.0, 280.0, 270.0], cpu=10.0)]
    t, mean, low, high = method_curve(runs)
    assert t[0] == pytest.approx(10.0) and t[-1] == pytest.approx(20.0)  # where both seeds have a value
    assert mean[0] == pytest.approx(410.0) and low[-1] == pytest.approx(280.0) and high[-1] == pytest.approx(300.0)
    assert np.all(low <= mean) and np.all(mean <= high)


def test_the_figure_is_legible_at_390_pixels():
    doc = document(FULL + TREE)
    ax = plot_comparison(doc)
    fig = ax.figure
    assert fig.get_size_inches()[0] * fig.dpi <= 400
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["full", "tree-huffman"] and min(t.get_fontsize() for t in ax.get_legend().get_texts()) >= 7
    assert len(ax.get_lines()) == 2 + 2  # two methods, the 5% and 1% lines
    assert ax.get_ylim()[0] == pytest.approx(251.0 * 0.97)


def test_a_learning_rate_at_the_edge_of_the_grid_is_said():
    tree = [run("tree-huffman", s, [500.0, 262.0], grid={"0.3": 900.0, "1": 800.0, "3": None}) for s in (0, 1)]
    nce = [run("nce", s, [500.0, 300.0, 270.0], lr=3.0, grid={"0.3": 640.0, "1": 620.0, "3": 610.0}) for s in (0, 1, 2)]
    doc = document(FULL + tree + nce)
    rows = {r[0]: r for r in comparison_rows(doc)}
    assert rows["nce"][1] == "3 (top)" and rows["full"][1] == "1"
    body, head = grid_rows(doc)
    assert head == [["method", "lr 0.3", "lr 1", "lr 3", "chosen"]]
    assert body[1] == ["tree-huffman", "900.0", "800.0", "diverged", "1"]
    assert body[2][-1] == "3, the top of the grid"
    assert outcome_sentences(doc)["grid"].startswith("`nce` chose 3, the top of the grid: a rate beyond the grid")
    show_grid_table(doc)  # displays without error


def test_differences_from_the_full_softmax_follow_the_recurrent_tables_rule():
    # full's test perplexities 255, 256, 257; a method whose seeds overlap them is within the spread, one whose
    # seeds all lie below is not, whatever the size of the difference
    close = [run("nce", s, [400.0, 251.0 + s]) for s in (0, 1, 2)]  # test 256, 257, 258: overlaps 255-257
    apart = [run("class-exchange", s, [400.0, 248.0 + 0.1 * s]) for s in (0, 1, 2)]  # test 253-253.2: below
    one = [run("is", 0, [400.0, 100.0])]  # one seed: no verdict, left out
    doc = document(FULL + close + apart + one)
    d = {x["a"]: x for x in against_reference(doc)}
    assert set(d) == {"nce", "class-exchange"}
    assert d["nce"]["within_spread"] and not d["class-exchange"]["within_spread"]
    assert d["nce"]["difference"] == pytest.approx(1.0) and d["class-exchange"]["difference"] == pytest.approx(-2.9)
    assert difference_phrase(d["class-exchange"], 256.0) == (
        "1.1% lower test perplexity than the full softmax's, beyond the seeds' spread")
    assert difference_phrase(d["nce"], 256.0).endswith("higher test perplexity than the full softmax's, within the seeds' spread")
    test = outcome_sentences(doc)["test"]
    assert test == ("Against the full softmax's test perplexity, lower, beyond the seeds' spread: `class-exchange`; "
                    "within the seeds' spread (the seeds alone could give either order): `nce`.")


def test_the_time_to_quality_sentence_lists_the_methods_by_mean_time_and_judges_each_two_neighbours():
    fast = [run("nce", s, [262.0, 255.0], cpu=5.0 + s) for s in (0, 1, 2)]  # within 5% after 5, 6, 7 CPU s
    # within 5% at epoch 2 after 19, 21, 23 CPU s (mean 21): its range meets tree-huffman's 20, 20, 20
    close = [run("is-target", s, [500.0, 262.0], cpu=9.5 + s) for s in (0, 1, 2)]
    doc = document(FULL + TREE + fast + close)
    text = outcome_sentences(doc)["within_5"]
    assert text == ("Every seed of `nce` (6 CPU s), `tree-huffman` (20 CPU s), `is-target` (21 CPU s) and `full` "
                    "(300 CPU s) came within 5% of the full softmax's best validation perplexity (to 263.6 or "
                    "below), listed by mean time: `nce` ahead of `tree-huffman` beyond the seeds' spread, "
                    "`tree-huffman` and `is-target` within the seeds' spread, `is-target` ahead of `full` beyond "
                    "the seeds' spread.")
    assert outcome_sentences(doc)["within_1"].endswith(
        "`nce`, `tree-huffman` and `is-target` never came within 1% (best 255.0, 255.0, 262.0).")


def test_an_epoch_timed_in_part_is_left_out_of_the_seconds_an_epoch():
    history = [{"cpu_seconds": 10.0}, {"cpu_seconds": 3.0, "timing_partial": True}, {"cpu_seconds": 12.0}, {"epoch": 4}]
    assert epoch_cpu_seconds(history) == pytest.approx(11.0) and epoch_cpu_seconds([]) is None


def test_one_method_in_words():
    doc = document(FULL + TREE)  # the tree's test perplexity 260 on every seed, the full softmax's 255, 256, 257
    assert method_sentence(doc, "tree-huffman") == (
        "`tree-huffman`: 10.0 times the full softmax's training examples per CPU second of updates; stopped after "
        "3, 3, 3 epochs; 1.6% higher test perplexity than the full softmax's, beyond the seeds' spread; within 5% of "
        "the full softmax's best validation perplexity after 20 CPU seconds, the full softmax after 300, a "
        "difference beyond the seeds' spread.")  # the tree's seeds at 20 s each, the full softmax's at 300 s each
    assert method_sentence(doc, "tree-huffman", "a Huffman tree").startswith("`tree-huffman` (a Huffman tree): 10.0 times")
    assert method_sentence(doc, "nce", "k = 25") == ""  # not in the file: nothing said


def test_a_time_to_quality_is_judged_against_the_full_softmaxs_only_when_every_seed_of_both_came():
    """Seeds reaching 5% (263.55) at 200, 300, 300 CPU s (epochs of 100 s) meet the full softmax's 300, 300, 300:
    within the seeds' spread; a method with one seed of two within 5% gets no verdict, nor does the full softmax."""
    slow = [run("differentiated", s, [400.0, 263.0 if s == 0 else 300.0, 255.0], cpu=100.0) for s in (0, 1, 2)]
    some = [run("nce", s, [300.0, 260.0 if s == 0 else 270.0]) for s in (0, 1)]
    doc = document(FULL + slow + some)
    assert doc["summary"]["differentiated"]["time_to_quality"][0]["cpu_seconds"]["values"] == [200.0, 300.0, 300.0]
    assert method_sentence(doc, "differentiated").endswith(
        "after 267 CPU seconds, the full softmax after 300, a difference within the seeds' spread.")
    assert method_sentence(doc, "nce").endswith("after 20 CPU seconds (1 of 2 seeds).")
    assert method_sentence(doc, "full").endswith("after 300 CPU seconds.")


def test_a_seed_diverged_before_validation_is_counted_and_the_table_and_figure_still_read():
    unscored = {**run("nce", 1, [1.0]), "valid_ppl": None, "test_ppl": None, "epochs": 0, "history": [],
                "diverged": "diverged before its first validation", "stopped_early": False}
    doc = document(FULL + [run("nce", 0, [300.0, 260.0]), unscored])
    s = doc["summary"]["nce"]
    assert s["diverged"] == 1 and s["diverged_unscored"] == [1] and s["valid_ppl"]["values"] == [260.0]
    assert s["time_to_quality"][0]["reached"] == 1 and s["time_to_quality"][0]["seeds"] == 2
    rows = {r[0]: r for r in comparison_rows(doc)}
    assert rows["nce"][2] == "2, 0" and rows["nce"][3] == "260.0"
    assert "1 of 2 seeds" in method_sentence(doc, "nce")
    plot_comparison(doc)
