"""quality.reference_of over rows whose epochs do not all have a validation perplexity, and the epochs
seeds_time_to_quality keeps per seed."""

from nplm_edu.analysis.quality import reference_of, seeds_time_to_quality, time_to_quality


def test_reference_skips_epochs_and_rows_without_a_validation_perplexity():
    # seed 0: epochs 1 (ppl 220) and 2 (none: e.g. stopped before validating) -> best 220;
    # seed 1: ppl 200, then an epoch without one -> best 200; seed 2: no epoch validated -> left out.
    # Mean of the bests: (220 + 200) / 2 = 210; the seeds are [0, 1], not the protocol's (0, 1, 2).
    runs = [{"method": "b", "seed": 0, "history": [{"epoch": 1, "valid_ppl": 220.0}, {"epoch": 2}]},
            {"method": "b", "seed": 1, "history": [{"epoch": 1, "valid_ppl": 200.0}, {"epoch": 2}]},
            {"method": "b", "seed": 2, "history": [{"epoch": 1}]}]
    ref = reference_of(runs, "b", (0, 1, 2))
    assert ref["best_valid_ppl"]["values"] == [220.0, 200.0] and ref["best_valid_ppl"]["mean"] == 210.0
    assert ref["seeds"] == [0, 1] and not ref["complete"]
    assert reference_of([runs[2]], "b") is None  # no validated epoch at all: no reference yet
    # time_to_quality reads the same rows: seed 0's best, 220, is what it reports when it never gets within 5%
    assert time_to_quality(runs[0]["history"], 200.0)[0]["best_valid_ppl"] == 220.0


def test_seeds_times_keep_each_seeds_epoch():
    # reference best 200: within 5% is <= 210, within 1% <= 202. Seed a reaches 209 at epoch 2 and 201 at
    # epoch 3; seed b reaches 205 at epoch 1 and never 202 -> epochs [2, 1] and [3, "never"]
    a = [{"epoch": 1, "valid_ppl": 230.0, "seconds": 1.0}, {"epoch": 2, "valid_ppl": 209.0, "seconds": 1.0},
         {"epoch": 3, "valid_ppl": 201.0, "seconds": 1.0}]
    b = [{"epoch": 1, "valid_ppl": 205.0, "seconds": 1.0}, {"epoch": 2, "valid_ppl": 204.0, "seconds": 1.0}]
    five, one = seeds_time_to_quality([a, b], 200.0)
    assert five["epochs"] == [2, 1] and one["epochs"] == [3, "never"] and one["reached"] == 1
