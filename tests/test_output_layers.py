"""The output layers after 2003 (class-factored, tree, importance sampling, NCE): hand-derived gradients
against central differences in float64, probabilities summing to 1 over |V|, the fast sparse SGD step
equal to the reference rule, and bad input as one UserError."""

import numpy as np
import pytest

from nplm_edu.errors import UserError
from nplm_edu.models.class_softmax import ClassSoftmax, check_classes, default_n_classes, frequency_classes
from nplm_edu.models.gradcheck import gradcheck
from nplm_edu.models.ngram.classes import class_bigram_objective
from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.models.adaptive_softmax import AdaptiveSoftmax
from nplm_edu.models.differentiated_softmax import DifferentiatedSoftmax
from nplm_edu.models.sampled_softmax import (AdaptiveImportanceSampling, ESSImportanceSampling, ImportanceSampling,
                                             ImportanceSamplingWithTarget, NCESoftmax, effective_sample_size)
from nplm_edu.models.sparse_output import train_counts
from nplm_edu.models.tree_softmax import TreeSoftmax
from nplm_edu.models.trees import Tree, cluster_merges, huffman_merges, merge_cost
from nplm_edu.numerics.sparse import SparseNPLM
from nplm_edu.training.optim import sgd_step

V, H = 13, 4
RNG = np.random.default_rng(0)
COUNTS = RNG.integers(0, 50, V)
TRAIN = RNG.integers(0, V, 500)


def layers():
    return {
        "class-frequency": ClassSoftmax(V, H, frequency_classes(COUNTS, 4)),
        "class-given": ClassSoftmax(V, H, np.array([3, 0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 0])),
        "tree-huffman": TreeSoftmax(V, H, Tree(huffman_merges(COUNTS))),
        "tree-cluster": TreeSoftmax(V, H, Tree(cluster_merges(TRAIN, frequency_classes(COUNTS, 4), COUNTS))),
        "is": ImportanceSampling(V, H, COUNTS, 5, seed=1),
        "is-adaptive": AdaptiveImportanceSampling(V, H, COUNTS, 5, seed=1),
        "is-target": ImportanceSamplingWithTarget(V, H, COUNTS, 5, seed=1),
        "nce": NCESoftmax(V, H, COUNTS, 5, seed=1),
        "is-ess": ESSImportanceSampling(V, H, COUNTS, 5, seed=1, ess_min=4.0, k_max=23),
        "differentiated": DifferentiatedSoftmax(V, H, [4, 9], [2, 1, 1], COUNTS),
        "adaptive": AdaptiveSoftmax(V, H, [4, 9], COUNTS, div=2),
    }


def config(**kw):
    return NPLMConfig(**{**dict(V=V, n=4, m=3, h=H, direct=False, dtype="float64", seed=1), **kw})


def model_and_batch(layer, seed=0):
    rng = np.random.default_rng(seed)
    model = NPLM(config(), output=layer)
    for k, p in model.params.items():  # away from the initial values, so every term matters
        if k not in getattr(layer, "state", ()):
            p[...] = 0.5 * rng.standard_normal(p.shape)
    c, t = rng.integers(0, V, (8, 3)), rng.integers(0, V, 8)
    t[1] = t[0]  # a repeated target
    c[2, 0] = c[2, 2]  # a word twice in one context
    return model, c, t


@pytest.mark.parametrize("name", list(layers()))
def test_gradients_match_central_differences(name):
    layer = layers()[name]
    if hasattr(layer, "fixed_samples"):
        layer.fixed_samples = np.array([1, 3, 3, 7, 12])  # the same samples in every evaluation of the loss
    model, c, t = model_and_batch(layer)
    errors = gradcheck(model, c, t, max_entries=400)
    assert set(errors) == {k for k in model.params if k not in getattr(layer, "state", ())}
    for k, err in errors.items():
        assert err < 1e-7, (name, k, err)


@pytest.mark.parametrize("name", list(layers()))
def test_probabilities_sum_to_one_and_log_prob_agrees(name):
    model, c, t = model_and_batch(layers()[name], seed=3)
    lp = model.log_probs(c)  # (K, |V|)
    assert lp.shape == (8, V)
    assert np.allclose(np.exp(lp).sum(axis=1), 1.0, atol=1e-12)  # every context
    assert np.allclose(model.log_prob(c, t), lp[np.arange(8), t], atol=1e-12)


def test_a_wrong_gradient_is_caught():
    layer = layers()["tree-huffman"]
    model, c, t = model_and_batch(layer)
    good = layer.backward_sparse

    def wrong(params, cache):  # forgets the sign of the step: left and right swapped in dL/dz
        cache = dict(cache, signs=np.abs(cache["signs"]))
        return good(params, cache)

    layer.backward_sparse = wrong
    assert gradcheck(model, c, t)["U_node"] > 1e-3


