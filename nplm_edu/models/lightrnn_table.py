"""Learning LightRNN's word table between epochs: words reassigned to slots (Li et al. 2016,
"bootstrap for word allocation").

With the network fixed, placing word w in slot (i, j) would cost its training occurrences

    l(w, i, j) = l_r(w, i) + l_c(w, j | i),   l_r(w, i)     = -sum_{t: w_t = w} log P_r(i | a_t),
                                              l_c(w, j | i) = -sum_{t: w_t = w} log P_c(j | a_t, row i)

(:func:`slot_costs`: two passes over the training windows; the change of the word's input vector is
ignored, as in LightRNN). The column term depends on the row, so it is computed for a few rows per
word only: its current row and its k cheapest rows by l_r; in any other row, its worst column cost in
those rows stands in (an optimistic guess there moved words to rows where they did badly). The best table is a minimum-cost assignment of the |V| words to the R C_t slots, one
word per slot. An exact solver (Hungarian, or minimum-cost flow as Li et al. use) needs the |V| x R C_t
cost matrix: 320 million entries for |V| = 17,907. :func:`assign_greedy` keeps only
each word's best candidates: in each of its candidate rows its k cheapest columns, and its current
slot. The words with most to lose (their second-best candidate above their best) choose first, each
its cheapest free candidate; a word left without one takes the cheapest free slot; then words trade
places with the occupants of their candidate slots while that lowers the cost; the old table is kept
if the new one is not cheaper. :func:`reassign` does all of it on a network and measures the loss
before and after; :func:`table_rows` prints what a learned table puts together. On a small
vocabulary :func:`assign_exact` finds the best table (the Hungarian method on the full cost matrix),
the yardstick for the greedy one.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .lightrnn import LightOutput, rows_cols


def light_output(model) -> LightOutput:
    layer = getattr(model, "output", None)
    if not isinstance(layer, LightOutput):
        raise UserError("reassigning a word table needs a network with LightRNN's output layer")
    return layer


class SlotCosts:
    """l(w, i, j) for every word and slot: ``Lr`` (|V|, R); ``rows`` (|V|, q) each word's candidate rows,
    its current row first; ``Lc`` (|V|, q, C_t) the column costs in those rows. In a row that is not
    one of its candidates a word's column cost is not computed: its worst column cost in its candidate
    rows stands in, so that moves there are not taken on a guess."""

    def __init__(self, Lr: np.ndarray, rows: np.ndarray, Lc: np.ndarray):
        self.Lr, self.rows, self.Lc, self.C_t = Lr, rows, Lc, Lc.shape[2]
        self.worst = Lc.reshape(len(Lc), -1).max(axis=1)  # (|V|,)

    def __call__(self, words, slots) -> np.ndarray:
        """l(w, i, j) of placing each of ``words`` in the matching one of ``slots`` (same shape)."""
        words, slots = np.broadcast_arrays(np.asarray(words), np.asarray(slots))
        i, j = slots // self.C_t, slots % self.C_t
        match = self.rows[words] == i[..., None]  # (..., q) is row i one of the word's candidate rows?
        known = match.any(axis=-1)
        return self.Lr[words, i] + np.where(known, self.Lc[words, match.argmax(axis=-1), j], self.worst[words])

    def total(self, slot: np.ndarray) -> float:
        """sum_w l(w, R_w, C_w) of the table ``slot`` (|V|,) (integers)."""
        return float(self(np.arange(len(slot)), np.asarray(slot, np.int64)).sum())


def slot_costs(model, contexts, targets, k: int = 5, batch: int = 1024) -> SlotCosts:
    """The costs of every word in every slot (a window model's ``contexts`` (K, n-1), ``targets`` (K,)),
    the column costs in each word's current row and its k cheapest rows."""
    layer = light_output(model)
    if k < 1:
        raise UserError(f"the candidates per word must be at least 1, got k = {k}", setting="k")
    contexts, targets = np.asarray(contexts), np.asarray(targets)
    spans = [slice(i, i + batch) for i in range(0, len(targets), batch)]
    Lr = np.zeros((layer.V, layer.R))
    for s in spans:
        inputs = model.forward(contexts[s])["inputs"]  # the hidden layer a
        np.add.at(Lr, targets[s], -layer.row_log_probs(model.params, inputs))  # each occurrence adds to its word's
    current = rows_cols(model.params, layer.C_t)[0]  # (|V|,)
    best = np.argsort(Lr + np.where(np.arange(layer.R) == current[:, None], np.inf, 0), axis=1, kind="stable")
    rows = np.concatenate([current[:, None], best[:, :min(k, layer.R - 1)]], axis=1)  # (|V|, q)
    Lc = np.zeros((layer.V, rows.shape[1], layer.C_t))
    for s in spans:
        inputs = model.forward(contexts[s])["inputs"]
        np.add.at(Lc, targets[s], -layer.column_log_probs(model.params, inputs, rows[targets[s]]))
    return SlotCosts(Lr, rows, Lc)


def candidates(costs: SlotCosts, slot: np.ndarray, k: int) -> np.ndarray:
    """A word's current slot, then in each of its candidate rows its k cheapest columns: (|V|, 1 + q k)."""
    cols = np.argsort(costs.Lc, axis=2, kind="stable")[:, :, :k]  # (|V|, q, k)
    cand = (costs.rows[:, :, None] * costs.C_t + cols).reshape(len(slot), -1)  # (|V|, q k)
    return np.concatenate([slot[:, None], cand], axis=1)  # the current slot first: it wins every tie


def assign_greedy(costs: SlotCosts, slot: np.ndarray, k: int = 5, sweeps: int = 20) -> np.ndarray:
    """A cheap table (|V|,) of slots, one word each (see the module docstring); ``slot``: the current one."""
    slot = np.asarray(slot, np.int64)
    V, S = len(slot), costs.Lr.shape[1] * costs.C_t
    if k < 1:
        raise UserError(f"the candidates per word must be at least 1, got k = {k}", setting="k")
    cand = candidates(costs, slot, k)  # (|V|, n)
    cost = costs(np.arange(V)[:, None], cand)  # (|V|, n)
    regret = np.sort(cost, axis=1)[:, 1:2].sum(axis=1) - cost.min(axis=1)  # what losing its best would cost
    new, taken = np.full(V, -1), np.zeros(S, bool)
    for word in np.argsort(-regret, kind="stable"):  # the words with most to lose choose first
        free = ~taken[cand[word]]
        if free.any():
            s = cand[word][free][np.argmin(cost[word][free])]
            new[word], taken[s] = s, True
    for word in np.flatnonzero(new < 0):  # every candidate was taken: the cheapest free slot
        free = np.flatnonzero(~taken)
        s = free[np.argmin(costs(word, free))]
        new[word], taken[s] = s, True
    for _ in range(sweeps):  # then trades with the words in one's candidate slots, while they pay
        if not improve_by_swaps(costs, new, cand):
            break
    return new if costs.total(new) < costs.total(slot) else slot


def improve_by_swaps(costs: SlotCosts, slot: np.ndarray, cand: np.ndarray) -> int:
    """One sweep, in place: word w and the occupant o of one of w's candidate slots s trade places (o
    moves to w's slot; an empty s: w just moves) where that lowers the cost, the largest gains first,
    each word at most once. Returns the number of trades."""
    V = len(slot)
    owner = np.full(costs.Lr.shape[1] * costs.C_t, -1)
    owner[slot] = np.arange(V)  # (R C_t,) the word in each slot, -1: empty
    w = np.repeat(np.arange(V), cand.shape[1])  # (|V| n,)
    s, o = cand.ravel(), owner[cand.ravel()]  # the candidate slot and its occupant
    has = o >= 0
    oo = np.where(has, o, 0)
    gain = costs(w, slot[w]) - costs(w, s)  # (|V| n,) w's own change
    gain += np.where(has, costs(oo, s) - costs(oo, slot[w]), 0.0)  # o's change
    moved, trades = np.zeros(V, bool), 0
    for f in np.flatnonzero(gain > 1e-9)[np.argsort(-gain[gain > 1e-9], kind="stable")]:
        a, b, target = w[f], o[f], s[f]
        if moved[a] or (b >= 0 and moved[b]) or owner[target] != b:
            continue
        owner[slot[a]], owner[target] = b, a
        if b >= 0:
            slot[b] = slot[a]
            moved[b] = True
        slot[a], moved[a] = target, True
        trades += 1
    return trades


def hungarian(cost: np.ndarray) -> np.ndarray:
    """The exact minimum-cost assignment of the n rows of ``cost`` (n, s), n <= s, to distinct columns
    (Kuhn and Munkres, with potentials u, v, O(n^2 s)): the column of each row."""
    n, s = cost.shape
    u, v = np.zeros(n + 1), np.zeros(s + 1)
    match = np.zeros(s + 1, np.int64)  # match[j]: the row (1-based) holding column j; 0: free
    for i in range(1, n + 1):  # add row i, then grow a shortest augmenting path from it
        match[0], j0 = i, 0
        minv, used, way = np.full(s + 1, np.inf), np.zeros(s + 1, bool), np.zeros(s + 1, np.int64)
        while match[j0]:
            used[j0] = True
            i0 = match[j0]
            cur = cost[i0 - 1] - u[i0] - v[1:]  # (s,) reduced costs from row i0
            better = ~used[1:] & (cur < minv[1:])
            minv[1:][better], way[1:][better] = cur[better], j0
            free = np.flatnonzero(~used[1:]) + 1
            j1 = free[np.argmin(minv[free])]
            delta = minv[j1]
            u[match[used]] += delta
            v[used] -= delta
            minv[~used] -= delta
            j0 = j1
        while j0:  # flip the path: every row on it takes the next column
            j1 = way[j0]
            match[j0], j0 = match[j1], j1
    out = np.empty(n, np.int64)
    out[match[1:][match[1:] > 0] - 1] = np.flatnonzero(match[1:])
    return out


def assign_exact(costs: SlotCosts) -> np.ndarray:
    """The cheapest table (|V|,) over all R C_t slots: the Hungarian method on the |V| x R C_t matrix of
    l(w, i, j), for a small vocabulary only (on |V| = 17,907 the matrix has 320 million entries)."""
    V, S = costs.Lr.shape[0], costs.Lr.shape[1] * costs.C_t
    if V * S > 4_000_000:
        raise UserError(f"the exact assignment is for small vocabularies: {V} words x {S} slots is too large")
    return hungarian(costs(np.arange(V)[:, None], np.arange(S)[None, :]))  # (|V|, R C_t) -> (|V|,)


def reassign(model, contexts, targets, k: int = 5, valid=None) -> dict:
    """Reassign the table of ``model`` (a window model with LightRNN's output layer) on the training
    windows; the predicted cost, the training perplexity (and ``valid``'s: (contexts, targets))
    before and after, and how many words moved. The cost leaves out the input side: with LightRNN's
    input vectors a moved word also reads a new row and column vector, so the measured loss can rise
    right after a reassignment although the cost fell, until training adapts the vectors."""
    layer = light_output(model)
    P = model.params

    def ppls():
        out = {"train_ppl": model.perplexity(contexts, targets)}
        if valid is not None:
            out["valid_ppl"] = model.perplexity(*valid)
        return out

    before = ppls()
    costs = slot_costs(model, contexts, targets, k)
    old = P["slot"].astype(np.int64)
    new = assign_greedy(costs, old, k)
    P["slot"][...] = new
    layer.check_table(P)
    after = ppls()
    return {"cost_before": costs.total(old), "cost_after": costs.total(new),
            "moved": int((new != old).sum()), **{f"{name}_before": v for name, v in before.items()},
            **{f"{name}_after": v for name, v in after.items()}}


def table_rows(model, words: list[str], rows=None, show: int = 10, frequent_first: bool = False) -> list[list[str]]:
    """The words of some rows of the table (default: the rows of the 5 most frequent words, i.e. of
    ids 0..4), at most ``show`` per row, in column order (``frequent_first``: in id order, which is
    the order of frequency, so that a row is shown by its most frequent words)."""
    layer = light_output(model)
    row, col = rows_cols(model.params, layer.C_t)
    rows = rows if rows is not None else list(dict.fromkeys(row[:5].tolist()))
    out = []
    for i in rows:
        members = np.flatnonzero(row == i)  # in id order
        out.append([words[w] for w in (members if frequent_first else members[np.argsort(col[members])])][:show])
    return out
