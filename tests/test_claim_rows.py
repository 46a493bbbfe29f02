"""What chapter 8 shows of the central claim's results file: nplm_edu.analysis.claim_rows.

The documents are built the way ``reproduce central-claim`` writes its file: seed rows and count rows with
the fields its writers give them, rebuilt into grid, summary, tables and cost by the writer's own
``claim_runs.rebuilt``; so they have the file's shape, with numbers chosen to make every verdict known.
"""

import math
from dataclasses import replace

import pytest

from nplm_edu.analysis import claim_rows as cr
from nplm_edu.errors import UserError
from nplm_edu.experiments.claim_runs import rebuilt
from nplm_edu.experiments.protocol import PROTOCOL

# gaps per cell and network, one per seed 0, 1, 2 (the numbers behind every verdict below):
# 8,000: learned [-0.10, -0.03] meets PCA's [-0.05, -0.02] (within), clears random's [-0.15, -0.11] (beyond)
# 40,000: PCA [-0.011, -0.006] clears learned [-0.28, -0.19] and random [-0.22, -0.17]; those two meet
GAPS = {"animal-verb/8000": {"learned": [-0.03, -0.05, -0.10], "fixed_pca": [-0.04, -0.05, -0.02],
                             "fixed_random": [-0.15, -0.14, -0.11]},
        "animal-verb/40000": {"learned": [-0.24, -0.19, -0.28], "fixed_pca": [-0.01, -0.006, -0.011],
                              "fixed_random": [-0.17, -0.22, -0.22]}}
COUNT_GAPS = {"kn3": -0.19, "kn5": -0.30, "interpolated_trigram": -0.12, "grammar": 0.001}
ORDINARY = -1.5


def scores(gap: float) -> dict:
    return {"heldout": ORDINARY + gap, "completing": -2.0 + gap, "after": -1.4, "other": -1.5, "ordinary": ORDINARY,
            "heldout_ppl": math.exp(-(ORDINARY + gap)), "ordinary_ppl": math.exp(-ORDINARY)}


def seed_row(cell: str, variant: str, model: str, seed: int, lr: float = 1.0, **more) -> dict:
    method = f"{cell}/{variant}"
    return {"run": f"{method}/seed{seed}", "method": method, "seed": seed, "lr": lr,
            "lr_grid": {"0.3": 5.0, "1": 4.7, "3": 5.1}, "valid_ppl": 4.7, "test_ppl": 4.8 + seed,
            "epochs": 5 + seed, "best_epoch": 2, "stopped_early": True, "diverged": None, "reached_max_epochs": False,
            "cpu_seconds_training": 360.0, "cpu_seconds_test": 1.0, "history": [], "cell": cell, "model": model,
            **more}


def synthetic_rows(gaps=GAPS) -> list[dict]:
    rows = []
    for cell, nets in gaps.items():
        for name, g in COUNT_GAPS.items():
            rows.append({"run": f"{cell}/{name}", "method": f"{cell}/{name}", "cell": cell, "model": name, "seed": None,
                         "scores": scores(g), "gap": g, "cpu_seconds_counts": 36.0,
                         **({"pairs": [["cat", "walking"]], "tokens": {"train": int(cell.split("/")[1])},
                             "heldout_sentences_share": 0.09} if name == "grammar" else {})})
        for variant, values in nets.items():
            rows += [seed_row(cell, variant, f"network_{variant}", s, 0.3 if variant == "fixed_pca" else 1.0,
                              scores=scores(g), gap=g) for s, g in enumerate(values)]
    return rows


def novelty_row(seed: int, near: dict, control: dict) -> dict:
    """A Brown network's seed row: ``near`` / ``control``: {group: network minus KN5}."""
    s = {**{f"near_{g}_minus_kn5": v for g, v in near.items()},
         **{f"control_{g}_minus_kn5": v for g, v in control.items()},
         "share_seen": 0.30, "share_neighbour_seen": 0.11, "share_no_neighbour": 0.59}
    oov = {"words": 10597, "tokens": 48313, "mean_log_prob_unk": -5.5 - 0.1 * seed, "mean_log_prob_own": -5.7,
           "mean_log_prob_other": -5.8, "own_better": 0.46}
    return seed_row("brown", "mlp9", "network", seed, scores=s, oov=oov,
                    groups={g: {"network_higher": 0.7} for g in near},
                    neighbour_examples={"three": ["four", "six", "five", "two", "seven", "ten"]})


