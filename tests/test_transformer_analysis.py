"""What a Transformer does with its window (nplm_edu.analysis.transformer): the counted cost per
word, the measured one, attention maps."""

import numpy as np
import pytest

from nplm_edu.analysis.transformer import attention_maps, multiply_adds_per_word, time_per_word, top_reads
from nplm_edu.models.transformer import Transformer, TransformerConfig

CFG = TransformerConfig(V=50, n_ctx=8, m=16, heads=2, layers=2, d_ff=32, seed=0)


def test_only_attention_grows_with_the_window():
    a, b = multiply_adds_per_word(CFG, 8), multiply_adds_per_word(CFG, 16)
    assert b["attention"] == 2 * a["attention"] == 2 * 2 * 2 * 16 * 16 // 2
    assert all(a[k] == b[k] for k in ("projections", "mlp", "output"))
    assert a["output"] == 50 * 16 and a["total"] == sum(v for k, v in a.items() if k != "total")


def test_time_per_word_has_a_row_per_window_length():
    rows = time_per_word(CFG, contexts=(2, 8), words=32, rounds=1)
    assert [r["n_ctx"] for r in rows] == [2, 8] and [r["K"] for r in rows] == [16, 4]
    for r in rows:
        assert r["words"] == 32 and r["update_seconds"] > 0
        assert 0 < r["attention_us_per_word"] and r["us_per_word"] == pytest.approx(1e6 * r["update_seconds"] / 32, rel=1e-3)


def test_attention_maps_are_causal_rows_summing_to_one():
    model = Transformer(CFG)
    maps = attention_maps(model, [3, 1, 4, 1, 5])
    assert maps.shape == (2, 2, 5, 5)
    np.testing.assert_allclose(maps.sum(axis=-1), 1, atol=1e-6)
    assert np.all(np.triu(maps[0, 0], k=1) == 0) and np.all(maps > -1e-12)
    assert maps[0, 0, 0, 0] == pytest.approx(1)  # the first word reads only itself


def test_top_reads_names_the_heaviest_earlier_words():
    w = np.array([[1, 0, 0], [0.3, 0.7, 0], [0.5, 0.1, 0.4]])
    got = top_reads(w, ["a", "b", "c"], k=2)
    assert got[0] == ("a", [("a", 1.0)])
    assert got[2][0] == "c" and [x for x, _ in got[2][1]] == ["a", "c"]
