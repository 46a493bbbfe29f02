"""What chapter 8 shows of the central claim's results file (``reproduce central-claim``): tables, the
protocol, the cost, and the sentences of its conclusion, each built from the rows.

The file holds one row per model and seed (``runs``: the networks under the comparison protocol, the
count models with ``"seed": None``) and, per cell and model, mean ± standard deviation over the seeds of
every score (``tables``). The synthetic cells are ``"family/training tokens"``; ``"brown"`` holds the
Kneser-Ney 5-gram and the network whose new test trigrams are analysed per seed, ``"brown-slice"`` the
network with its table learned or fixed on the comparison slice.

Two models differ *beyond the seeds' spread* when the ranges of their seeds' values do not meet, by
the book's one rule (:func:`~nplm_edu.analysis.recurrent_table.judged`); a count model, fitted once, is
one value, and two networks of one seed each have no spread to judge by. A sentence never says more than
that rule gives. A Brown function asked for a part the file does not hold yet raises :class:`MissingPart`,
which names it.

    doc = read_claim("data/results/central_claim.json")
    score_rows(doc, "animal-verb/8000")    # every model's log-probability per token, mean ± std
    gap_rows(doc, "animal-verb")           # every model's gap at each training size, and each seed's
    conclusion(doc)                        # the networks' gaps compared, cell by cell, in words
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError
from .comparison import grid_edge, grid_rows, listed, lr_cell
from .recurrent_table import compare_text, difference, difference_text, is_scored, judged, spread
from .report import pm

NETWORKS = ("network_learned", "network_fixed_random", "network_fixed_pca")
COUNTS = ("kn3", "kn5", "interpolated_trigram", "grammar")
NAMES = {"network_learned": "C learned", "network_fixed_random": "C fixed at random",
         "network_fixed_pca": "C fixed by PCA", "kn3": "Kneser-Ney trigram", "kn5": "Kneser-Ney 5-gram",
         "interpolated_trigram": "interpolated trigram", "grammar": "the grammar itself"}
SCORES = ("heldout", "completing", "after", "other", "ordinary")
# the networks' comparisons, each (a, b): a's gap against b's
PAIRS = (("network_learned", "network_fixed_pca"), ("network_learned", "network_fixed_random"),
         ("network_fixed_pca", "network_fixed_random"))
BROWN_VARIANTS = {"learned": "C learned", "fixed_pca": "C fixed by PCA", "fixed_random": "C fixed at random"}
NOVELTY_GROUPS = {"seen": "seen in training", "neighbour_seen": "unseen; seen with a near neighbour",
                  "no_neighbour": "unseen; not even with a near neighbour"}
PARTS = {"brown": "novel-trigrams", "brown-slice": "fixed-features"}


class MissingPart(UserError):
    """A part of the central claim's results file that a chapter reads is not there (yet)."""


def read_claim(path) -> dict:
    """The results document at ``path`` (or ``path`` itself); a file written before the comparison protocol
    (no ``tables`` of seed rows) is refused in one line."""
    doc = path if isinstance(path, dict) else json.loads(Path(path).read_text(encoding="utf-8"))
    if "tables" not in doc or "runs" not in doc:
        raise UserError("this central-claim results file was written before the comparison protocol (no "
                        "'tables'): rerun python -m nplm_edu reproduce central-claim")
    return doc


# --------------------------------------------------------------------------- the synthetic cells
def synthetic_cells(doc: dict) -> list[str]:
    """The synthetic cells the file holds, family by family, in the design's order of training sizes."""
    d = doc["design"]
    return [c for f in d["families"] for n in d["train_tokens"] if (c := f"{f}/{n}") in doc["tables"]]


def cell_words(cell: str) -> str:
    """'animal-verb, 8,000 tokens' for 'animal-verb/8000'."""
    family, n = cell.split("/")
    return f"{family}, {int(n):,} tokens"