NEAR = [{"seen": -0.49, "neighbour_seen": v, "no_neighbour": w} for v, w in ((0.45, 0.43), (0.46, 0.44), (0.44, 0.42))]
CONTROL = [{"seen": -0.49, "neighbour_seen": v, "no_neighbour": 0.43} for v in (0.44, 0.45, 0.43)]
SLICE_TEST = {"learned": [370.0, 375.0, 380.0], "fixed_pca": [610.0, 615.0, 620.0],
              "fixed_random": [700.0, 705.0, 710.0]}


def brown_rows(near=NEAR, control=CONTROL, slice_test=SLICE_TEST) -> list[dict]:
    rows = [{"run": "brown/kn5", "method": "brown/kn5", "cell": "brown", "model": "kn5", "seed": None,
             "scores": {"test_ppl": 300.0}}]
    rows += [novelty_row(s, n, c) for s, (n, c) in enumerate(zip(near, control))]
    for variant, values in slice_test.items():
        rows += [{**seed_row("brown-slice", variant, variant, s), "test_ppl": t} for s, t in enumerate(values)]
    return rows


def make_doc(rows, protocol=PROTOCOL) -> dict:
    header = {"design": {"families": {"animal-verb": [["cat", "walking"]], "time-animal": [["now", "horse"]]},
                         "train_tokens": [8000, 40000]}, "protocol": protocol.record(), "runs": rows}
    return rebuilt(header)


@pytest.fixture
def doc():
    return make_doc(synthetic_rows() + brown_rows())


def test_read_claim_refuses_a_file_of_before_the_protocol(doc):
    assert cr.read_claim(doc) is doc
    with pytest.raises(UserError, match="before the comparison protocol"):
        cr.read_claim({"quick": False, "synthetic": [], "brown": {}})


def test_cells_in_the_design_order_and_the_cell_info(doc):
    assert cr.synthetic_cells(doc) == ["animal-verb/8000", "animal-verb/40000"]  # no time-animal row: left out
    assert cr.cell_info(doc, "animal-verb/8000")["tokens"] == {"train": 8000}
    assert cr.cell_words("animal-verb/40000") == "animal-verb, 40,000 tokens"


def test_score_and_gap_rows_give_mean_std_and_each_seed(doc):
    body, head = cr.score_rows(doc, "animal-verb/8000")
    assert [r[0] for r in body] == ["C learned", "C fixed at random", "C fixed by PCA", "Kneser-Ney trigram",
                                    "Kneser-Ney 5-gram", "interpolated trigram", "the grammar itself"]
    # learned heldout: -1.5 + (-0.03, -0.05, -0.10) = -1.53, -1.55, -1.60: mean -1.56; deviations 0.03, 0.01,
    # -0.04: std sqrt(0.0026 / 2) = 0.036
    assert body[0][1] == "-1.560 ± 0.036" and body[0][5] == "-1.500 ± 0.000"
    assert body[4][1] == "-1.800"  # the 5-gram, one value: -1.5 - 0.30
    body, head = cr.gap_rows(doc, "animal-verb")
    assert head[0] == ["", ("8,000 tokens", 2), ("40,000 tokens", 2)]
    assert body[0] == ["C learned", "-0.060 ± 0.036", "-0.030, -0.050, -0.100", "-0.237 ± 0.045",
                       "-0.240, -0.190, -0.280"]  # 40,000: mean -0.71 / 3; std sqrt((0.0009+0.0016+0.0049) / 2)
    assert body[4] == ["Kneser-Ney 5-gram", "-0.300", "", "-0.300", ""]


def test_each_pair_of_networks_by_the_seeds_spread(doc):
    d = cr.gap_compared(doc, "animal-verb/8000", "network_learned", "network_fixed_pca")
    assert d["order"] == "within" and d["difference"] == pytest.approx(-0.06 - (-0.11 / 3))
    d = cr.gap_compared(doc, "animal-verb/8000", "network_learned", "network_fixed_random")
    assert d["order"] == "a"  # -0.10 > -0.11: the ranges do not meet, the learned gap is narrower
    s = cr.cell_sentences(doc, "animal-verb/40000")
    assert s[0].startswith("C learned -0.237 ± 0.045 against C fixed by PCA -0.009 ± 0.003: a difference of -0.228")
    assert s[0].endswith("beyond the seeds' spread: C fixed by PCA's gap is narrower.")
    assert s[1].endswith("within the seeds' spread.")


