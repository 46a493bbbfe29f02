"""Tests of nplm_edu.models.ngram: counting, the probability invariants of every model, Kneser-Ney by hand
and against a slow reference, EM and the exchange algorithm never going downhill, the CLI."""

import argparse
import json
import math
from collections import Counter, defaultdict

import numpy as np
import pytest

from nplm_edu.cli.ngram import add_cli
from nplm_edu.data.corpus import load_corpus, windows
from nplm_edu.errors import UserError
from nplm_edu.models.ngram import (ClassNgram, InterpolatedTrigram, KneserNey, MaximumLikelihood, NgramCounts,
                                   exchange_classes, modified_kn_discounts)
from nplm_edu.models.ngram.classes import class_bigram_objective
from nplm_edu.models.ngram.counts import check_ids, search_slices, word_order


@pytest.fixture(scope="module")
def corpus():
    return load_corpus("synthetic")


def zipf_stream(n, V, seed):
    """Random ids with a skewed, language-like frequency profile (all < V - 2: two ids never seen)."""
    rng = np.random.default_rng(seed)
    return (rng.zipf(1.3, size=n) - 1) % (V - 2)


def test_counts_match_a_counter():
    ids = zipf_stream(3000, 40, 0)
    ng = NgramCounts(ids, 4, 40)
    for k in range(1, 5):
        ref = Counter(tuple(ids[i:i + k]) for i in range(len(ids) - k + 1))
        grams = np.array(list(ref))
        got = ng.counts[k][ng.find(grams)]
        assert got.tolist() == [ref[tuple(g)] for g in grams]
        assert int(ng.counts[k].sum()) == len(ids) - k + 1  # every k-gram token counted once
    assert ng.find(np.array([[38, 39, 38]])).tolist() == [-1]  # ids never seen


def unique_reference(ids, order, V):
    """keys, counts and suffix links of every order the slow way: np.unique of each order's keys."""
    keys, counts, suffix = [np.arange(V)], [np.bincount(ids, minlength=V)], [np.zeros(V, int)]
    at = ids.astype(np.int64)  # id of the k-gram at each position, k = 1
    for k in range(2, order + 1):
        L = len(ids) - k + 1
        key = at[:L] * V + ids[k - 1:]  # prefix id * |V| + last word
        u, inv, c = np.unique(key, return_inverse=True, return_counts=True)
        first_at = np.unique(inv, return_index=True)[1]  # one position of each k-gram
        keys.append(u), counts.append(c), suffix.append(at[first_at + 1])  # the (k-1)-gram one later
        at = inv
    return keys, counts, suffix


@pytest.mark.parametrize("L,V,seed", [(1, 3, 0), (6, 2, 1), (40, 3, 2), (3000, 50, 3), (5000, 70_000, 4)])
def test_radix_counting_equals_np_unique(L, V, seed):
    # the radix construction (sort by the first word, stably, after the rest) gives the tables
    # np.unique gives order by order; V = 70,000 takes two 16-bit digits per word
    rng = np.random.default_rng(seed)
    for ids in (rng.integers(0, V, L), ((rng.zipf(1.4, L) - 1) % V).astype(np.int32)):  # int64 and int32 ids
        for order in range(1, min(L, 5) + 1):
            ng = NgramCounts(ids, order, V)
            keys, counts, suffix = unique_reference(ids, order, V)
            for k in range(1, order + 1):
                assert np.array_equal(ng.keys[k], keys[k - 1]) and np.array_equal(ng.counts[k], counts[k - 1])
                if k > 1:
                    assert np.array_equal(ng.suffix[k], suffix[k - 1])
                assert ng.counts[k].dtype == ng.suffix[k].dtype == np.int32


@pytest.mark.parametrize("L,V,seed", [(6, 2, 1), (3000, 50, 3), (5000, 70_000, 4)])
def test_offsets_point_to_each_prefix_s_children(L, V, seed):
    # offsets[k][p]:offsets[k][p + 1] are exactly the k-grams whose prefix is p, found here by
    # searching the sorted keys for p * |V| (the smallest key p could have) and (p + 1) * |V|
    ids = (np.random.default_rng(seed).zipf(1.4, L) - 1) % V
    ng = NgramCounts(ids, 5, V)
    for k in range(1, 6):
        n = ng.size(k - 1)
        expected = np.searchsorted(ng.keys[k], np.arange(n + 1) * V)  # (N_{k-1} + 1,)
        assert ng.offsets[k].tolist() == expected.tolist()
        assert ng.offsets[k].dtype == np.int32