def cell_info(doc: dict, cell: str) -> dict:
    """A cell's pairs, token counts and share of sentences removed (kept in its grammar row)."""
    [row] = [r for r in doc["runs"] if r["cell"] == cell and "tokens" in r]
    return {k: row[k] for k in ("pairs", "tokens", "heldout_sentences_share")}


def stat(doc: dict, cell: str, model: str, key: str = "gap") -> dict:
    """:func:`~nplm_edu.analysis.recurrent_table.spread` of ``model``'s ``key`` over its seeds in ``cell``
    (a count model: its one value)."""
    return spread(doc["tables"][cell][model][key]["values"])


def seeds_text(s: dict, digits: int = 3) -> str:
    """Each seed's value, '-0.029, -0.056, -0.107' ('' for one value: a count model)."""
    return "" if s["n"] < 2 else ", ".join(f"{v:.{digits}f}" for v in s["values"])


def score_rows(doc: dict, cell: str) -> tuple[list, list]:
    """(body, head): every model's mean natural-log probability per token on the removed sentences, on
    their three groups of tokens and on ordinary sentences, mean ± std over the seeds."""
    t = doc["tables"][cell]
    body = [[NAMES[m], *(pm(stat(doc, cell, m, k), 3) for k in SCORES)] for m in (*NETWORKS, *COUNTS) if m in t]
    return body, [["", "removed", "2nd word", "after", "other", "ordinary"]]


def gap_rows(doc: dict, family: str) -> tuple[list, list]:
    """(body, head): every model's gap at each training size of ``family``, mean ± std, then each seed's."""
    cells = [c for c in synthetic_cells(doc) if c.startswith(family + "/")]
    models = [m for m in (*NETWORKS, *COUNTS) if all(m in doc["tables"][c] for c in cells)]
    body = [[NAMES[m], *(f(stat(doc, c, m)) for c in cells for f in (lambda s: pm(s, 3), seeds_text))]
            for m in models]
    seeds = ", ".join(str(s) for s in doc["protocol"]["seeds"])
    head = [["", *((f"{int(c.split('/')[1]):,} tokens", 2) for c in cells)],
            ["", *(["mean ± std", f"seeds {seeds}"] * len(cells))]]
    return body, head


def gap_compared(doc: dict, cell: str, a: str, b: str) -> dict:
    """a's gap against b's in ``cell``: :func:`~nplm_edu.analysis.recurrent_table.difference` (a - b), with
    both spreads and ``order``: "a" or "b" (whose gap is higher, nearer zero, beyond the seeds' spread),
    "within" (the seeds alone could give either order) or None (one seed each: no spread to judge by), by
    :func:`~nplm_edu.analysis.recurrent_table.judged`."""
    x, y = stat(doc, cell, a), stat(doc, cell, b)
    d = {"cell": cell, "a": a, "b": b, "x": x, "y": y, **difference(x, y)}
    j = judged(d)
    d["order"] = j if j != "beyond" else "a" if d["difference"] > 0 else "b"
    return d


def gap_sentence(d: dict) -> str:
    """'C learned -0.064 ± 0.040 against C fixed by PCA -0.039 ± 0.014: a difference of -0.025 ± 0.043,
    within the seeds' spread.' (or 'beyond the seeds' spread: C fixed by PCA's gap is narrower')."""
    text = (f"{NAMES[d['a']]} {pm(d['x'], 3)} against {NAMES[d['b']]} {pm(d['y'], 3)}: a difference of "
            f"{difference_text(d, 3)}")
    if d["order"] in ("a", "b"):
        text += f": {NAMES[d[d['order']]]}'s gap is narrower"
    return text + "."


def cell_sentences(doc: dict, cell: str, pairs=PAIRS) -> list[str]:
    """The networks' gaps in ``cell`` compared pair by pair (:data:`PAIRS`), one sentence each."""
    return [gap_sentence(gap_compared(doc, cell, a, b)) for a, b in pairs
            if a in doc["tables"][cell] and b in doc["tables"][cell]]


def _where(verdicts: dict, order: str | None) -> str:
    """The cells (in words) whose verdict is ``order``."""
    return listed([cell_words(c) for c, v in verdicts.items() if v == order], code=False)