@pytest.mark.parametrize("name", list(layers()))
def test_sparse_sgd_step_equals_the_reference_rule(name):
    """The fast step (lazy weight decay, only the rows used) against p <- p - lr (g + wd p) on the
    reference gradient, six updates in float64 (the decay scales are pending in between)."""
    ref, fast = NPLM(config(), output=layers()[name]), SparseNPLM(config(), output=layers()[name])
    rng = np.random.default_rng(5)
    assert ref.decayed == fast.decayed  # the model says which arrays decay, for both paths
    for _ in range(6):
        c, t = rng.integers(0, V, (7, 3)), rng.integers(0, V, 7)
        loss, g = ref.loss_and_grads(c, t)
        sgd_step(ref.params, g, 0.3, 0.05, ref.decayed)
        assert fast.sgd_update(c, t, 0.3, 0.05) == pytest.approx(loss, abs=1e-12)
    lazy = layers()[name].lazy_decay  # else the output weights' decay is applied at every step
    assert fast.params["lazy_scale"][0] < 1 and (fast.params["lazy_scale"][1] < 1) == lazy  # pending decay
    fast.fold()
    assert (fast.params["lazy_scale"] == 1).all()
    for k in ref.params:
        np.testing.assert_allclose(fast.params[k], ref.params[k], rtol=0, atol=1e-13, err_msg=k)


@pytest.mark.parametrize("name", list(layers()))
def test_every_weight_matrix_is_decayed_and_no_bias(name):
    """model.decayed, which every trainer's rule reads, names every weight matrix of the network and of
    its output layer (class, node, sampled weights too) and no bias or sampler state."""
    from nplm_edu.models.rnn import ElmanRNN, RecurrentConfig

    for model in (NPLM(config(), output=layers()[name]),
                  ElmanRNN(RecurrentConfig(V=V, cell="rnn", m=3, h=H), output=layers()[name])):
        state = getattr(model.output, "state", ())
        matrices = {k for k, p in model.params.items() if p.ndim == 2 and k not in state}
        assert set(model.decayed) == matrices, (name, model.decayed)


def test_sampled_layers_evaluate_exactly_like_the_full_softmax():
    from nplm_edu.models.output import FullSoftmax

    full = NPLM(config(), output=FullSoftmax(V, {"U": H}))
    nce = NPLM(config(), output=NCESoftmax(V, H, COUNTS, 5))
    for k in full.params:  # same initial values from the same seed, but NCE's biases start at log Q
        assert np.array_equal(full.params[k], nce.params[k]) == (k != "b"), k
    assert np.isclose(np.exp(nce.params["b"]).sum(), 1.0)
    full.params["b"][:] = RNG.standard_normal(V)
    nce.params["b"][:] = full.params["b"]
    c, t = RNG.integers(0, V, (6, 3)), RNG.integers(0, V, 6)
    assert np.allclose(full.log_prob(c, t), nce.log_prob(c, t), atol=1e-12)
    inputs = nce.forward(c)["inputs"]
    logZ = nce.output.log_normalizer(nce.params, inputs)
    y = nce.output.log_prob_unnormalized(nce.params, inputs, t)
    assert np.allclose(y - logZ, nce.log_prob(c, t))


def test_samples_follow_the_seed_and_the_update_count():
    a, b = (ImportanceSampling(V, H, COUNTS, 50, seed=4) for _ in range(2))
    pa, pb = a.init_params(np.random.default_rng(0), np.float32), b.init_params(np.random.default_rng(0), np.float32)
    s1, s2 = a.sample(pa)[0], a.sample(pa)[0]
    assert not np.array_equal(s1, s2) and np.array_equal(b.sample(pb)[0], s1)
    pb["draws"][0] = 1  # a resumed run continues the sequence
    assert np.array_equal(b.sample(pb)[0], s2)
    big = ImportanceSampling(V, H, COUNTS, 200_000, seed=0)
    freq = np.bincount(big.sample(big.init_params(np.random.default_rng(0), np.float32))[0], minlength=V) / 200_000
    assert np.allclose(freq, big.unigram, atol=0.005)  # add-one unigram


def test_adaptive_proposal_moves_towards_the_network_and_stays_a_distribution():
    layer = AdaptiveImportanceSampling(V, H, COUNTS, 20, seed=0)
    model = SparseNPLM(config(dtype="float32"), output=layer)
    rng = np.random.default_rng(0)
    before = model.params["Q_adapt"].copy()
    for _ in range(30):
        model.sgd_update(rng.integers(0, V, (16, 3)), rng.integers(0, V, 16), 0.1, 0.0)
    Q = model.params["Q_adapt"]
    assert not np.allclose(Q, before) and np.isclose(Q.sum(), 1.0) and Q.min() > 0
    assert np.isclose(layer.proposal(model.params).sum(), 1.0)


