"""Tests of the arithmetic in benchmarks/bench_scale.py (its measurements are results, not tests)."""

import importlib.util
from pathlib import Path

SPEC = importlib.util.spec_from_file_location("bench_scale", Path(__file__).parents[1] / "benchmarks" / "bench_scale.py")
bench_scale = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench_scale)


def row(tokens, read_cpu):
    return {"tokens": tokens, "read": {"cpu_seconds": read_cpu, "peak_gib": 1.0}}


def test_growth_between_consecutive_sizes_and_over_the_whole_range():
    g = bench_scale.growth([row(10, 1.0), row(100, 20.0), row(1000, 300.0)])
    assert [(x["from"], x["to"]) for x in g] == [(10, 100), (100, 1000), (10, 1000)]
    # 1000 log 1000 / (10 log 10) = 100 * 3 log 10 / log 10 = 300; 100 log 100 / (10 log 10) = 20
    assert [x["n_log_n_ratio"] for x in g] == [20.0, 15.0, 300.0]
    assert [x["read"] for x in g] == [20.0, 15.0, 300.0]
    assert "kn5_fit" not in g[0]  # a step the rows did not measure is left out, not guessed


def test_two_sizes_have_one_ratio():
    assert len(bench_scale.growth([row(10, 1.0), row(100, 20.0)])) == 1


def test_the_sort_yardstick_grows_beside_the_fit():
    def kn_row(tokens, fit, sort):
        r = row(tokens, 1.0)
        r["kn5"] = {"fit_cpu_seconds": fit, "fit_user_seconds": fit, "fit_system_seconds": 0.1, "gather_seconds": 0.1,
                    "score_cpu_seconds": 1.0, "fit_peak_gib": 1.0, "sort_seconds": sort}
        return r

    (g,) = bench_scale.growth([kn_row(10, 1.0, 0.5), kn_row(100, 30.0, 10.0)])
    assert (g["kn5_fit"], g["sort"], g["n_log_n_ratio"]) == (30.0, 20.0, 20.0)  # 100 log 100 / (10 log 10) = 20
    (old,) = bench_scale.growth([row(10, 1.0), row(100, 20.0)])
    assert "sort" not in old  # rows measured before the yardstick existed


def test_search_steps_count_what_scoring_searches():
    import numpy as np

    from nplm_edu.models.ngram import KneserNey

    m = KneserNey(3, 3).fit(np.array([0, 1, 0, 1, 0, 2]))  # a b a b a c
    ctx = np.array([[0, 1], [1, 2], [2, 0], [1, 0]])  # contexts "a b", "b c", "c a", "b a"
    # a search among s children reads ceil(log2 s) + 1 entries (none if s = 0). Order 2 searches after
    # the last word: b is followed by {a} (1 read), c by nothing (0), a by {b, c} (2), twice: 5 / 4.
    # Order 3: "a b" is followed by {a} (1), "b a" by {b, c} (2); "b c" and "c a" never occur: 3 / 4.
    assert bench_scale.search_steps(m, ctx) == [
        {"order": 2, "context_seen": 1.0, "probes_per_window": 1.25},
        {"order": 3, "context_seen": 0.5, "probes_per_window": 0.75}]


def test_the_probe_count_is_what_search_slices_reads():
    import numpy as np

    from nplm_edu.models.ngram.counts import search_slices

    class Counted:  # a sorted table that counts the entries read from it
        def __init__(self, a):
            self.a, self.reads = a, 0

        def take(self, i):
            self.reads += np.size(i)
            return self.a.take(i)

    rng = np.random.default_rng(0)
    for s in [1, 2, 3, 4, 5, 7, 8, 9, 100, 1000, 1025]:
        table = Counted(np.sort(rng.choice(10 * s, s, replace=False)))
        q = rng.integers(0, 10 * s, 1)
        i = search_slices(table, q, np.array([0]), np.array([s]))
        assert i[0] == np.searchsorted(table.a, q[0])  # the search is right ...
        assert table.reads == int(np.ceil(np.log2(s))) + 1, s  # ... and reads ceil(log2 s) + 1 entries