def pair_sentence(doc: dict, a: str, b: str) -> str:
    """One pair of networks over every synthetic cell: in which cells a's gap is narrower, b's, or neither
    beyond the seeds' spread, and in which one seed each leaves no spread to judge by."""
    verdicts = {c: gap_compared(doc, c, a, b)["order"] for c in synthetic_cells(doc)
                if a in doc["tables"][c] and b in doc["tables"][c]}
    parts = [f"{NAMES[w]}'s gap is narrower, beyond the seeds' spread, with {_where(verdicts, k)}"
             for k, w in (("a", a), ("b", b)) if k in verdicts.values()]
    if "within" in verdicts.values():
        parts.append(f"the two are within the seeds' spread with {_where(verdicts, 'within')}")
    if None in verdicts.values():
        parts.append(f"one seed each leaves no spread to judge by with {_where(verdicts, None)}")
    return f"{NAMES[a]} against {NAMES[b]}: " + "; ".join(parts) + "."


def conclusion(doc: dict) -> list[str]:
    """What the networks' gaps show over the synthetic cells, in sentences built from the rows: one per
    pair of networks (:func:`pair_sentence`), then what the controls allow one to say of the table C."""
    out = [pair_sentence(doc, a, b) for a, b in PAIRS]
    cells = synthetic_cells(doc)
    order = {(a, b): [gap_compared(doc, c, a, b)["order"] for c in cells] for a, b in PAIRS}
    learned_pca, pca_random = order[PAIRS[0]], order[PAIRS[2]]
    if all(o is None for v in order.values() for o in v):
        out.append("With one seed of each network there is no spread to judge the gaps by: these rows single out "
                   "neither learned nor fixed similarity structure in C.")
    elif "a" not in learned_pca and set(pca_random) == {"a"}:
        out.append("In every cell the table fixed by PCA of co-occurrence counts, never trained to predict, "
                   "left a narrower gap than the random table, and the learned table never a narrower one than "
                   "it beyond the seeds' spread: what these rows show is that similarity structure in C carries "
                   "the generalization to the removed pairs, learned or not.")
    elif "a" in learned_pca and set(order[PAIRS[1]]) == {"a"}:
        out.append("The learned table left a narrower gap than both fixed ones, beyond the seeds' spread, with "
                   f"{_where(dict(zip(cells, learned_pca)), 'a')}: there, learning C added to what a fixed "
                   "similarity structure gives.")
    else:
        out.append("No one table left the narrowest gap in every cell beyond the seeds' spread: these rows "
                   "single out neither learned nor fixed similarity structure in C.")
    return out


# --------------------------------------------------------------------------- the protocol and the cost
def method_words(name: str) -> str:
    """'animal-verb, 8,000 tokens, C learned' for 'animal-verb/8000/learned'; the Brown methods by part."""
    cell, _, variant = name.rpartition("/")
    where = {"brown": "Brown, new trigrams", "brown-slice": "Brown slice"}.get(cell) or cell_words(cell)
    return f"{where}, {BROWN_VARIANTS.get(variant, 'MLP9' if variant == 'mlp9' else variant)}"


def protocol_rows(doc: dict) -> tuple[list, list]:
    """(body, head): each network under the protocol: its validation perplexity at each rate of the grid
    (:func:`~nplm_edu.analysis.comparison.grid_rows`), the rate chosen, each seed's epochs, how many seeds
    stopped early and how many reached the epoch cap."""
    body, head = grid_rows(doc)
    out = []
    for row in body:
        s = doc["summary"][row[0]]
        out.append([method_words(row[0]), *row[1:-1], lr_cell(doc, s["lr"]), ", ".join(map(str, s["epochs"])),
                    f"{s['stopped_early']} of {len(s['seeds'])}", str(s["reached_max_epochs"])])
    return out, [["network", *head[0][1:-1], "chosen", "epochs", "stopped early", "at the cap"]]