def test_search_slices_is_searchsorted_inside_each_slice():
    rng = np.random.default_rng(0)
    table = np.sort(rng.integers(0, 1000, 5000))  # (5000,) with runs of equal values
    lo = rng.integers(0, 5001, 3000)
    hi = np.minimum(lo + rng.choice([0, 1, 2, 3, 50, 4000], 3000), 5000)  # empty, short and long slices
    q = rng.integers(-5, 1005, 3000)
    expected = [lo_ + np.searchsorted(table[lo_:hi_], q_) for lo_, hi_, q_ in zip(lo, hi, q)]
    assert search_slices(table, q, lo, hi).tolist() == expected


def test_lookups_equal_a_search_of_the_whole_table():
    # extend() searches only the prefix's children; the same answers come from one searchsorted of
    # the whole sorted table, the key p * |V| + w either there (its id) or not (-1)
    V = 60
    ids = (np.random.default_rng(5).zipf(1.3, 20_000) - 1) % V
    ng = NgramCounts(ids, 4, V)
    rng = np.random.default_rng(6)
    for k in range(1, 5):
        p = rng.integers(-1, ng.size(k - 1), 4000)  # -1: an unseen prefix
        p[p > 0] *= k > 1  # order 1 has one prefix, the empty context (id 0)
        w = rng.integers(0, V, 4000)
        keys = ng.keys[k]
        q = np.where(p >= 0, p * V + w, -1)
        i = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
        got = ng.extend(k, p, w)
        assert got.tolist() == np.where(keys[i] == q, i, -1).tolist()
        assert (got >= 0).any() and (got < 0).any()  # both cases met


@pytest.mark.parametrize("model", [MaximumLikelihood, KneserNey])
def test_running_text_reuses_each_window_s_ngrams_as_the_next_contexts(corpus, model, monkeypatch):
    # on consecutive windows only the first walks down the trie for its contexts; the others take the
    # ids the window before found. Same probabilities as the windows in a shuffled order (no reuse)
    m = model(4, corpus.V).fit(corpus.train)
    ctx, tgt = corpus.windows("test", 4)
    ctx, tgt = ctx[:3000], tgt[:3000]
    looked_up = []
    find = m.ngrams.find
    monkeypatch.setattr(m.ngrams, "find", lambda grams: looked_up.append(len(grams)) or find(grams))
    running = m.levels(ctx, tgt)
    assert looked_up == [1, 1, 1]  # the first window's contexts of orders 2, 3 and 4
    shuffle = np.random.default_rng(0).permutation(len(tgt))
    looked_up.clear()
    shuffled = m.levels(ctx[shuffle], tgt[shuffle])
    assert looked_up == [3000] * 3  # not running text: every context is looked up
    for a, b in zip(running, shuffled):
        assert np.array_equal(a[shuffle], b)
    if model is KneserNey:  # smoothed: no test word has probability 0
        assert (running[-1] > 0).all()


def test_the_last_ngram_without_a_successor_is_no_prefix():
    # "a b a b c": the bigram (b c) occurs only at the end, so no trigram has it as prefix; the
    # trigram table must still use the bigram ids of table 2, (a b) = 0, (b a) = 1, (b c) = 2
    ng = NgramCounts(np.array([0, 1, 0, 1, 2]), 3, 3)
    assert ng.keys[2].tolist() == [0 * 3 + 1, 1 * 3 + 0, 1 * 3 + 2]
    assert ng.keys[3].tolist() == [0 * 3 + 0, 0 * 3 + 2, 1 * 3 + 1]  # (a b a), (a b c), (b a b)
    assert ng.find(np.array([[1, 0, 1], [0, 1, 2]])).tolist() == [2, 1]
    ng = NgramCounts(np.array([2, 1, 0, 1, 0, 1]), 3, 3)  # the last bigram (0 1) occurs before too
    assert ng.counts[3][ng.find(np.array([[1, 0, 1]]))].tolist() == [2]


@pytest.mark.parametrize("V", [2, 300, 2 ** 16, 2 ** 16 + 1, 5_000_000])
def test_word_order_is_a_stable_argsort(V):
    rng = np.random.default_rng(V)
    words = rng.integers(0, V, 20_000) * rng.integers(0, 2, 20_000)  # many zeros: long runs of ties
    assert np.array_equal(word_order(words.astype(np.int32), V), np.argsort(words, kind="stable"))


