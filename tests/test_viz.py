"""Tests of nplm_edu.analysis.viz: PCA, neighbours, class agreement, snapshots and the plots (Agg backend)."""

import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from nplm_edu.analysis import viz  # noqa: E402
from nplm_edu.data.corpus import Vocabulary  # noqa: E402
from nplm_edu.errors import UserError  # noqa: E402
from nplm_edu.models.nplm import NPLM, NPLMConfig  # noqa: E402
from nplm_edu.training.trainer import TrainConfig, train  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --------------------------------------------------------------------------- PCA
def test_pca_hand_example():
    # X is already centred (mean 0). Its spread is 2 along x (values +-2) and 1 along y (+-1):
    # sum of squares 4 + 4 = 8 along x, 1 + 1 = 2 along y, so PC1 = (1, 0), PC2 = (0, 1),
    # the projection is X itself and the explained shares are 8/10 and 2/10.
    X = np.array([[2.0, 0.0], [-2.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    Z, comps, ratio = viz.pca(X, 2)
    np.testing.assert_allclose(comps, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(Z, X, atol=1e-12)
    np.testing.assert_allclose(ratio, [0.8, 0.2])


def test_pca_centres_and_matches_numpy_svd():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 6)) @ np.diag([5, 3, 1, 0.5, 0.2, 0.1]) + 7.0  # offset: must be centred
    Z, comps, ratio = viz.pca(X, 3)
    Xc = X - X.mean(axis=0)
    U, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    signs = np.sign(np.sum(comps * Vt[:3], axis=1))  # components agree with SVD up to sign
    np.testing.assert_allclose(comps, Vt[:3] * signs[:, None], atol=1e-10)
    np.testing.assert_allclose(Z, U[:, :3] * s[:3] * signs, atol=1e-10)
    np.testing.assert_allclose(comps @ comps.T, np.eye(3), atol=1e-12)  # orthonormal
    np.testing.assert_allclose(ratio, s[:3] ** 2 / np.sum(s ** 2))
    assert np.all(comps[np.arange(3), np.abs(comps).argmax(axis=1)] > 0)  # sign rule: largest loading > 0


def test_project_keeps_m2_and_uses_given_axes():
    C = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert np.array_equal(viz.project(C), C)
    D = np.arange(12.0).reshape(4, 3)
    comps = np.array([[1.0, 0, 0], [0, 0, 1.0]])
    np.testing.assert_allclose(viz.project(D, comps, mean=np.zeros(3)), D[:, [0, 2]])
    assert viz.project(np.random.default_rng(1).standard_normal((10, 5))).shape == (10, 2)


def test_pca_rejects_bad_shapes():
    with pytest.raises(UserError):
        viz.pca(np.zeros(5))
    with pytest.raises(UserError):
        viz.pca(np.zeros((3, 2)), k=3)


# --------------------------------------------------------------------------- neighbours
TABLE = np.array([
    [1.0, 0.0],   # 0
    [10.0, 0.0],  # 1: same direction as 0, far away
    [0.0, 1.1],   # 2: at right angles to 0, close to it
    [-1.0, 0.0],  # 3: opposite to 0
])


def test_nearest_neighbours_cosine_and_euclidean_hand_table():
    # From row 0: cosine 1 with row 1 (same direction), 0 with row 2, -1 with row 3.
    ids, s = viz.nearest_neighbours(TABLE, [0], k=3, metric="cosine")
    assert ids.tolist() == [[1, 2, 3]]
    np.testing.assert_allclose(s, [[1.0, 0.0, -1.0]], atol=1e-12)
    # Euclidean distances from row 0: to 2 sqrt(1 + 1.21) = 1.4866, to 3: 2, to 1: 9.
    ids, s = viz.nearest_neighbours(TABLE, [0], k=3, metric="euclidean")
    assert ids.tolist() == [[2, 3, 1]]
    np.testing.assert_allclose(-s, [[np.sqrt(2.21), 2.0, 9.0]])


def test_neighbours_by_word_excludes_the_word_itself():
    vocab = Vocabulary(["a", "b", "c", "<unk>"], [4, 3, 2, 1])
    out = viz.neighbours(TABLE, vocab, ["b", "<unk>"], k=2)
    assert [w for w, _ in out["b"]] == ["a", "c"]  # cos(b, a) = 1, cos(b, c) = 0, cos(b, <unk>) = -1
    assert [w for w, _ in out["<unk>"]] == ["c", "a"]  # cos(<unk>, c) = 0 > cos(<unk>, a) = -1 (tie a/b: a)
    with pytest.raises(UserError):
        viz.neighbours(TABLE, vocab, ["zebra"])
    with pytest.raises(UserError):
        viz.nearest_neighbours(TABLE, [0], k=4)  # only 3 other rows
    with pytest.raises(UserError):
        viz.nearest_neighbours(TABLE, [0], metric="manhattan")


def test_cosine_with_zero_row_is_zero():
    S = viz.similarity(np.array([[0.0, 0.0], [1.0, 1.0]]))
    assert np.all(np.isfinite(S)) and S[0, 1] == 0.0


# --------------------------------------------------------------------------- class agreement
def test_class_agreement_cosine_hand_example():
    C = np.array([[1.0, 0.0],    # 0  a   angle  0.0 deg
                  [0.9, 0.2],    # 1  a   angle 12.5 deg
                  [0.0, 1.0],    # 2  b   angle 90.0 deg
                  [0.1, 1.0],    # 3  b   angle 84.3 deg
                  [0.7, 0.7],    # 4  b   angle 45.0 deg
                  [1.0, 0.01]])  # 5  None (angle 0.6 deg): takes no part
    labels = ["a", "a", "b", "b", "b", None]
    # Nearest by angle among the labelled rows 0-4: 0 -> 1 (a, a), 1 -> 0 (a, a), 2 -> 3 (b, b),
    # 3 -> 2 (b, b), 4 -> 1 (32.5 deg, closer than 3 at 39.3 deg: b vs a, a miss). 4 of 5 agree.
    # (Were row 5 allowed as a neighbour, it would not change row 0's class match; it is left out.)
    assert viz.class_agreement(C, labels) == pytest.approx(0.8)


def test_class_agreement_euclidean_hand_example():
    # Points on a line at x = 0, 1, 3, 3.5, 10 with classes a, a, b, a, b.
    # Nearest: 0 -> 1 (a, a: yes), 1 -> 0 (distance 1 < 2: yes), 3 -> 3.5 (b, a: no),
    # 3.5 -> 3 (a, b: no), 10 -> 3.5 (b, a: no): 2 of 5 agree = 0.4.
    C = np.array([[0.0, 0], [1, 0], [3, 0], [3.5, 0], [10, 0]])
    assert viz.class_agreement(C, list("aabab"), metric="euclidean") == pytest.approx(0.4)


def test_class_agreement_matches_a_loop_and_chance():
    rng = np.random.default_rng(3)
    C = rng.standard_normal((30, 4))
    labels = np.array(rng.choice(["x", "y", "z", None], size=30), dtype=object)
    keep = [i for i in range(30) if labels[i] is not None]
    hits = []
    for i in keep:  # brute force: the most similar other labelled row
        best = max((j for j in keep if j != i),
                   key=lambda j: C[i] @ C[j] / np.linalg.norm(C[i]) / np.linalg.norm(C[j]))
        hits.append(labels[i] == labels[best])
    assert viz.class_agreement(C, labels) == pytest.approx(np.mean(hits))
    # chance with classes of sizes 2 and 2: each word has 1 same-class word among 3 others = 1/3
    assert viz.chance_agreement(["a", "a", "b", "b", None]) == pytest.approx(1 / 3)
    with pytest.raises(UserError):
        viz.class_agreement(C, labels[:5])


def test_class_labels_from_vocab():
    vocab = Vocabulary(["cat", "is", "<unk>"], [3, 2, 1])
    assert viz.class_labels(vocab, {"cat": "animal", "is": "aux"}).tolist() == ["animal", "aux", None]


# --------------------------------------------------------------------------- snapshots
def _tiny(seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 12, size=400).astype(np.int32)
    from nplm_edu.data.corpus import windows

    return NPLM(NPLMConfig(V=12, n=3, m=2, h=4, seed=seed)), (windows(ids, 3), None)


def test_snapshots_record_at_the_right_steps_and_copy():
    model, data = _tiny()
    snaps = viz.Snapshots()
    snaps(0, model)  # the initial table
    C0 = model.params["C"].copy()
    train(model, data, TrainConfig(epochs=5, batch=8, lr=0.5, max_updates=30), callback=snaps,
          callback_every=7, quiet=True)
    assert snaps.steps == [0, 7, 14, 21, 28]
    assert snaps.C.shape == (5, 12, 2)
    np.testing.assert_array_equal(snaps.C[0], C0)
    assert not np.array_equal(snaps.C[-1], snaps.C[1])  # copies, not views of the live table
    # the step-14 copy equals the table of a fresh run stopped after 14 updates
    again, data = _tiny()
    train(again, data, TrainConfig(epochs=5, batch=8, lr=0.5, max_updates=14), quiet=True)
    np.testing.assert_array_equal(snaps[2][1], again.params["C"])
    assert snaps[2][0] == 14


def test_snapshots_every_and_rows(tmp_path):
    model, data = _tiny()
    snaps = viz.Snapshots(rows=[3, 1], every=10)
    train(model, data, TrainConfig(epochs=5, batch=8, lr=0.5, max_updates=30), callback=snaps,
          callback_every=5, quiet=True)
    assert snaps.steps == [10, 20, 30]  # called at 5, 10, ..., 30; kept the multiples of 10
    np.testing.assert_array_equal(snaps.C[-1], model.params["C"][[3, 1]])
    snaps.save(tmp_path / "s.npz")
    back = viz.Snapshots.load(tmp_path / "s.npz")
    assert back.steps == snaps.steps and np.array_equal(back.C, snaps.C) and back.rows.tolist() == [3, 1]
    assert snaps.agreement(["a", "b"]).tolist() == [0.0, 0.0, 0.0]  # two words, different classes
    with pytest.raises(UserError):
        viz.Snapshots(every=0)


# --------------------------------------------------------------------------- plots
WORDS = ["cat", "dog", "is", "was", "room", "park"]
LABELS = ["animal", "animal", "aux", "aux", "place", "place"]


def test_plot_features_m2_and_pca_with_highlight():
    rng = np.random.default_rng(0)
    ax = viz.plot_features(rng.standard_normal((6, 2)), WORDS, LABELS, highlight="cat", k=2, title="m = 2")
    assert ax.get_title() == "m = 2" and len(ax.texts) == 6
    ax2 = viz.plot_features(rng.standard_normal((6, 5)), WORDS, None)
    assert ax2.get_xlabel() == "principal component 1"
    fig, ax3 = plt.subplots()
    assert viz.plot_features(rng.standard_normal((6, 2)), WORDS, LABELS, ax=ax3) is ax3
    with pytest.raises(UserError):
        viz.plot_features(rng.standard_normal((6, 2)), WORDS, highlight="zebra")


def test_plot_snapshots_agreement_and_explorer():
    model, data = _tiny()
    snaps = viz.Snapshots(rows=range(6))
    train(model, data, TrainConfig(epochs=5, batch=8, lr=0.5, max_updates=30), callback=snaps,
          callback_every=5, quiet=True)
    fig = viz.plot_snapshots(snaps, WORDS, LABELS)
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 4
    ax = viz.plot_agreement(snaps.steps, snaps.agreement(LABELS), chance=viz.chance_agreement(LABELS))
    assert ax.get_ylabel().startswith("nearest-neighbour")
    fig.canvas.draw()
    w = viz.explorer(snaps, WORDS, LABELS, k=2, start="dog")
    slider, picker = w.children[0].children
    assert slider.max == len(snaps) - 1 and picker.value == "dog"
    slider.value = 0  # redraws without error
    picker.value = "room"


def test_plot_learning_curves_from_dict_and_json(tmp_path):
    hist = {"epochs": [{"epoch": 1, "train_ppl": 30.0, "valid_ppl": 20.0},
                       {"epoch": 2, "train_ppl": 15.0, "valid_ppl": 14.0}]}
    ax = viz.plot_learning_curves(hist)
    assert [ln.get_label() for ln in ax.get_lines()] == ["train", "validation"]
    np.testing.assert_array_equal(ax.get_lines()[1].get_ydata(), [20.0, 14.0])
    p = tmp_path / "history.json"
    p.write_text(json.dumps(hist))
    fig, ax2 = plt.subplots()
    assert viz.plot_learning_curves(p, ax=ax2, label="m=2") is ax2
    with pytest.raises(UserError):
        viz.plot_learning_curves(tmp_path / "missing.json")
    with pytest.raises(UserError):
        viz.plot_learning_curves({"nope": []})
