"""Learning LightRNN's table (models.lightrnn_table): the costs of a slot are the loss the word would
have there; the greedy assignment on candidates against the exact minimum-cost assignment (the
package's Hungarian solver, itself checked against every permutation) on a small vocabulary; a reassignment on a trained
network lowers the cost and the training loss; what the table puts together."""

import numpy as np
import pytest

from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.models.lightrnn_table import assign_exact, assign_greedy, hungarian, reassign, slot_costs, table_rows
from nplm_edu.models.lightrnn import LightOutput
from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.training.trainer import TrainConfig, train

from test_lightrnn import light_nplm


def test_the_hungarian_solver_is_exact_on_small_problems():
    from itertools import permutations

    rng = np.random.default_rng(0)
    for _ in range(5):
        cost = rng.random((4, 6))
        best = min(sum(cost[i, p[i]] for i in range(4)) for p in permutations(range(6), 4))
        assert np.isclose(cost[np.arange(4), hungarian(cost)].sum(), best)


@pytest.fixture(scope="module")
def trained():
    corpus = load_corpus("synthetic", synthetic_tokens=6_000, seed=3)
    model = light_nplm(corpus)
    train(model, corpus, TrainConfig(epochs=2, batch=16, lr=0.1, seed=2), quiet=True)
    return corpus, model, corpus.windows("train", 3)


def test_the_costs_are_the_loss_of_the_current_table(trained):
    corpus, model, (c, t) = trained
    costs = slot_costs(model, c, t, k=3)
    slot = model.params["slot"].astype(np.int64)
    assert costs.rows.shape == (corpus.V, 4) and np.array_equal(costs.rows[:, 0], slot // costs.C_t)
    # the costs are over all R and C_t places (no mask): at least the loss, equal when the table is full
    assert costs.total(slot) >= -model.log_prob(c, t).sum() - 1e-6
    assert costs.total(slot) < -model.log_prob(c, t).sum() * 1.05


def test_greedy_against_the_exact_assignment(trained):
    corpus, model, (c, t) = trained
    costs = slot_costs(model, c, t, k=5)
    slot = model.params["slot"].astype(np.int64)
    S = costs.Lr.shape[1] * costs.C_t
    full = costs(np.arange(corpus.V)[:, None], np.arange(S)[None, :])  # (|V|, R C_t)
    assert np.array_equal(assign_exact(costs), hungarian(full))
    exact, now = costs.total(assign_exact(costs)), costs.total(slot)
    for k in (3, 5):
        greedy = costs.total(assign_greedy(costs, slot, k))
        assert exact <= greedy + 1e-9 and greedy < now
        assert (greedy - exact) < 0.35 * (now - exact), (k, now, greedy, exact)  # most of the gain (76% and 69%)
    new = assign_greedy(costs, slot, 5)
    assert len(np.unique(new)) == corpus.V and new.max() < S
    with pytest.raises(UserError, match="at least 1"):
        assign_greedy(costs, slot, 0)


def test_reassign_lowers_the_loss_and_lists_rows():
    """With the input table C (the costs ignore only the input side) the measured loss falls with the cost."""
    corpus = load_corpus("synthetic", synthetic_tokens=6_000, seed=3)
    model = NPLM(NPLMConfig(V=corpus.V, n=3, m=8, h=16, direct=False, seed=1), output=LightOutput(corpus.V, 16))
    train(model, corpus, TrainConfig(epochs=2, batch=16, lr=0.1, seed=2), quiet=True)
    c, t = corpus.windows("train", 3)
    out = reassign(model, c, t, k=5, valid=corpus.windows("valid", 3))
    assert out["cost_after"] < out["cost_before"] and out["moved"] > 0
    assert out["train_ppl_after"] < out["train_ppl_before"] and out["valid_ppl_after"] < out["valid_ppl_before"]
    rows = table_rows(model, corpus.vocab.words, show=4)
    assert 1 <= len(rows) <= 5 and all(1 <= len(r) <= 4 for r in rows)
    assert corpus.vocab.words[0] in rows[0]
    frequent = table_rows(model, corpus.vocab.words, show=2, frequent_first=True)
    ids = {w: i for i, w in enumerate(corpus.vocab.words)}
    assert frequent[0][0] == corpus.vocab.words[0]  # the row of the most frequent word, led by it
    assert all([ids[w] for w in r] == sorted(ids[w] for w in r) for r in frequent)  # most frequent first
    with pytest.raises(UserError, match="LightRNN's output layer"):
        slot_costs(NPLM(NPLMConfig(V=4, n=2, m=2, h=2)), c[:1], t[:1])


def test_the_exact_assignment_refuses_a_large_vocabulary():
    from nplm_edu.models.lightrnn_table import SlotCosts

    costs = SlotCosts(np.zeros((3_000, 60)), np.zeros((3_000, 1), np.int64), np.zeros((3_000, 1, 60)))
    with pytest.raises(UserError, match="small vocabularies"):
        assign_exact(costs)