def test_effective_sample_size_in_float64():
    # r = 1, 2, 3: (1 + 2 + 3)^2 / (1 + 4 + 9) = 36 / 14; equal weights: k; one weight alone: 1
    logr = np.log([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0], [1.0, 1e-300, 1e-300]])
    np.testing.assert_allclose(effective_sample_size(logr), [36 / 14, 3.0, 1.0], rtol=1e-15)
    # shifted by 1000 (exp would overflow) and by -1000 (it would underflow to 0/0): the same ESS, up to the
    # rounding of log r + 1000 (1000 eps, about 2e-13)
    np.testing.assert_allclose(effective_sample_size(logr[:2] + 1000.0), [36 / 14, 3.0], rtol=1e-12)
    np.testing.assert_allclose(effective_sample_size(logr[:2] - 1000.0), [36 / 14, 3.0], rtol=1e-12)
    big = np.random.default_rng(0).standard_normal((4, 50))  # against the definition, in exact float64 sums
    r = np.exp(big)
    np.testing.assert_allclose(effective_sample_size(big), r.sum(1) ** 2 / (r * r).sum(1), rtol=1e-13)


def test_ess_sampling_grows_the_sample_until_the_threshold_or_the_cap():
    rng = np.random.default_rng(0)
    c, t = rng.integers(0, V, (16, 3)), rng.integers(0, V, 16)
    for ess_min, k_max in ((1.0, 40), (6.0, 23), (1e9, 23)):  # ESS <= k: 6 needs a second block at least
        layer = ESSImportanceSampling(V, H, COUNTS, 5, seed=0, ess_min=ess_min, k_max=k_max)
        model = SparseNPLM(config(dtype="float64"), output=layer)
        model.sgd_update(c, t, 0.1, 0.0)
        (k,) = layer.k_used
        assert k % 5 == 0 or k == k_max
        if ess_min == 1.0:
            assert k == 5  # any sample has ESS >= 1: one block
        elif ess_min > 1e8:
            assert k == 23  # never reached: capped at k_max, the last block cut
        else:
            assert 10 <= k <= 23
    for bad in (dict(ess_min=0.5), dict(k_max=4), dict(k_max=True)):
        with pytest.raises(UserError, match=next(iter(bad))):
            ESSImportanceSampling(V, H, COUNTS, 5, **bad)


# --------------------------------------------------------------------------- classes and trees
def test_frequency_binning_gives_exactly_the_classes_asked_with_balanced_mass():
    counts = np.floor(1e5 / np.arange(1, 2001))  # Zipf
    labels = frequency_classes(counts, 45)
    assert labels.max() == 44 and len(np.unique(labels)) == 45
    mass = np.bincount(labels, weights=counts) / counts.sum()
    assert mass[5:].max() < 2.5 / 45  # past the few words that fill a class alone: about 1/45 each
    assert (np.diff(labels[np.argsort(-counts, kind="stable")]) >= 0).all()  # frequent words first
    assert frequency_classes(counts[:7], 7).tolist() == list(range(7))
    assert default_n_classes(17_907) == 134


def test_huffman_tree_paths_and_depth():
    counts = np.floor(1e4 / np.arange(1, 301))
    tree = Tree(huffman_merges(counts))
    p = counts / counts.sum()
    entropy = -(p * np.log2(p)).sum()
    assert entropy <= tree.mean_depth(counts) < entropy + 1  # Huffman's bound
    assert tree.depth[0] < tree.depth[-1]  # frequent words near the root
    # the signs of a path with 0 padding, and Kraft's equality for a full binary tree
    assert ((tree.signs != 0).sum(1) == tree.depth).all()
    assert np.isclose((2.0 ** -tree.depth).sum(), 1.0)


def test_merge_cost_equals_the_change_of_the_class_bigram_objective():
    rng = np.random.default_rng(2)
    M = rng.integers(0, 20, (5, 5)).astype(float)
    cost = merge_cost(M)
    for i in range(5):
        for j in range(i + 1, 5):
            keep = [k for k in range(5) if k not in (i, j)]
            merged = np.zeros((4, 4))
            idx = {k: n for n, k in enumerate(keep)}
            for g in range(5):
                for h in range(5):
                    merged[idx.get(g, 3), idx.get(h, 3)] += M[g, h]
            assert cost[i, j] == pytest.approx(class_bigram_objective(M) - class_bigram_objective(merged), abs=1e-9)
    assert np.isinf(cost[0, 0])


def test_cluster_tree_keeps_each_class_under_one_node():
    labels = frequency_classes(COUNTS, 4)
    merges = cluster_merges(TRAIN, labels, COUNTS)
    Tree(merges, V)  # a valid tree over the vocabulary
    below = [{w} for w in range(V)]  # the words under each node
    for l, r in merges:
        below.append(below[l] | below[r])
    for c in range(4):  # some node has exactly the class's words under it
        assert set(np.flatnonzero(labels == c).tolist()) in below