def test_the_conclusion_is_worded_from_the_rows(doc):
    out = cr.conclusion(doc)
    assert out[0] == ("C learned against C fixed by PCA: C fixed by PCA's gap is narrower, beyond the seeds' spread, "
                      "with animal-verb, 40,000 tokens; the two are within the seeds' spread with animal-verb, "
                      "8,000 tokens.")
    assert "learned or not" in out[-1] and "every cell" in out[-1]
    # the learned table ahead of both fixed ones in both cells: the conclusion says learning C added to them
    gaps = {c: {**v, "learned": [-0.001, -0.002, -0.003]} for c, v in GAPS.items()}
    out = cr.conclusion(make_doc(synthetic_rows(gaps)))
    assert "learning C added" in out[-1] and "learned or not" not in out[-1]
    assert "animal-verb, 8,000 tokens and animal-verb, 40,000 tokens" in out[-1]
    # every network within the others' spread: no table singled out
    same = {c: {v: [-0.1, -0.2, -0.15] for v in nets} for c, nets in GAPS.items()}
    assert "single out neither" in cr.conclusion(make_doc(synthetic_rows(same)))[-1]


def test_one_seed_each_leaves_no_spread_to_judge_by():
    # seed 0 alone: 8,000 tokens, learned -0.03 against random -0.15 would be "beyond" if two points were two
    # ranges that do not meet; 40,000 tokens, PCA -0.01 against learned -0.24 likewise
    rows = [r for r in synthetic_rows() + brown_rows() if r["seed"] in (0, None)]
    one = make_doc(rows, replace(PROTOCOL, seeds=(0,)))
    d = cr.gap_compared(one, "animal-verb/8000", "network_learned", "network_fixed_random")
    assert d["order"] is None and d["difference"] == pytest.approx(-0.03 - (-0.15))
    s = cr.cell_sentences(one, "animal-verb/40000")
    assert s[0] == ("C learned -0.240 against C fixed by PCA -0.010: a difference of -0.230, one seed each: no "
                    "spread to judge by.")  # no "narrower": -0.24 - (-0.01)
    out = cr.conclusion(one)
    assert out[0] == ("C learned against C fixed by PCA: one seed each leaves no spread to judge by with "
                      "animal-verb, 8,000 tokens and animal-verb, 40,000 tokens.")
    assert "beyond" not in " ".join(out) and "no spread to judge the gaps by" in out[-1]
    # Brown: near neighbours' group 0.45 against no neighbour's 0.43, learned 370 against PCA's 610: unjudged
    assert "no spread to judge by whether its advantage is larger" in cr.novelty_sentences(one)[-1]
    assert "one seed" in cr.fixed_conclusion(one) and "negative result" not in cr.fixed_conclusion(one)
    # 370 - 610 = -240, 240 / 610 = 39.3%
    assert cr.fixed_sentences(one)[0].endswith("lower by 240.0 (39.3%), one seed each: no spread to judge by.")


def test_protocol_rows_edges_and_cost(doc):
    body, head = cr.protocol_rows(doc)
    assert head[0] == ["network", "lr 0.3", "lr 1", "lr 3", "chosen", "epochs", "stopped early", "at the cap"]
    assert body[0] == ["animal-verb, 8,000 tokens, C learned", "5.0", "4.7", "5.1", "1", "5, 6, 7", "3 of 3", "0"]
    assert ["animal-verb, 8,000 tokens, C fixed by PCA", "5.0", "4.7", "5.1", "0.3 (bottom)", "5, 6, 7", "3 of 3",
            "0"] in body
    assert cr.at_edges(doc) == {"bottom": ["animal-verb, 8,000 tokens, C fixed by PCA",
                                           "animal-verb, 40,000 tokens, C fixed by PCA"]}
    assert cr.protocol_text(doc).startswith("its learning rate chosen on validation from 0.3, 1 and 3 after 2 epochs")
    # 18 synthetic seed rows + 3 Brown + 9 slice = 30 rows of 360 s of training (no grid seconds here): 3.00 h;
    # scoring 30 x 1 s + 8 count rows x 36 s = 318 s: 0.09 h; in all 11,118 s: 3.1 h
    assert cr.cost_text(doc) == "3.1 CPU hours (3.00 of training, the grid's other rates included, 0.09 of scoring)"


