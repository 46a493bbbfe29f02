"""Beyond the paper (nplm_edu.training.optim, through the one trainer): dropout gradients against finite
differences, tied embeddings, Adam against a hand-computed step, determinism, resume == uninterrupted,
the SGD rule the same on the fused and the reference path, and ``reproduce beyond --quick``."""

import json
import math
import os
import signal

import numpy as np
import pytest

from nplm_edu.errors import UserError
from nplm_edu.models.class_softmax import ClassSoftmax
from nplm_edu.models.gradcheck import gradcheck
from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.models.tree_softmax import TreeSoftmax
from nplm_edu.models.trees import Tree, huffman_merges
from nplm_edu.numerics import threads
from nplm_edu.training.optim import Adam, dropout_mask, sgd_step
from nplm_edu.training.trainer import TrainConfig, train
from test_reproduce import run, run_parser  # `reproduce` in this process
from test_train import data  # the same small structured corpus as the SGD trainer's tests

CONFIGS = [dict(h=5, direct=True), dict(h=5, direct=False), dict(h=0, direct=True)]


def make(h=5, direct=True, dtype="float64", seed=0):
    model = NPLM(NPLMConfig(V=11, n=4, m=3, h=h, direct=direct, dtype=dtype, seed=seed))
    rng = np.random.default_rng(seed + 100)
    for p in model.params.values():  # random parameters, nonzero biases too
        p[...] = 0.5 * rng.standard_normal(p.shape)
    return model


def batch(K=7, seed=1):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 11, (K, 3))
    c[0] = 3  # a word repeated in one context and in another: rows of C accumulate
    c[1, 0] = 3
    return c, rng.integers(0, 11, K)


class Masked:
    """A model whose loss_and_grads(contexts, targets) uses fixed dropout masks, for gradcheck."""

    def __init__(self, model, mask_x=None, mask_a=None):
        self.model, self.params, self.masks = model, model.params, (mask_x, mask_a)

    def loss_and_grads(self, contexts, targets):
        return self.model.loss_and_grads(contexts, targets, *self.masks)