def test_train_counts_only_count_the_training_set():
    assert train_counts(np.array([0, 2, 2]), 4).tolist() == [1, 0, 2, 0]


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("make, message", [
    (lambda: frequency_classes(COUNTS, 0), "between 1 and |V|"),
    (lambda: frequency_classes(COUNTS, V + 1), "between 1 and |V|"),
    (lambda: frequency_classes(COUNTS, 2.5), "between 1 and |V|"),
    (lambda: ClassSoftmax(V, H, np.zeros(V - 1, int)), "each of the |V| = 13 words"),
    (lambda: ClassSoftmax(V, H, -np.ones(V, int)), ">= 0"),
    (lambda: ImportanceSampling(V, H, COUNTS, 0), "k must be"),
    (lambda: NCESoftmax(V, H, COUNTS, -3), "k must be"),
    (lambda: NCESoftmax(V, H, COUNTS[:-1], 5), "one entry per word"),
    (lambda: Tree(np.array([[0, 1], [1, 2]]), 3), "word 1 is reached 2 times"),
    (lambda: Tree(np.array([[0, 3], [1, 2]]), 3), "only join earlier nodes"),
    (lambda: Tree(huffman_merges(COUNTS)[:-1], V), "needs 12 merges"),
    (lambda: TreeSoftmax(V + 1, H, Tree(huffman_merges(COUNTS))), "leaves"),
    (lambda: SparseNPLM(config(direct=True), ClassSoftmax(V, H, frequency_classes(COUNTS, 3))), "direct"),
])
def test_bad_input_is_one_user_error(make, message):
    with pytest.raises(UserError, match=None) as e:
        make()
    assert message in str(e.value) and "\n" not in str(e.value)


def test_bad_targets_and_direct_inputs():
    model = NPLM(config(), output=layers()["class-frequency"])
    with pytest.raises(UserError):
        model.output.loss(model.params, {"U": np.zeros((2, H)), "W": np.zeros((2, 9))}, np.array([0, 1]))
    with pytest.raises(UserError):
        model.output.log_prob(model.params, {"U": np.zeros((2, H))}, np.array([0, V]))
    assert check_classes(np.array([5, 5, 9]), 3).tolist() == [0, 0, 1]  # gaps closed: no empty class


# --------------------------------------------------------------------------- the energy network (section 5)
def test_energy_network_gradients_probabilities_and_training():
    from nplm_edu.models.energy import EnergyConfig, EnergyNPLM
    from nplm_edu.training.backends import SerialBackend
    from nplm_edu.training.trainer import TrainConfig

    model = EnergyNPLM(EnergyConfig(V=11, n=4, m=3, h=5, dtype="float64", seed=2), chunk=3)  # chunks of 3 examples
    rng = np.random.default_rng(0)
    for p in model.params.values():
        p[...] = 0.5 * rng.standard_normal(p.shape)
    c, t = rng.integers(0, 11, (7, 3)), rng.integers(0, 11, 7)
    c[0, 0] = c[0, 1]
    for name, err in gradcheck(model, c, t, max_entries=300).items():
        assert err < 1e-7, (name, err)
    lp = model.log_probs(c)
    assert np.allclose(np.exp(lp).sum(axis=1), 1.0) and np.allclose(model.log_prob(c, t), lp[np.arange(7), t])
    backend = SerialBackend(model, TrainConfig(lr=0.5, weight_decay=1e-4))  # the one SGD rule
    loss0 = backend.update(c, t, 0.5)
    for _ in range(20):
        loss = backend.update(c, t, 0.5)
    assert loss < loss0  # it learns
    with pytest.raises(UserError):
        EnergyNPLM(EnergyConfig(V=1))


def test_importance_sampling_with_the_target_is_a_cross_entropy():
    """Without the target among the candidates the IS loss has no lower bound (a score that only the
    target term pushes up); with it, the loss is -log of a probability: never below 0."""
    layer = ImportanceSamplingWithTarget(V, H, COUNTS, 5, seed=1)
    layer.fixed_samples = np.array([1, 3, 3, 7, 12])
    model, c, t = model_and_batch(layer)
    t[:] = 5  # a word never sampled ...
    model.params["b"][5] = 50.0  # ... with a huge score
    loss, _ = model.output.loss(model.params, model.forward(c)["inputs"], t)
    assert loss >= 0
    plain = ImportanceSampling(V, H, COUNTS, 5, seed=1)
    plain.fixed_samples = layer.fixed_samples
    loss_is, _ = plain.loss(model.params, model.forward(c)["inputs"], t)
    assert loss_is < -40  # the plain estimate of Z misses the target: -y_w dominates