def test_brown_novelty_oov_and_neighbours(doc):
    n = cr.novelty(doc)
    assert n["kn5_test_ppl"] == 300.0 and n["near_neighbour_seen"]["mean"] == pytest.approx(0.45)
    body, _ = cr.novelty_rows(doc)
    assert body[1] == ["unseen; seen with a near neighbour", "11.0%", "0.450 ± 0.010", "70%", "0.440 ± 0.010"]
    # near neighbours' group [0.44, 0.46] meets no neighbour's [0.42, 0.44] and the control's [0.43, 0.45]
    assert "is not larger, beyond the seeds' spread" in cr.novelty_sentences(doc)[-1]
    # no neighbour's group 0.2 lower: [0.22, 0.24], below the near neighbours' [0.44, 0.46]; the control's still meets
    larger = [{**g, "no_neighbour": g["no_neighbour"] - 0.2} for g in NEAR]
    s = cr.novelty_sentences(make_doc(synthetic_rows() + brown_rows(near=larger)))
    assert s[0].endswith("a difference of +0.220 ± 0.014, beyond the seeds' spread.")  # sqrt(2) x 0.010
    assert "but random words of the same frequency mark tokens" in s[-1]
    # and the control's group 0.2 lower too, [0.23, 0.25]: the near neighbours mark where the advantage is
    clear = make_doc(synthetic_rows() + brown_rows(
        near=larger, control=[{**g, "neighbour_seen": g["neighbour_seen"] - 0.2} for g in CONTROL]))
    assert "largest where a near neighbour" in cr.novelty_sentences(clear)[-1]
    o = cr.oov(doc)
    assert (o["words"], o["tokens"], o["seeds"]) == (10597, 48313, 3)
    assert o["mean_log_prob_unk"]["mean"] == pytest.approx(-5.6)  # -5.5, -5.6, -5.7
    assert cr.neighbour_rows(doc)[0] == [["three", "four six five two seven"]]
    # C(j) -5.7 every seed against C(<unk>)'s [-5.7, -5.5]: they meet; against C(j')'s -5.8: they do not
    text = cr.oov_sentence(doc)
    assert "10,597 unknown words" in text and "$C(j)$ gives these tokens -5.700 ± 0.000 nats per token" in text
    assert "`<unk>` as trained -5.600 ± 0.100 ($C(j)$ minus it: -0.100 ± 0.100, within the seeds' spread)" in text
    assert "$C(j')$ -5.800 ± 0.000 ($C(j)$ minus it: +0.100 ± 0.000, beyond the seeds' spread)" in text


def test_brown_fixed_features(doc):
    body, _ = cr.fixed_rows(doc)
    assert body[0] == ["C learned", "1", "5, 6, 7", "4.7 ± 0.0", "375.0 ± 5.0"]
    s = cr.fixed_sentences(doc)
    assert s[0] == ("C learned scores 375.0 against C fixed by PCA's 615.0, lower by 240.0 (39.0%), beyond the seeds' "
                    "spread.")  # 240 / 615 = 39.0%
    assert "negative result holds" in cr.fixed_conclusion(doc)  # learned [370, 380] below PCA's [610, 620]
    meets = {**SLICE_TEST, "fixed_pca": [379.0, 390.0, 400.0]}  # 379 < 380: the ranges meet
    assert "within the seeds' spread" in cr.fixed_conclusion(make_doc(synthetic_rows() + brown_rows(slice_test=meets)))
    below = {**SLICE_TEST, "fixed_pca": [300.0, 310.0, 320.0]}
    assert "does not hold" in cr.fixed_conclusion(make_doc(synthetic_rows() + brown_rows(slice_test=below)))
    # the losing table's rate at an edge of the grid (0.3 of 0.3, 1, 3): the conclusion says a rate beyond it
    # was not tried; at 1 (the fixture's rate, inside the grid) it says nothing of the kind
    assert "not tried" not in cr.fixed_conclusion(doc)
    rows = [{**r, "lr": 0.3} if r["method"] == "brown-slice/fixed_pca" else r for r in synthetic_rows() + brown_rows()]
    assert cr.fixed_conclusion(make_doc(rows)).endswith(
        "holds in these runs, though the fixed components' rate, 0.3, is the bottom of the grid, and a smaller one, "
        "not tried, might have done better.")


def test_a_missing_brown_part_is_named_not_a_key_error():
    doc = make_doc(synthetic_rows())
    with pytest.raises(cr.MissingPart, match="0 of the 1 rows of brown/kn5.*--brown-parts novel-trigrams"):
        cr.novelty(doc)
    for f in (cr.oov, cr.neighbour_rows):
        with pytest.raises(cr.MissingPart, match="0 of the 3 rows of brown/network.*--brown-parts novel-trigrams"):
            f(doc)
    rows = [r for r in brown_rows() if r["run"] != "brown-slice/fixed_random/seed2"]
    with pytest.raises(cr.MissingPart, match="2 of the 3 rows of brown-slice/fixed_random"):
        cr.fixed_rows(make_doc(synthetic_rows() + rows))
    diverged = [{**r, "valid_ppl": None} if r["run"] == "brown/mlp9/seed1" else r for r in brown_rows()]
    with pytest.raises(cr.MissingPart, match="2 of the 3 rows of brown/network"):  # a seed without scores
        cr.novelty(make_doc(synthetic_rows() + diverged))
    assert issubclass(cr.MissingPart, UserError) and not issubclass(cr.MissingPart, KeyError)
