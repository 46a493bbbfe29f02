"""Figure 1 of the paper drawn by code: the parts the paper draws, the book's shapes, a width a phone shows."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from nplm_edu.analysis.figure1 import draw_architecture  # noqa: E402


def texts(fig):
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def dashed_arrows(fig):
    return [p for p in fig.axes[0].patches if p.get_linestyle() not in ("-", "solid")
            and type(p).__name__ == "FancyArrowPatch"]


def test_the_parts_and_shapes(tmp_path):
    fig = draw_architecture(n=5)
    t = texts(fig)
    for part in ("C(w_{t-1})", "C(w_{t-n+1})", "\\tanh(d + Hx)", "softmax", "(n-1)m", "h \\times (n-1)m",
                 "|V| \\times h", "|V| \\times m", "direct", "y = b + Wx + Ua"):
        assert part in t, part
    assert len(dashed_arrows(fig)) == 2  # the direct connections, dashed
    fig.savefig(tmp_path / "f.png", dpi=100)
    assert fig.get_size_inches()[0] * 100 <= 342 / 0.65  # a phone's 342 px column shows it at 65% or more
    plt.close(fig)


def test_without_direct_connections_and_short_contexts():
    fig = draw_architecture(n=3, direct=False)
    t = texts(fig)
    assert "C(w_{t-2})" in t and "C(w_{t-1})" in t and "..." not in t
    assert "Wx" not in t and "direct" not in t
    assert not dashed_arrows(fig)
    plt.close(fig)
    with pytest.raises(ValueError):
        draw_architecture(n=1)
