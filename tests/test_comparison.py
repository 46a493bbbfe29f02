"""analysis/comparison.py: the table and the figure of a comparison, on a results file with known numbers,
complete or partial (a method missing, the reference missing, one seed)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nplm_edu.analysis.comparison import (HEAD, comparison_caption, comparison_rows, method_curve,  # noqa: E402
                                          plot_comparison, show_comparison_table)
from nplm_edu.experiments.output_layers import finish  # noqa: E402
from nplm_edu.experiments.protocol import Protocol, with_summaries  # noqa: E402


def run(method, seed, ppls, cpu=10.0, lr=1.0):
    history = [{"epoch": i + 1, "valid_ppl": p, "seconds": 2 * cpu, "cpu_seconds": cpu, "train_cpu_seconds": cpu / 2}
               for i, p in enumerate(ppls)]
    return {"run": f"{method}/seed{seed}", "method": method, "seed": seed, "lr": lr, "lr_grid": {"1": 300.0},
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
    assert rows["full"][5] == "x1.00" and rows["tree-huffman"][5] == "x10.00"  # 10x fewer CPU seconds per update
    assert rows["tree-huffman"][6] == "20 s"  # within 5% (263.55) at its second epoch: 10 + 10 CPU s
    assert rows["tree-huffman"][7] == "never (255.0)"  # 1% is 253.51
    assert rows["full"][6] == "300 s" and rows["full"][2] == "3, 3, 3"
    assert "251.0 (mean of 3 seeds)" in comparison_caption(doc)


def test_a_partial_file_without_the_reference_and_with_one_seed():
    doc = document(TREE[:1])
    (row,) = comparison_rows(doc)
    assert row[0] == "tree-huffman" and row[3] == "255.0" and row[5:] == ["-", "-", "-"]
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