@pytest.mark.parametrize("kw", CONFIGS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_no_dropout_gives_exactly_the_plain_gradients(kw, dtype):
    """Dropout with p = 0 draws no mask, and masks of ones leave the loss and gradients bit for bit alone."""
    model = make(dtype=dtype, **kw)
    c, t = batch()
    rng = np.random.default_rng(0)
    assert dropout_mask(rng, (7, 9), 0.0, np.dtype(dtype)) is None
    loss, grads = model.loss_and_grads(c, t)
    ones = np.ones((7, 9), dtype), np.ones((7, kw["h"]), dtype)
    loss2, grads2 = model.loss_and_grads(c, t, *ones)
    assert loss2 == loss and list(grads2) == list(model.params)
    for k in grads:
        assert grads2[k].shape == model.params[k].shape and np.array_equal(grads2[k], grads[k]), k


@pytest.mark.parametrize("kw", CONFIGS)
def test_gradient_check_with_a_fixed_dropout_mask(kw):
    model = make(**kw)
    c, t = batch()
    rng = np.random.default_rng(5)
    mx = dropout_mask(rng, (7, 9), 0.4, np.float64)
    ma = dropout_mask(rng, (7, kw["h"]), 0.5, np.float64)
    assert set(np.unique(mx)) <= {0.0, 1 / 0.6} and (mx == 0).any()
    errors = gradcheck(Masked(model, mx, ma), c, t)
    assert max(errors.values()) < 1e-6, errors
    # the masks matter: the dropped network's loss differs from the plain one
    assert model.loss_and_grads(c, t, mx, ma)[0] != model.loss_and_grads(c, t)[0]


def test_tied_embeddings_gradient_check():
    model = NPLM(NPLMConfig(V=11, n=4, m=5, h=5, direct=False, dtype="float64", seed=0))
    model.tie()
    assert model.params["U"] is model.params["C"]
    c, t = batch()
    rng = np.random.default_rng(2)
    masks = dropout_mask(rng, (7, 15), 0.3, np.float64), dropout_mask(rng, (7, 5), 0.5, np.float64)
    # perturbing C moves U too: the numerical gradient is dL/dC + dL/dU, the tied model's gradient "C"
    errors = gradcheck(Masked(model, *masks), c, t)
    assert "U" not in errors and max(errors.values()) < 1e-6, errors
    with pytest.raises(UserError, match="need h = m"):
        NPLM(NPLMConfig(V=11, n=4, m=3, h=5, direct=False)).tie()


def test_adam_one_step_by_hand():
    # beta1 0.9, beta2 0.999, eps 1e-8, lr 0.1, weight decay 0.01, t = 1, p = 2, g = 0.5:
    #   m = 0.1 * 0.5 = 0.05                    v = 0.001 * 0.25 = 0.00025
    #   m_hat = m / (1 - 0.9) = 0.5             v_hat = v / (1 - 0.999) = 0.25, sqrt = 0.5
    #   decoupled decay (C, H, U, W only): p = 2 (1 - 0.1 * 0.01) = 1.998
    #   p = 1.998 - 0.1 * 0.5 / (0.5 + 1e-8) = 1.898 + 1e-9 (approximately: 0.1 * 0.5 * 1e-8 / 0.5^2)
    # and for a bias (never decayed): 2 - 0.1 * 0.5 / (0.5 + 1e-8) = 1.9 + 1e-9
    params = {"U": np.array([2.0]), "b": np.array([2.0])}
    adam = Adam(params, 0.9, 0.999, 1e-8, weight_decay=0.01, decayed=("U",))
    adam.step(params, {"U": np.array([0.5]), "b": np.array([0.5])}, lr=0.1)
    assert np.isclose(params["U"][0], 1.998 - 0.1 * 0.5 / (0.5 + 1e-8), rtol=0, atol=1e-13)
    assert np.isclose(params["b"][0], 2.0 - 0.1 * 0.5 / (0.5 + 1e-8), rtol=0, atol=1e-13)
    assert np.isclose(adam.m["U"][0], 0.05) and np.isclose(adam.v["U"][0], 0.00025) and adam.t == 1
    # step 2 with g = -0.5: m = 0.9*0.05 - 0.05 = -0.005, v = 0.999*0.00025 + 0.00025 = 0.00049975
    #   m_hat = -0.005 / 0.19 = -0.0263158, v_hat = 0.00049975 / 0.001999 = 0.25000 -> sqrt 0.5
    adam.step(params, {"U": np.array([-0.5]), "b": np.array([-0.5])}, lr=0.1)
    m_hat, v_hat = -0.005 / (1 - 0.81), 0.00049975 / (1 - 0.999 ** 2)
    b = 2.0 - 0.1 * 0.5 / (0.5 + 1e-8)
    assert np.isclose(params["b"][0], b - 0.1 * m_hat / (np.sqrt(v_hat) + 1e-8), rtol=0, atol=1e-12)




def fit(epochs, out=None, resume=False, **kw):
    """Adam with dropout on x and a, lr decaying per epoch (beyond.json's Adam trials, smaller)."""
    model = NPLM(NPLMConfig(V=20, n=3, m=4, h=8, direct=False, seed=1))
    cfg = TrainConfig(**{**dict(epochs=epochs, batch=32, lr=0.01, decay_rate=0.0, lr_decay=0.8, weight_decay=0.01,
                                patience=epochs, optimizer="adam", dropout_x=0.2, dropout_a=0.3), **kw})
    return model, train(model, data(), cfg, out_dir=out, resume=resume, quiet=True)


def test_training_learns_and_is_deterministic():
    a, ha = fit(3)
    b, hb = fit(3)
    for k in a.params:
        assert np.array_equal(a.params[k], b.params[k]), k
    assert [e["valid_ppl"] for e in ha["epochs"]] == [e["valid_ppl"] for e in hb["epochs"]]
    v = [e["valid_ppl"] for e in ha["epochs"]]
    assert v[-1] < v[0] < 20 and [e["lr"] for e in ha["epochs"]] == pytest.approx([0.01, 0.008, 0.0064])
    c, _ = fit(3, seed=2)
    assert not np.array_equal(a.params["H"], c.params["H"])  # the seed decides the masks and the order


def test_resume_after_ctrl_c_mid_epoch_equals_uninterrupted(tmp_path, monkeypatch):
    full, hfull = fit(2, tmp_path / "full")
    calls = {"n": 0}
    original = Adam.step

    def interrupted(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 25:  # in the middle of epoch 2 (19 updates per epoch)
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, *a, **k)

    monkeypatch.setattr(Adam, "step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fit(2, tmp_path / "cut")
    monkeypatch.setattr(Adam, "step", original)
    resumed, hres = fit(2, tmp_path / "cut", resume=True)
    for k in full.params:
        assert np.array_equal(full.params[k], resumed.params[k]), k
    assert hres["epochs"] == [dict(e, seconds=r["seconds"], cpu_seconds=r["cpu_seconds"])
                              for e, r in zip(hfull["epochs"], hres["epochs"])]
    with np.load(tmp_path / "cut" / "checkpoint.npz", allow_pickle=False) as z:
        assert "adam_m/U" in z.files and "adam_v/U" in z.files and "best/U" in z.files
    with pytest.raises(UserError, match="cannot resume with dropout_a"):
        fit(3, tmp_path / "cut", resume=True, dropout_a=0.5)


@pytest.fixture
def two_threads(monkeypatch):
    """Every parameter split between two threads, however small (numerics.threads)."""
    before = threads._SET["threads"]
    monkeypatch.setattr(threads, "MIN_ROWWISE", 0)
    threads.set_threads(2)
    yield
    threads.set_threads(before)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sgd_steps_fast_path_is_the_plain_rule(dtype, two_threads):
    """sgd_step(fast=True), in place on the threads (every parameter split between two), gives the plain
    rule's numbers bit for bit: a dense and a row gradient, weight decay or none, a bias."""
    rng = np.random.default_rng(4)
    params = {k: rng.standard_normal(shape).astype(dtype) for k, shape in (("C", (40, 6)), ("U", (40, 9)), ("b", (40,)))}
    rows = {"C": np.array([2, 3, 17, 39])}
    grads = {"C": rng.standard_normal((4, 6)).astype(dtype), "U": rng.standard_normal((40, 9)).astype(dtype),
             "b": rng.standard_normal(40).astype(dtype)}
    for wd in (0.0, 0.05):
        plain, fast = ({k: p.copy() for k, p in params.items()} for _ in range(2))
        sgd_step(plain, {k: g.copy() for k, g in grads.items()}, 0.3, wd, ("C", "U"), rows)
        sgd_step(fast, {k: g.copy() for k, g in grads.items()}, 0.3, wd, ("C", "U"), rows, fast=True)
        for k in params:
            assert plain[k].tobytes() == fast[k].tobytes(), (k, wd)
        untouched = np.setdiff1d(np.arange(40), rows["C"])
        want = params["C"][untouched] * (1 - 0.3 * wd)  # rows without a gradient: only decayed
        assert np.array_equal(plain["C"][untouched], want.astype(dtype))


@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
@pytest.mark.parametrize("output", ["class", "tree"])
def test_both_sgd_paths_decay_the_models_list_with_the_output_weights(output, weight_decay, two_threads):
    """An NPLM with a class-factored or a tree output layer: model.decayed names the output layer's
    weights (U and U_class, or U_node); on the same gradients (dL/dC dense, or only the batch's rows of
    it) the plain rule and the threaded fast path give the same parameters in float64, and beyond the
    gradient step every decayed array shrinks by lr wd p, the biases (d, b, b_class, b_node) not at all."""
    V, h, lr = 20, 5, 0.3
    layer = (ClassSoftmax(V, h, np.arange(V) % 4) if output == "class"
             else TreeSoftmax(V, h, Tree(huffman_merges(np.arange(1, V + 1)))))
    model = NPLM(NPLMConfig(V=V, n=4, m=3, h=h, direct=False, dtype="float64", seed=0), output=layer)
    rng = np.random.default_rng(7)
    for p in model.params.values():  # random parameters, nonzero biases too
        p[...] = 0.5 * rng.standard_normal(p.shape)
    weights = {"class": {"U", "U_class"}, "tree": {"U_node"}}[output]
    assert weights | {"C", "H"} == set(model.decayed)  # the output layer's weights, none of the biases
    c, t = rng.integers(0, V, (4, 3)), rng.integers(0, V, 4)
    _, g = model.loss_and_grads(c, t)
    ids = np.unique(c)  # the batch's words: dL/dC is zero elsewhere
    assert len(ids) < V and not g["C"][np.setdiff1d(np.arange(V), ids)].any()
    for rows, grads in (({}, g), ({"C": ids}, {**g, "C": g["C"][ids]})):
        def step(wd, fast=False):
            params = {k: p.copy() for k, p in model.params.items()}
            sgd_step(params, {k: x.copy() for k, x in grads.items()}, lr, wd, model.decayed, rows, fast=fast)
            return params
        plain, fast, undecayed = step(weight_decay), step(weight_decay, fast=True), step(0.0)
        for k, p in model.params.items():
            assert fast[k].tobytes() == plain[k].tobytes(), k  # bit for bit
            shrink = lr * weight_decay * p if k in model.decayed else np.zeros_like(p)
            np.testing.assert_allclose(undecayed[k] - plain[k], shrink, rtol=0, atol=1e-12, err_msg=k)
        assert np.abs(plain["H"] - model.params["H"]).max() > 1e-3  # the step did move the parameters


@pytest.mark.parametrize("direct", [True, False])
def test_sgd_is_the_same_rule_on_the_fused_and_the_reference_path(direct):
    """The paper's SGD without dropout runs the fused sgd_update (FusedNPLM); dropout, Adam and tied U
    go through loss_and_grads + sgd_step (the reference NPLM has no sgd_update, so it always does):
    the same schedule (r and a per-epoch decay), order and rule, so the same run up to rounding."""
    from nplm_edu.numerics.fused import FusedNPLM

    cfg = TrainConfig(epochs=2, batch=32, lr=0.5, decay_rate=1e-3, lr_decay=0.8, weight_decay=1e-3, patience=2)
    net = NPLMConfig(V=20, n=3, m=4, h=8, direct=direct, dtype="float64", seed=1)
    fused, ref = FusedNPLM(net), NPLM(net)
    hf, hr = train(fused, data(), cfg, quiet=True), train(ref, data(), cfg, quiet=True)
    for k in ref.params:
        np.testing.assert_allclose(fused.params[k], ref.params[k], rtol=1e-10, atol=1e-13, err_msg=k)
    assert [e["valid_ppl"] for e in hf["epochs"]] == pytest.approx([e["valid_ppl"] for e in hr["epochs"]], rel=1e-10)
    assert [e["lr"] for e in hf["epochs"]] == [e["lr"] for e in hr["epochs"]]
    assert np.abs(ref.params["U"] - NPLM(net).params["U"]).max() > 1e-3  # the runs did move the parameters


TINY = ["reproduce", "beyond", "--corpus", "synthetic", "--synthetic-tokens", "8000", "--quick", "--quiet",
        "--h", "16", "--m", "8", "--lr", "0.01"]
DROPOUT = ["--dropout-x", "0.25", "--dropout-a", "0.25"]


def test_reproduce_beyond_quick(tmp_path):
    out = tmp_path / "b.json"
    assert run([*TINY, "--out", str(out), "--runs-dir", str(tmp_path / "runs"), *DROPOUT,
                "--optimizer", "adam"]) == 0
    doc = json.loads(out.read_text())
    for key in ("model", "training", "history", "train", "valid", "test", "mixtures", "mix_weight_em", "trigram",
                "test_over_kn5", "kn5_test", "seconds", "seconds_training", "seconds_evaluation", "command", "commit",
                "machine",
                "epochs_run", "best_epoch"):
        assert key in doc, key
    t = doc["training"]
    assert (t["lr"], t["batch"], t["weight_decay"], t["dropout_x"], t["dropout_a"]) == (0.01, 128, 1e-4, 0.25, 0.25)
    assert doc["model"]["h"] == 16 and doc["epochs_run"] == len(doc["history"]) == 2 and doc["quick"]
    nums = [doc["train"], doc["valid"], doc["test"], doc["mix_weight_em"]]
    nums += [v[s] for v in doc["mixtures"].values() for s in ("valid", "test")]
    assert all(math.isfinite(x) for x in nums) and 0 <= doc["mix_weight_em"] <= 1
    # the EM weight is fitted on validation: at least as good there as 0.5
    assert doc["mixtures"]["em"]["valid"] <= doc["mixtures"]["0.5"]["valid"] + 1e-6
    assert doc["test_over_kn5"] is None  # no KN 5-gram of this corpus to compare with
    # mixed with a Kneser-Ney 5-gram of the same training ids: its EM weight is at least as good on
    # validation as either model alone (lam = 0 or 1 are among the weights EM can reach)
    kn = doc["mixtures"]["kn5_em"]
    assert 0 <= kn["weight"] <= 1 and kn["valid"] <= min(doc["valid"], kn["alone_valid"]) + 1e-6
    assert len(doc["mixtures"]["kn5_per_bin"]["weights"]) == len(doc["mixtures"]["per_bin"]["weights"])
    # the model reported is the one best on validation, among the network and every mixture
    valids = {"network": doc["valid"], **{f"mix_{k}": v["valid"] for k, v in doc["mixtures"].items()}}
    assert doc["chosen_on_valid"] == min(valids, key=valids.get)
    # the description is made from the settings, not written once for all runs
    assert "Adam" in doc["what"] and "dropout 0.25 on x and 0.25 on a" in doc["what"] and "h = 16" in doc["what"]
    # the same command again: resumes from the finished checkpoint, trains nothing more, same numbers
    assert run([*TINY, "--out", str(out), "--runs-dir", str(tmp_path / "runs"), *DROPOUT,
                "--optimizer", "adam"]) == 0
    doc2 = json.loads(out.read_text())
    assert doc2["resumed"] and doc2["history"] == doc["history"]
    assert (doc2["train"], doc2["valid"], doc2["test"]) == (doc["train"], doc["valid"], doc["test"])


@pytest.mark.parametrize("opt, says", [(["--dropout-x", "1"], "--dropout-x must lie in [0, 1)"),
                                       (["--h", "0"], "--h must be at least 1"),
                                       (["--lr", "-1"], "lr must be a finite number"),
                                       (["--beta2", "1"], "beta2 must lie in [0, 1)")])
def test_reproduce_beyond_bad_options(tmp_path, capsys, opt, says):
    from nplm_edu.cli import main

    assert main([*TINY, "--out", str(tmp_path / "x.json"), "--runs-dir", str(tmp_path / "r"), *opt]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and says in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def test_table1_keeps_its_own_defaults():
    args = run_parser().parse_args(["reproduce", "table1"])
    assert (args.lr, args.batch, args.weight_decay) == (1.0, 128, 1e-4) and isinstance(args.batch, int)
    assert json.dumps([args.lr, args.batch]) == "[1.0, 128]"
