"""Tests of the statistics in benchmarks/threads_common.py (the interleaved rounds' order, quartiles,
the per-round ratios and their medians); its timings are results, not tests."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

SPEC = importlib.util.spec_from_file_location("threads_common", Path(__file__).parents[1] / "benchmarks" / "threads_common.py")
tc = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(tc)


def test_rotation_puts_every_item_once_in_every_position():
    items = ["a", "b", "c", "d"]
    orders = [tc.rotated(items, r) for r in range(len(items))]
    assert all(sorted(o) == items for o in orders)
    for pos in range(len(items)):
        assert sorted(o[pos] for o in orders) == items
    assert tc.rotated(items, 5) == tc.rotated(items, 1) and tc.rotated([], 3) == []


@pytest.mark.parametrize("n", [1, 2, 5, 8, 15])
def test_quartiles_are_numpys_percentiles(n):
    v = list(np.random.default_rng(n).standard_normal(n))
    assert tc.quartiles(v) == pytest.approx(tuple(np.percentile(v, [25, 50, 75])), abs=1e-12)
    with pytest.raises(ValueError):
        tc.quartiles([])


def rounds(ours1, ours2, torch1, torch2):
    return {1: {"ours": ours1, "torch": torch1}, 2: {"ours": ours2, "torch": torch2}}


def test_the_ratio_of_each_round_cancels_the_machines_drift():
    """The machine's speed moves from round to round (factor f), the step's scaling does not: every
    round's ratio is the step's."""
    f = [1.0, 0.7, 1.2, 0.8, 0.9]
    drift_free = tc.round_scaling(rounds([100 * x for x in f], [180 * x for x in f], [50 * x for x in f],
                                         [80 * x for x in f]), True)
    assert drift_free["rounds"] == 5 and drift_free["ours_2_over_1"] == 1.8 and drift_free["ours_2_over_1_iqr"] == [1.8, 1.8]
    assert drift_free["torch_2_over_1"] == 1.6 and drift_free["lead_kept"] == pytest.approx(1.8 / 1.6, abs=1e-3)
    assert drift_free["ours_2_over_1_at_least_1.7"] and drift_free["lead_kept_at_least_0.85"]


def test_one_disturbed_round_moves_the_best_of_but_not_the_median():
    ours1 = [100.0, 101.0, 99.0, 100.0, 140.0]  # the last round: the one-thread step ran alone on a fast host
    ours2 = [180.0, 181.0, 179.0, 180.0, 182.0]
    s = tc.round_scaling(rounds(ours1, ours2, [1.0] * 5, [1.0] * 5), False)
    assert s["ours_2_over_1"] == pytest.approx(1.8, abs=0.01) and s["ours_2_over_1_at_least_1.7"]
    assert s["ours_2_over_1_best"] == pytest.approx(182 / 140, abs=1e-3)  # the best-of would miss the target
    assert s["ours_2_over_1_iqr"][0] <= s["ours_2_over_1"] <= s["ours_2_over_1_iqr"][1]
    assert "lead_kept" not in s and "torch_2_over_1" not in s  # no PyTorch: no lead


def test_targets_are_judged_on_the_median():
    s = tc.round_scaling(rounds([100.0] * 3, [160.0, 170.0, 160.0], [100.0] * 3, [200.0, 210.0, 100.0]), True)
    assert s["ours_2_over_1"] == 1.6 and not s["ours_2_over_1_at_least_1.7"]
    assert s["lead_kept"] == 0.81 and not s["lead_kept_at_least_0.85"]
    assert tc.targets_met([s], True) == {"scaling_at_least_1.7": False, "lead_kept_at_least_0.85": False}


def test_interleaved_rounds_run_every_configuration_once_a_round_in_rotated_order(monkeypatch):
    ran, speeds = [], iter(range(1, 100))
    monkeypatch.setattr(tc, "use_threads", lambda t, have_torch: ran.append(t))
    monkeypatch.setattr(tc, "time_loop", lambda step, data, seconds, **loop: (step(ran[-1]), float(next(speeds)))[1])
    seen = []
    steps = {"ours": lambda t: seen.append(("ours", t)), "torch": lambda t: seen.append(("torch", t))}
    got = tc.interleaved_rounds(steps, None, [1, 2], True, 0.1, rounds=3, warm_round=True)
    configs = [("ours", 1), ("ours", 2), ("torch", 1), ("torch", 2)]
    assert seen[:4] == [configs[-1]] + configs[:-1]  # the dropped warm round (r = -1)
    assert seen[4:8] == configs and seen[8:12] == configs[1:] + configs[:1]
    assert {t: {w: len(v) for w, v in by.items()} for t, by in got.items()} == {1: {"ours": 3, "torch": 3},
                                                                               2: {"ours": 3, "torch": 3}}
    assert got[1]["ours"][0] == 5.0 and got[2]["ours"][0] == 6.0  # the first kept round's measurements


def test_ratio_of_rounds_is_the_median_of_each_rounds_ratio():
    """Round r's ratio is a[r] / b[r]: 2, 2, 2, 2 and 4 (the last round disturbed), median 2, quartiles
    2 and 2; the ratio of the medians (300 / 100 = 3) would not cancel the drift of b."""
    a, b = [200.0, 400.0, 100.0, 300.0, 600.0], [100.0, 200.0, 50.0, 150.0, 150.0]
    assert tc.ratio_of_rounds(a, b) == {"median": 2.0, "iqr": [2.0, 2.0]}


def test_fast_against_readable_is_timed_on_one_thread_and_its_ratio_is_per_round(monkeypatch):
    ran, drift = [], iter([9.0, 9.0, 1.0, 1.0, 0.5, 0.5, 2.0, 2.0])  # the warm round's 9s are dropped
    monkeypatch.setattr(tc, "use_threads", lambda t, have_torch: ran.append(t))
    speed = {"f": 30.0, "r": 10.0}
    monkeypatch.setattr(tc, "time_loop", lambda step, data, seconds, **loop: speed[step()] * next(drift))
    row = tc.fast_vs_readable(lambda: "f", lambda: "r", None, 0.1, 3, "tokens_per_s")
    assert set(ran) == {1} and row["rounds"] == 3 and row["threads"] == 1
    assert row["fast_over_readable"] == 3.0 and row["fast_over_readable_iqr"] == [3.0, 3.0]
    assert row["fast_tokens_per_s"] == 30.0 and row["readable_tokens_per_s_best"] == 20.0