def at_edges(doc: dict) -> dict[str, list[str]]:
    """{"top" / "bottom": the networks (in words) whose rate was chosen at that edge of the grid}: a rate
    beyond the grid, not tried, might have done better for them."""
    out: dict = {}
    for name, s in doc["summary"].items():
        if (edge := grid_edge(doc, s["lr"])) is not None:
            out.setdefault(edge, []).append(method_words(name))
    return out


def protocol_text(doc: dict) -> str:
    """The protocol as the file records it, in words."""
    p = doc["protocol"]
    return (f"its learning rate chosen on validation from {listed(p['lrs'], code=False)} after "
            f"{p['grid_epochs']} epochs of seed {p['seeds'][0]}, then seeds {listed(p['seeds'], code=False)} "
            f"trained at that rate to early stopping (patience {p['patience']}, at most {p['max_epochs']} "
            "epochs), each seed's test sets scored once")


def cost_text(doc: dict) -> str:
    """'1.3 CPU hours (1.27 of training, the grid's other rates included, 0.03 of scoring)'."""
    c = doc["cost"]
    return (f"{c['cpu_hours']:.1f} CPU hours ({c['cpu_seconds_training'] / 3600:.2f} of training, the grid's "
            f"other rates included, {c['cpu_seconds_scoring'] / 3600:.2f} of scoring)")


# --------------------------------------------------------------------------- Brown
def brown_rows(doc: dict, cell: str, models) -> dict[str, list[dict]]:
    """{model: its scored rows in ``cell``, by seed}, every model of ``models`` with every seed of the protocol
    (a count model: its one row; a seed that diverged before its first validation has no scores:
    :func:`~nplm_edu.analysis.recurrent_table.is_scored`); :class:`MissingPart` (naming what is missing and the
    part that writes it) otherwise."""
    seeds = doc.get("protocol", {}).get("seeds", [])
    out = {}
    for m in models:
        rows = sorted((r for r in doc["runs"] if r["cell"] == cell and r["model"] == m
                       and ("scores" in r if r["seed"] is None else is_scored(r))), key=lambda r: r["seed"] or 0)
        want = 1 if m == "kn5" else len(seeds)
        if len(rows) < want:
            raise MissingPart(f"the results file holds {len(rows)} of the {want} rows of {cell}/{m}: run python -m "
                              f"nplm_edu reproduce central-claim --no-synthetic --brown-parts {PARTS[cell]}")
        out[m] = rows
    return out


def novelty(doc: dict) -> dict:
    """The new-trigram analysis over the seeds of the Brown network: per group of :data:`NOVELTY_GROUPS`,
    its share of test tokens and the network's mean log-probability minus the 5-gram's, with near
    neighbours (``near_``) and with the frequency-matched control (``control_``), and how often the network
    gives the higher probability; the network's and the 5-gram's test perplexities."""
    rows = brown_rows(doc, "brown", ("kn5", "network"))
    net = rows["network"]
    out = {"kn5_test_ppl": rows["kn5"][0]["scores"]["test_ppl"], "test_ppl": spread(r["test_ppl"] for r in net),
           "valid_ppl": spread(r["valid_ppl"] for r in net), "epochs": [r["epochs"] for r in net],
           "lr": net[0]["lr"], "seeds": [r["seed"] for r in net]}
    for g in NOVELTY_GROUPS:
        for p in ("near", "control"):
            out[f"{p}_{g}"] = spread(r["scores"][f"{p}_{g}_minus_kn5"] for r in net)
        out[f"share_{g}"] = spread(r["scores"][f"share_{g}"] for r in net)
        out[f"higher_{g}"] = spread(r["groups"][g]["network_higher"] for r in net)
    return out


def novelty_rows(doc: dict) -> tuple[list, list]:
    """(body, head): per group of test tokens, its share and the network minus the 5-gram (nats per token)
    with near neighbours and with the control, mean ± std over the seeds."""
    n = novelty(doc)
    body = [[text, f"{n[f'share_{g}']['mean']:.1%}", pm(n[f"near_{g}"], 3), f"{n[f'higher_{g}']['mean']:.0%}",
             pm(n[f"control_{g}"], 3)] for g, text in NOVELTY_GROUPS.items()]
    return body, [["the trigram (w_t-2, w_t-1, w_t)", "share", "network − KN5", "network higher",
                   "network − KN5, control"]]