def all_models(ids, V, valid):
    """One fitted model of each kind (small class count so the synthetic corpus can be clustered)."""
    yield MaximumLikelihood(3, V).fit(ids)
    for n in (2, 3, 4, 5):
        yield KneserNey(n, V).fit(ids)
    yield InterpolatedTrigram(V, verbose=False).fit(ids, valid=valid)
    yield ClassNgram(3, V, 8, passes=2, progress=False).fit(ids)
    yield ClassNgram(4, V, 8, passes=1, seed=3, progress=False).fit(ids)


def test_rows_sum_to_one_random_and_unseen_contexts():
    V = 60
    ids = zipf_stream(5000, V, 1)
    valid = windows(zipf_stream(800, V, 2), 3)
    rng = np.random.default_rng(0)
    for m in all_models(ids, V, valid):
        k = m.order - 1
        random_ctx = rng.integers(0, V, size=(30, k))
        unseen_ctx = np.full((3, k), V - 1)  # id V-1 never occurs in training
        unseen_ctx[1, :] = V - 2
        seen_ctx = windows(ids, k + 1)[0][:20]
        for ctx in (random_ctx, unseen_ctx, seen_ctx):
            P = m.probs(ctx)
            assert P.shape == (len(ctx), V)
            assert np.all(P >= 0)
            assert np.abs(P.sum(axis=1) - 1).max() < 1e-6, type(m).__name__
            # log_prob (computed without full rows) agrees with the rows
            t = rng.integers(0, V, size=len(ctx))
            with np.errstate(divide="ignore"):
                np.testing.assert_allclose(m.log_prob(ctx, t), np.log(P[np.arange(len(t)), t]), rtol=1e-9, atol=1e-12)


def test_kneser_ney_by_hand():
    # Corpus a b a b c a c (a=0, b=1, c=2), bigram model, discounts D(1)=0.5, D(2)=0.8, D(3+)=0.9.
    # Bigram counts: ab 2, ba 1, bc 1, ca 1, ac 1.
    # Unigram continuation counts N1+(. w): a after {b, c} -> 2; b after {a} -> 1; c after {b, a} -> 2;
    #   total 5. Discounts: a 0.8, b 0.5, c 0.8; gamma = 2.1.
    #   p1(a) = (2 - 0.8 + 2.1/3) / 5 = 0.38, p1(b) = (1 - 0.5 + 0.7) / 5 = 0.24, p1(c) = 0.38.
    # Context a: c(a .) = 3; ab (count 2) discounted by 0.8, ac (count 1) by 0.5; gamma = 1.3.
    #   p(b|a) = (1.2 + 1.3 * 0.24) / 3 = 0.504, p(c|a) = (0.5 + 1.3 * 0.38) / 3 = 0.331333...,
    #   p(a|a) = 1.3 * 0.38 / 3 = 0.164666...
    # Context c: only "c a" (the last c has no successor): c(c .) = 1, gamma = 0.5.
    #   p(a|c) = (0.5 + 0.5 * 0.38) / 1 = 0.69, p(b|c) = 0.5 * 0.24 = 0.12, p(c|c) = 0.5 * 0.38 = 0.19.
    D = [(0.5, 0.8, 0.9), (0.5, 0.8, 0.9)]
    m = KneserNey(2, 3, discounts=D).fit(np.array([0, 1, 0, 1, 2, 0, 2]))
    P = m.probs(np.array([[0], [2]]))
    np.testing.assert_allclose(P[0], [1.3 * 0.38 / 3, 0.504, (0.5 + 1.3 * 0.38) / 3], rtol=1e-12)
    np.testing.assert_allclose(P[1], [0.69, 0.12, 0.19], rtol=1e-12)
    np.testing.assert_allclose(m.levels(np.zeros((3, 1), int), np.arange(3))[1], [0.38, 0.24, 0.38])


def test_modified_discounts_formula():
    # n1..n4 = 10, 5, 3, 2: Y = 10 / (10 + 2*5) = 0.5; D1 = 1 - 2*0.5*5/10 = 0.5;
    # D2 = 2 - 3*0.5*3/5 = 1.1; D3+ = 3 - 4*0.5*2/3 = 1.6667
    np.testing.assert_allclose(modified_kn_discounts(np.array([0, 10, 5, 3, 2])), [0.5, 1.1, 3 - 4 / 3])


