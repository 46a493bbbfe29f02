"""analysis/quality.py: time to quality on histories with known answers, per seed, over the seeds and over
a results file's rows against a reference method; mean ± std."""

import math

import pytest

from nplm_edu.analysis.quality import mean_std, reference_of, seeds_time_to_quality, time_to_quality, times_to_quality


def H(*rows):
    """Epoch rows of (valid_ppl, wall seconds, CPU seconds)."""
    return [{"epoch": i + 1, "valid_ppl": p, "seconds": s, "cpu_seconds": c} for i, (p, s, c) in enumerate(rows)]


def test_time_to_quality_on_histories_with_known_answers():
    # reference best 200: within 5% is <= 210, within 1% is <= 202.
    # epochs: 300 (10 s, 4 cpu), 215 (10, 4), 209 (12, 5), 201 (8, 3)
    # 5%: first <= 210 is epoch 3 -> wall 10 + 10 + 12 = 32, cpu 4 + 4 + 5 = 13
    # 1%: first <= 202 is epoch 4 -> wall 32 + 8 = 40, cpu 13 + 3 = 16
    h = H((300, 10, 4), (215, 10, 4), (209, 12, 5), (201, 8, 3))
    five, one = time_to_quality({"epochs": h}, 200.0)
    assert (five["epoch"], five["wall_seconds"], five["cpu_seconds"]) == (3, 32, 13)
    assert five["target_ppl"] == pytest.approx(210) and one["target_ppl"] == pytest.approx(202)
    assert (one["epoch"], one["wall_seconds"], one["cpu_seconds"]) == (4, 40, 16)
    # never: a run whose best is 206 reaches 5% (210) at epoch 2 (wall 20, cpu 7) but never 1% (202)
    five, one = time_to_quality(H((250, 10, 3), (206, 10, 4), (207, 10, 4)), 200.0)
    assert (five["epoch"], five["wall_seconds"], five["cpu_seconds"]) == (2, 20, 7)
    assert one["epoch"] == "never" and one["wall_seconds"] is None and one["best_valid_ppl"] == 206
    # a run that starts below the reference reaches both at its first epoch; no CPU column: None
    first = time_to_quality([{"epoch": 1, "valid_ppl": 199.0, "seconds": 5.0}], 200.0)
    assert [(r["epoch"], r["wall_seconds"], r["cpu_seconds"]) for r in first] == [(1, 5.0, None)] * 2


def test_time_to_quality_over_seeds():
    # 5% (<= 210): the seeds take 32, 20 and 30 wall seconds -> mean 82/3; deviations 14/3, -22/3, 8/3,
    # squares summing to 744/9, over n - 1 = 2: std sqrt(124/3) = 6.43
    # 1% (<= 202): only the first seed reaches it (40 s): 1 of 3, the best of the others kept
    seeds = [H((300, 10, 4), (215, 10, 4), (209, 12, 5), (201, 8, 3)), H((250, 10, 3), (206, 10, 4)),
             H((230, 15, 6), (205, 15, 6))]
    five, one = seeds_time_to_quality(seeds, 200.0)
    assert five["reached"] == 3 and five["wall_seconds"]["mean"] == pytest.approx(82 / 3)
    assert five["wall_seconds"]["std"] == pytest.approx(math.sqrt(124 / 3))
    assert five["cpu_seconds"]["values"] == [13, 7, 12]
    assert one["reached"] == 1 and one["wall_seconds"]["values"] == [40] and one["best_valid_ppl"]["values"] == [
        201, 206, 205]


def test_reference_and_every_methods_times_from_a_files_rows():
    # reference "b": its seeds' bests are 200 and 210 -> mean 205; within 5% is <= 215.25, within 1% <= 207.05
    runs = [{"method": "a", "seed": 1, "history": H((230, 10, 4), (214, 10, 4))},  # 5% at epoch 2 (cpu 8); 1% never
            {"method": "a", "seed": 0, "history": H((206, 20, 5))},  # both at epoch 1 (cpu 5)
            {"method": "b", "seed": 2, "history": H((210, 3, 2))},
            {"method": "b", "seed": 0, "history": H((220, 1, 1), (200, 1, 1))}]
    ref, times = times_to_quality(runs, "b", seeds=(0, 1, 2))
    assert ref["best_valid_ppl"]["values"] == [200, 210] and ref["best_valid_ppl"]["mean"] == 205
    assert ref["seeds"] == [0, 2] and not ref["complete"]  # seed 1 of b is not there
    assert list(times) == ["a", "b"]  # the methods in the order the rows first name them
    five, one = times["a"]
    assert five["target_ppl"] == pytest.approx(215.25) and one["target_ppl"] == pytest.approx(207.05)
    assert five["reached"] == 2 and five["cpu_seconds"]["values"] == [5, 8]  # by seed: seed 0's 5, seed 1's 4 + 4
    assert one["reached"] == 1 and one["cpu_seconds"]["values"] == [5] and one["best_valid_ppl"]["values"] == [206, 214]
    # b, seed 0: 220 then 200, within 5% and 1% at epoch 2 (cpu 1 + 1); seed 2: 210, within 5% only (cpu 2)
    five, one = times["b"]
    assert (five["reached"], five["cpu_seconds"]["values"], one["reached"]) == (2, [2, 2], 1)
    # the reference: b's seeds 0 and 2, best 200 and 210: mean 205, sample std sqrt((5^2 + 5^2) / 1) = sqrt(50)
    assert (ref["method"], ref["seeds"], ref["complete"]) == ("b", [0, 2], False)
    assert ref["best_valid_ppl"]["std"] == pytest.approx(math.sqrt(50))
    assert reference_of(runs, "b", (0, 2))["complete"]
    # no row of the reference yet: no reference, and no times for anyone
    assert times_to_quality(runs, "c") == (None, {"a": None, "b": None})


def test_mean_std_of_one_value_and_of_none():
    assert mean_std([5.0]) == {"mean": 5.0, "std": None, "n": 1, "values": [5.0]}
    assert mean_std([]) == {"mean": None, "std": None, "n": 0, "values": []}
    # mean 7/3, deviations -4/3, -1/3, 5/3: (16 + 1 + 25) / 9 / (3 - 1) = 7/3
    assert mean_std([1, 2, 4])["std"] == pytest.approx(math.sqrt(7 / 3))