def novelty_sentences(doc: dict) -> list[str]:
    """Where the network beats the 5-gram, and whether near neighbours in C, against the control, mark
    where: each comparison by the seeds' spread."""
    n = novelty(doc)
    near = difference(n["near_neighbour_seen"], n["near_no_neighbour"])
    ctrl = difference(n["near_neighbour_seen"], n["control_neighbour_seen"])
    out = [f"On test tokens whose trigram was seen in training the network minus the 5-gram is "
           f"{pm(n['near_seen'], 3)} nats per token; on new trigrams {pm(n['near_neighbour_seen'], 3)} where a near "
           f"neighbour in C makes the trigram seen and {pm(n['near_no_neighbour'], 3)} where none does, a "
           f"difference of {difference_text(near, 3)}.",
           f"With random words of the same frequency in place of the neighbours, the tokens made seen give "
           f"{pm(n['control_neighbour_seen'], 3)}; the near neighbours' group against the control's: "
           f"{difference_text(ctrl, 3)}."]
    larger = judged(near) == "beyond" and near["difference"] > 0  # than on the other new trigrams
    marked = judged(ctrl) == "beyond" and ctrl["difference"] > 0  # than on the control's tokens
    if judged(near) is None or judged(ctrl) is None:
        out.append("With one seed of the network there is no spread to judge by whether its advantage is larger "
                   "where a near neighbour in C makes a new trigram seen.")
    elif larger and marked:
        out.append("So the network's advantage is largest where a near neighbour in C makes a new trigram seen, "
                   "beyond the seeds' spread, and random words of the same frequency do not mark those tokens.")
    elif larger:
        out.append("So the advantage is larger where a near neighbour makes a new trigram seen, but random words "
                   "of the same frequency mark tokens with an advantage as large or larger: this split of real text "
                   "does not single out generalization through similar words.")
    else:
        out.append("So the network's advantage on new trigrams is not larger, beyond the seeds' spread, where a near "
                   "neighbour covers the trigram: this split of real text does not single out generalization "
                   "through similar words.")
    return out


def neighbour_rows(doc: dict, seed: int = 0, k: int = 5) -> tuple[list, list]:
    """(body, head): the ``k`` nearest neighbours in C (cosine) of a few words, in seed ``seed``'s network."""
    [row] = [r for r in brown_rows(doc, "brown", ("network",))["network"] if r["seed"] == seed]
    return [[w, " ".join(nn[:k])] for w, nn in row["neighbour_examples"].items()], [["word", "nearest in C"]]


def oov(doc: dict) -> dict:
    """Section 5's rule for unknown words on Brown, over the seeds of the Brown network: how many words and
    tokens it was tested on (the same for every seed: they depend on the corpus only), and each measure
    (``mean_log_prob_unk``, ``_own``, ``_other``, ``own_better``) as a spread over the seeds."""
    rows = [r["oov"] for r in brown_rows(doc, "brown", ("network",))["network"]]
    return {"words": rows[0]["words"], "tokens": rows[0]["tokens"], "seeds": len(rows),
            **{k: spread(o[k] for o in rows) for k in ("mean_log_prob_unk", "mean_log_prob_own",
                                                        "mean_log_prob_other", "own_better")}}