def reference_kn(ids, n, V):
    """Interpolated modified KN straight from Chen & Goodman's formulas, with dicts (slow, obvious)."""
    ids = list(map(int, ids))
    grams = [Counter(tuple(ids[i:i + k]) for i in range(len(ids) - k + 1)) for k in range(n + 1)]
    counts = [None] * (n + 1)
    counts[n] = grams[n]
    for k in range(1, n):  # continuation counts: distinct words before each k-gram
        counts[k] = Counter(g[1:] for g in grams[k + 1])
    disc = [None]
    for k in range(1, n + 1):
        coc = Counter(min(c, 5) for c in counts[k].values())
        disc.append(modified_kn_discounts(np.array([0, coc[1], coc[2], coc[3], coc[4]])))
    ctx = [defaultdict(lambda: [0.0, 0.0]) for _ in range(n + 1)]  # h -> [c(h .), gamma numerator]
    for k in range(1, n + 1):
        for g, c in counts[k].items():
            ctx[k][g[:-1]][0] += c
            ctx[k][g[:-1]][1] += disc[k][min(c, 3) - 1]

    def prob(h, w):
        p = 1.0 / V
        for k in range(1, n + 1):
            hk = tuple(h[len(h) - (k - 1):]) if k > 1 else ()
            if hk in ctx[k]:
                c = counts[k].get(hk + (w,), 0)
                d = disc[k][min(c, 3) - 1] if c else 0.0
                tot, gam = ctx[k][hk]
                p = (max(c - d, 0) + gam * p) / tot
        return p

    return prob


@pytest.mark.parametrize("n", [3, 4])
def test_kneser_ney_matches_reference(n):
    V = 30
    ids = zipf_stream(4000, V, 5)
    test = zipf_stream(300, V, 6)
    m = KneserNey(n, V).fit(ids)
    ref = reference_kn(ids, n, V)
    ctx, tgt = windows(test, n)
    expect = [math.log(ref(tuple(c), int(t))) for c, t in zip(ctx, tgt)]
    np.testing.assert_allclose(m.log_prob(ctx, tgt), expect, rtol=1e-10)


def test_maximum_likelihood_zeros_and_fallback():
    ids = np.array([0, 1, 0, 1, 0, 2])  # c(0 1) = 2, c(0 2) = 1, c(0 .) = 3
    m = MaximumLikelihood(2, 4).fit(ids)
    np.testing.assert_allclose(m.probs(np.array([[0]]))[0], [0, 2 / 3, 1 / 3, 0])
    np.testing.assert_allclose(m.probs(np.array([[3]]))[0], [3 / 6, 2 / 6, 1 / 6, 0])  # unseen: unigram
    assert m.perplexity(np.array([[0]]), np.array([3])) == math.inf


def test_interpolation_bins_and_em_never_decreases(corpus):
    m = InterpolatedTrigram(corpus.V, verbose=False).fit(corpus.train, valid=corpus.windows("valid", 3),
                                                         iterations=6)
    h = np.array(m.em_history)
    assert len(h) == 7 and np.all(np.diff(h) >= -1e-9) and h[-1] > h[0]
    np.testing.assert_allclose(m.alpha.sum(axis=1), 1.0)
    assert np.all(m.alpha >= 0)
    # bin of a context: T = 24000 training tokens; a pair seen 0 times: ceil(log 24000) = ceil(10.09) = 11
    assert m.T == 24000 and m.n_bins == 12
    unseen = np.array([[corpus.V - 1, corpus.V - 1]])
    assert m.mle.ngrams.find(unseen)[0] == -1 and m.bins(unseen).tolist() == [11]
    ctx = corpus.windows("valid", 3)[0][:50]
    freq = m.mle.ngrams.counts[2][m.mle.ngrams.find(ctx)]
    assert m.bins(ctx).tolist() == [math.ceil(-math.log((1 + f) / 24000)) for f in freq]
    assert m.perplexity(*corpus.windows("test", 3)) < m.V


def test_exchange_never_lowers_objective(corpus):
    cls, hist = exchange_classes(corpus.train, corpus.V, 6, passes=3, progress=False)
    assert np.all(np.diff(hist) >= -1e-6) and hist[-1] > hist[0]
    assert len(np.unique(cls)) == 6  # no class emptied
    # the objective kept up to date move by move equals the one recomputed from the final classes
    u, v = corpus.train[:-1], corpus.train[1:]
    M = np.bincount(cls[u] * 6 + cls[v], minlength=36).reshape(6, 6).astype(float)
    assert class_bigram_objective(M) == pytest.approx(hist[-1], rel=1e-12)
    assert hist == exchange_classes(corpus.train, corpus.V, 6, passes=3, progress=False)[1]  # deterministic


def test_exchange_recovers_the_synthetic_grammar_classes(corpus):
    true = [corpus.classes.get(w) for w in corpus.vocab.words]
    cls, _ = exchange_classes(corpus.train, corpus.V, len(set(true)), passes=3, progress=False)
    for name in ("verb", "place", "animal", "animal-plural", "preposition"):  # the grammar's open classes
        found = {int(cls[i]) for i, t in enumerate(true) if t == name}
        assert len(found) == 1, (name, found)  # all six (four) words in one cluster


def test_class_model_better_than_uniform_and_kn_reasonable(corpus):
    kn = KneserNey(3, corpus.V).fit(corpus.train)
    cl = ClassNgram(3, corpus.V, 10, progress=False).fit(corpus.train)
    for m in (kn, cl):
        assert m.perplexity(*corpus.windows("test", 3)) < 0.5 * corpus.V


def test_check_ids_copies_only_to_change_the_type():
    ids = np.array([0, 3, 2], np.int32)
    assert check_ids(ids, 4, dtype=np.int32) is ids  # the counting keeps no second copy of a corpus
    assert check_ids(ids, 4).dtype == np.int64
    assert np.array_equal(check_ids([0, 3.0], 4), [0, 3]) and check_ids([0, 3.0], 4).dtype == np.int64
    with pytest.raises(UserError, match="0..3"):
        check_ids(np.array([0, 4], np.uint8), 4)
    with pytest.raises(UserError):  # checked before the conversion could wrap it
        check_ids(np.array([2 ** 32], np.int64), 4, dtype=np.int32)


def test_bad_input_raises_user_error():
    m = KneserNey(3, 10).fit(np.arange(10).repeat(3))
    with pytest.raises(UserError):
        m.probs(np.array([[0, 10]]))
    with pytest.raises(UserError):
        m.log_prob(np.array([[0]]), np.array([1]))
    with pytest.raises(UserError):
        KneserNey(3, 5).fit(np.array([0, 1, 7]))
    with pytest.raises(UserError):
        exchange_classes(np.arange(5), 5, 6, progress=False)


def run_cli(argv):
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_prints_and_writes_json(tmp_path, capsys):
    out = tmp_path / "kn.json"
    assert run_cli(["ngram", "--model", "kn", "--order", "4", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["model"] == "kn" and res["order"] == 4 and 1 < res["test"] < res["V"]
    text = capsys.readouterr().out
    assert "test  perplexity" in text and "time:" in text
    # --json -: stdout is the JSON document alone (the report goes to stderr), so it can be piped
    assert run_cli(["ngram", "--model", "kn", "--order", "3", "--json", "-"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["order"] == 3 and "test  perplexity" in captured.err
    assert run_cli(["ngram", "--model", "class", "--classes", "5", "--quiet"]) == 0
    with pytest.raises(UserError):
        run_cli(["ngram", "--model", "interp", "--order", "4"])
    with pytest.raises(UserError):
        run_cli(["ngram", "--model", "class"])


# --------------------------------------------------------------------------- progress bars

def test_counting_and_scoring_show_their_progress_when_asked_and_give_the_same_numbers(monkeypatch):
    from nplm_edu.models.ngram.build import evaluate
    from progress_bars import recorded_bars

    corpus = load_corpus("synthetic", seed=3)
    bars = recorded_bars(monkeypatch)
    quiet = evaluate(KneserNey(4, corpus.V), corpus, "kn")
    assert len(bars) == 4 and not any(b["shown"] for b in bars)  # no bar unless asked
    bars.clear()
    shown = evaluate(KneserNey(4, corpus.V), corpus, "kn", progress=True)
    assert [shown[s] for s in ("train", "valid", "test")] == [quiet[s] for s in ("train", "valid", "test")]
    assert [b["desc"] for b in bars] == [f"counting n-grams of {len(corpus.train):,} tokens", "scoring train",
                                         "scoring valid", "scoring test"]
    assert all(b["shown"] and b["n"] == b["total"] for b in bars)  # every bar ran to its end
    assert [b["total"] for b in bars] == [3] + [len(corpus.windows(s, 4)[1]) for s in ("train", "valid", "test")]