def oov_sentence(doc: dict) -> str:
    """The rule's C(j) against C(<unk>) and against another unknown word's C(j') on Brown, mean ± std over the
    seeds of the mean log-probability of the tokens after an unknown word, each by the seeds' spread (Markdown:
    the vectors in math, ``<unk>`` as code)."""
    o = oov(doc)
    own = o["mean_log_prob_own"]
    parts = [f"{name} {pm(o[k], 3)} ($C(j)$ minus it: {difference_text(difference(own, o[k]), 3)})"
             for k, name in (("mean_log_prob_unk", "the row of `<unk>` as trained"),
                             ("mean_log_prob_other", "another unknown word's $C(j')$"))]
    return (f"On Brown ({o['words']:,} unknown words seen twice or more, {o['tokens']:,} tokens after their later "
            f"occurrences; {o['seeds']} seeds of the network), $C(j)$ gives these tokens {pm(own, 3)} nats per token, "
            f"against {parts[0]} and {parts[1]}; $C(j)$ gives the higher probability on "
            f"{o['own_better']['mean']:.0%} of them (mean over the seeds).")


def fixed_features(doc: dict) -> dict[str, dict]:
    """The Brown slice's networks, per variant of :data:`BROWN_VARIANTS`: the rate chosen, each seed's epochs,
    and :func:`~nplm_edu.analysis.recurrent_table.spread` of the validation and test perplexities."""
    rows = brown_rows(doc, "brown-slice", BROWN_VARIANTS)
    return {v: {"lr": rs[0]["lr"], "epochs": [r["epochs"] for r in rs],
                **{k: spread(r[k] for r in rs) for k in ("valid_ppl", "test_ppl")}} for v, rs in rows.items()}


def fixed_rows(doc: dict) -> tuple[list, list]:
    """(body, head): per variant, the rate chosen, each seed's epochs, validation and test perplexity."""
    f = fixed_features(doc)
    return ([[BROWN_VARIANTS[v], lr_cell(doc, s["lr"]), ", ".join(map(str, s["epochs"])), pm(s["valid_ppl"]),
              pm(s["test_ppl"])] for v, s in f.items()],
            [["", "lr", "epochs", "validation perplexity", "test perplexity"]])


def fixed_sentences(doc: dict) -> list[str]:
    """Each pair of the slice's variants on test perplexity, by the seeds' spread
    (:func:`~nplm_edu.analysis.recurrent_table.compare_text`)."""
    f = fixed_features(doc)
    pairs = (("learned", "fixed_pca"), ("learned", "fixed_random"), ("fixed_pca", "fixed_random"))
    return [compare_text(BROWN_VARIANTS[a], f[a]["test_ppl"], BROWN_VARIANTS[b], f[b]["test_ppl"]) for a, b in pairs]


def fixed_conclusion(doc: dict) -> str:
    """What the slice says of the paper's negative result (section 1.2): the learned table against the fixed
    principal components on test perplexity, by the seeds' spread."""
    f = fixed_features(doc)
    d = difference(f["learned"]["test_ppl"], f["fixed_pca"]["test_ppl"])
    if judged(d) is None:
        return ("On this slice each table has one seed: there is no spread to judge the learned table against "
                "the fixed principal components by.")
    if judged(d) == "within":
        return ("On this slice the learned table and the fixed principal components are within the seeds' spread "
                "of each other: the runs do not reproduce the paper's negative result beyond what the seeds alone "
                "could give.")
    if d["difference"] < 0:
        return ("On this slice the table learned with the network gave a lower test perplexity than the fixed "
                "principal components, beyond the seeds' spread: the paper's negative result holds in these runs"
                + edge_clause(doc, f["fixed_pca"]["lr"]) + ".")
    return ("On this slice the fixed principal components gave a lower test perplexity than the learned table, "
            "beyond the seeds' spread: the paper's negative result does not hold in these runs"
            + edge_clause(doc, f["learned"]["lr"], "learned table's") + ".")


def edge_clause(doc: dict, lr: float, whose: str = "fixed components'") -> str:
    """', though the fixed components' rate, 0.3, is the bottom of the grid, and a smaller one, not tried, might
    have done better' when the losing table's rate is at an edge of the grid
    (:func:`~nplm_edu.analysis.comparison.grid_edge`), else ''."""
    edge = grid_edge(doc, lr)
    if edge is None:
        return ""
    return (f", though the {whose} rate, {lr:g}, is the {edge} of the grid, and a "
            f"{'smaller' if edge == 'bottom' else 'larger'} one, not tried, might have done better")
