"""experiments/protocol.py: the learning rate chosen on validation only, seeds summarized as numpy does,
a killed seed run resumed, rows of two writers kept."""

import hashlib
import json
import math
import time

import numpy as np
import pytest

import nplm_edu
from nplm_edu.analysis.quality import mean_std, seeds_time_to_quality
from nplm_edu.data.corpus import Corpus, load_corpus
from nplm_edu.errors import UserError
from nplm_edu.experiments import common
from nplm_edu.experiments.protocol import (Method, Protocol, choose_lr, done_rows, run_seeds,
                                           scored, summary, train_run, with_summaries, write_rows)
from nplm_edu.experiments.run_record import sessions
from nplm_edu.experiments.skeleton import merge_results
from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.training.backends import SerialBackend
from nplm_edu.training.trainer import TrainConfig

TINY = Protocol(lrs=(0.03, 0.3, 3.0), grid_epochs=1, patience=1, max_epochs=3, seeds=(0, 1, 2))
CFG = TrainConfig(batch=64, decay_rate=0.0, weight_decay=0.0)


class NoTestCorpus(Corpus):
    """A corpus whose test split raises when anything reads it."""

    @property
    def test(self):
        raise AssertionError("the test split was read")

    def windows(self, split, n):
        if split == "test":
            raise AssertionError("the test split was read")
        return super().windows(split, n)


@pytest.fixture(scope="module")
def corpus():
    return load_corpus("synthetic", synthetic_tokens=2000, seed=3)


def nplm_method(V, scored=None, backend=None):
    """An NPLM (n 3, m 6, h 8) as a method; ``scored`` collects the splits it is scored on."""
    def build(lr, seed):
        model = NPLM(NPLMConfig(V=V, n=3, m=6, h=8, direct=False, seed=seed))
        cfg = TrainConfig(**{**CFG.__dict__, "lr": lr, "seed": seed})
        return (model, cfg) if backend is None else (model, cfg, backend(model, cfg))

    def score(model, corpus, split):
        if scored is not None:
            scored.append(split)
        return float(model.perplexity(*corpus.windows(split, model.order)))
    return Method("nplm", build, score)


def test_protocol_settings_are_checked():
    for bad, setting in ((dict(lrs=(0.1, 1.0)), "lrs"), (dict(lrs=(0.1, 0.1, 1.0)), "lrs"),
                         (dict(lrs=(0.1, -1.0, 1.0)), "lrs"), (dict(seeds=(0, 1)), "seeds"),
                         (dict(patience=0), "patience"), (dict(grid_epochs=30, max_epochs=30), "grid_epochs")):
        with pytest.raises(UserError, match=setting) as e:
            Protocol(**bad).validate()
        assert e.value.setting == setting
    Protocol().validate()
    rec = Protocol().record()
    assert rec["lrs"] == [0.3, 1.0, 3.0] and rec["seeds"] == [0, 1, 2] and json.loads(json.dumps(rec)) == rec


def test_choose_lr_picks_the_lowest_validation_perplexity_and_never_reads_test(corpus, tmp_path):
    guarded = NoTestCorpus(corpus.name, corpus.vocab, corpus.ids, corpus.bounds)
    scored = []
    choice = choose_lr(nplm_method(corpus.V, scored), guarded, TINY, tmp_path)
    assert scored == []  # the grid is judged on the trainer's validation perplexity alone
    assert set(choice["grid"]) == set(TINY.lrs)
    values = {lr: v for lr, v in choice["grid"].items() if v is not None}
    assert choice["lr"] == min(values, key=values.get)
    for lr in TINY.lrs:  # each value is the validation perplexity after the grid's budget, from its run folder
        hist = json.loads((tmp_path / "nplm" / f"lr{lr:g}-seed0" / "history.json").read_text())
        assert len(hist["epochs"]) == TINY.grid_epochs and hist["epochs"][-1]["valid_ppl"] == choice["grid"][lr]
    # the first seed's long run goes on from its grid run (the same trajectory), not from scratch
    grid_run = json.loads((tmp_path / "nplm" / f"lr{choice['lr']:g}-seed0" / "history.json").read_text())["epochs"]
    (row,) = run_seeds(nplm_method(corpus.V, scored), corpus, TINY, choice, tmp_path, seeds=(0,))
    assert row["history"][0]["seconds"] == round(grid_run[0]["seconds"], 4) and row["epochs"] > TINY.grid_epochs
    assert scored == ["valid", "test"]
    assert all(e["cpu_seconds"] > 0 for e in row["history"]) and row["cpu_seconds_training"] > 0
    again = choose_lr(nplm_method(corpus.V, scored), guarded, TINY, tmp_path)  # the same, read from the run folders
    assert again == choice and scored == ["valid", "test"]


def test_a_diverging_grid_value_is_never_chosen(corpus, tmp_path):
    protocol = Protocol(lrs=(0.3, 1e4, 1e6), grid_epochs=1, patience=1, max_epochs=3)
    choice = choose_lr(nplm_method(corpus.V), corpus, protocol, tmp_path)
    assert choice["lr"] == 0.3 and choice["grid"][1e4] is None and choice["grid"][1e6] is None
    with pytest.raises(UserError, match="every learning rate of the grid"):
        choose_lr(nplm_method(corpus.V), corpus, Protocol(lrs=(1e5, 1e6, 1e7), grid_epochs=1, max_epochs=3), tmp_path)


def test_mean_std_is_numpys():
    v = [251.3, 260.9, 248.2]
    s = mean_std(v)
    assert s["mean"] == pytest.approx(np.mean(v), rel=1e-15) and s["std"] == pytest.approx(np.std(v, ddof=1), rel=1e-15)
    assert s["values"] == v and s["n"] == 3 and mean_std([5.0])["std"] is None
    rows = [{"seed": k, "lr": 1.0, "valid_ppl": x, "test_ppl": x + 10, "epochs": 9, "stopped_early": True,
             "reached_max_epochs": False} for k, x in zip((2, 0, 1), v)]
    out = summary(rows)
    assert out["seeds"] == [0, 1, 2] and out["valid_ppl"]["values"] == [260.9, 248.2, 251.3]
    assert out["test_ppl"]["mean"] == pytest.approx(np.mean(v) + 10) and out["stopped_early"] == 3


class Killed(Exception):
    pass


def killed_after(updates):
    """A serial backend whose process 'dies' after ``updates`` updates (a checkpoint is left at the last
    epoch's end)."""
    class Dying(SerialBackend):
        calls = 0

        def update(self, *args):
            Dying.calls += 1
            if Dying.calls > updates:
                raise Killed()
            return super().update(*args)
    return Dying


def test_a_killed_seed_run_resumes_and_two_writers_keep_their_rows(corpus, tmp_path):
    out, root = tmp_path / "r.json", tmp_path / "runs"
    protocol = Protocol(lrs=(0.1, 0.3, 1.0), grid_epochs=1, patience=5, max_epochs=3, seeds=(0, 1, 2))
    choice = {"lr": 0.3, "grid": {0.1: 9.0, 0.3: 8.0, 1.0: 10.0}}
    head = {"corpus": corpus.name, "V": corpus.V}
    per_epoch = -(-len(corpus.windows("train", 3)[1]) // CFG.batch)
    with pytest.raises(Killed):  # seed 1 killed in its third epoch
        run_seeds(nplm_method(corpus.V, backend=killed_after(2 * per_epoch + 1)), corpus, protocol, choice, root,
                  out=out, target="output-layers", doc=head, seeds=(1,))
    before = json.loads((root / "nplm" / "lr0.3-seed1" / "history.json").read_text())["epochs"]
    assert len(before) == 2 and not out.exists()
    scored = []
    rows = run_seeds(nplm_method(corpus.V, scored), corpus, protocol, choice, root, out=out, target="output-layers",
                     doc=head, seeds=(1,))
    after = rows[0]["history"]
    assert len(after) == 3 and [e["seconds"] for e in after[:2]] == [round(e["seconds"], 4) for e in before]
    assert scored == ["valid", "test"]  # test scored once, for the chosen setting
    assert rows[0]["reached_max_epochs"] and not rows[0]["stopped_early"]
    # another process's seeds merged into the same file: every row kept, the summary over all three
    others = run_seeds(nplm_method(corpus.V), corpus, protocol, choice, root, out=out, target="output-layers",
                       doc=head, seeds=(0, 2))
    doc = json.loads(out.read_text())
    assert sorted(r["run"] for r in doc["runs"]) == ["nplm/seed0", "nplm/seed1", "nplm/seed2"]
    assert doc["protocol"] == protocol.record() and doc["grid"]["nplm"]["chosen_lr"] == 0.3
    tests = [r["test_ppl"] for r in sorted(rows + others, key=lambda r: r["seed"])]
    assert doc["summary"]["nplm"]["test_ppl"]["mean"] == pytest.approx(np.mean(tests))
    assert all(math.isfinite(t) for t in tests) and "commit" in doc  # the provenance of the results writer
    scored.clear()  # a seed already in the file is neither trained nor scored again
    again = run_seeds(nplm_method(corpus.V, scored), corpus, protocol, choice, root, out=out, target="output-layers",
                      doc=head, seeds=(1,))
    assert scored == [] and again[0]["test_ppl"] == rows[0]["test_ppl"]
    write_rows(out, "output-layers", head, [], protocol, time.monotonic())
    assert len(json.loads(out.read_text())["runs"]) == 3


def test_the_same_functions_run_a_recurrent_method_and_a_sampled_output_layer(corpus, tmp_path):
    """A method is any (model, config[, backend]) builder: an LSTM read as streams, scored over the
    stream, and an MLP with an NCE output layer timed as the output-layer table times it (updates only)."""
    from nplm_edu.analysis.recurrent import ppl
    from nplm_edu.experiments.output_methods import TimedBackend
    from nplm_edu.models.rnn import RecurrentConfig
    from nplm_edu.models.sampled_softmax import NCESoftmax
    from nplm_edu.models.sparse_output import train_counts
    from nplm_edu.numerics.recurrent import recurrent_model
    from nplm_edu.numerics.sparse import SparseNPLM
    from nplm_edu.training.stream import StreamBackend, StreamConfig, split_log_probs

    def lstm(lr, seed):
        model = recurrent_model(RecurrentConfig(V=corpus.V, cell="lstm", m=6, h=8, seed=seed))
        cfg = TrainConfig(batch=4, lr=lr, decay_rate=0.0, weight_decay=0.0, seed=seed)
        return model, cfg, StreamBackend(model, cfg, StreamConfig(T=12, clip=1.0))

    def nce(lr, seed):
        out = NCESoftmax(corpus.V, 8, train_counts(corpus.train, corpus.V), 5, seed=seed)
        model = SparseNPLM(NPLMConfig(V=corpus.V, n=3, m=6, h=8, direct=False, seed=seed), out)
        cfg = TrainConfig(**{**CFG.__dict__, "lr": lr, "seed": seed})
        return model, cfg, TimedBackend(model, cfg)

    protocol = Protocol(lrs=(0.1, 0.5, 1.0), grid_epochs=1, patience=1, max_epochs=2)
    methods = (Method("lstm", lstm, lambda m, c, s: ppl(split_log_probs(m, c, s))), Method("nce", nce))
    for method in methods:
        choice = choose_lr(method, corpus, protocol, tmp_path)
        rows = run_seeds(method, corpus, protocol, choice, tmp_path, out=tmp_path / "r.json", target="recurrent",
                         doc={"corpus": corpus.name})
        assert [r["seed"] for r in rows] == [0, 1, 2] and all(1 < r["test_ppl"] < corpus.V for r in rows)
    doc = json.loads((tmp_path / "r.json").read_text())
    assert set(doc["summary"]) == {"lstm", "nce"} and len(doc["runs"]) == 6
    nce_rows = [r for r in doc["runs"] if r["method"] == "nce"]
    reach = seeds_time_to_quality([r["history"] for r in nce_rows], 1e6, clock=("train_seconds", "train_cpu_seconds"))
    assert all(q["reached"] == 3 for q in reach)  # every run is within 5% of a reference of 1e6 at its first epoch
    first = [r["history"][0]["train_seconds"] for r in nce_rows]
    assert reach[0]["wall_seconds"]["values"] == first


def test_a_seed_run_diverging_at_the_chosen_rate_ends_there_and_keeps_its_row(corpus, tmp_path):
    per_epoch = -(-len(corpus.windows("train", 3)[1]) // CFG.batch)

    class Diverging(SerialBackend):
        calls = 0

        def update(self, *args):
            Diverging.calls += 1
            loss = super().update(*args)
            return float("nan") if Diverging.calls > per_epoch + 3 else loss  # in the second epoch

    protocol = Protocol(lrs=(0.1, 0.3, 1.0), grid_epochs=1, patience=5, max_epochs=3, seeds=(0, 1, 2))
    choice = {"lr": 0.3, "grid": {0.1: 9.0, 0.3: 8.0, 1.0: 10.0}}
    (row,) = run_seeds(nplm_method(corpus.V, backend=Diverging), corpus, protocol, choice, tmp_path, seeds=(1,))
    assert "try a smaller learning rate" in row["diverged"] and row["epochs"] == 1 and not row["stopped_early"]
    assert math.isfinite(row["valid_ppl"]) and row["valid_ppl"] == pytest.approx(row["history"][0]["valid_ppl"], rel=1e-6)
    assert summary([row])["diverged"] == 1


def test_a_seed_diverging_before_its_first_validation_gets_a_row_that_says_so_and_is_not_retried(corpus, tmp_path):
    class DivergingSeed1(SerialBackend):
        seed1_updates = 0

        def update(self, *args):
            loss = super().update(*args)
            if self.config.seed == 1:
                DivergingSeed1.seed1_updates += 1
                return float("nan")  # seed 1: at its first update
            return loss

    protocol = Protocol(lrs=(0.1, 0.3, 1.0), grid_epochs=1, patience=5, max_epochs=2, seeds=(0, 1, 2))
    choice = {"lr": 0.3, "grid": {0.1: 9.0, 0.3: 8.0, 1.0: 10.0}}
    out, method = tmp_path / "r.json", nplm_method(corpus.V, backend=DivergingSeed1)

    def fill():
        return run_seeds(method, corpus, protocol, choice, tmp_path / "runs", out=out, target="output-layers",
                         doc={"corpus": corpus.name}, seeds=(0, 1, 2))

    rows = fill()
    doc = json.loads(out.read_text())
    assert [r["run"] for r in rows] == [r["run"] for r in doc["runs"]] == ["nplm/seed0", "nplm/seed1", "nplm/seed2"]
    (bad,) = [r for r in doc["runs"] if r["seed"] == 1]
    assert "no checkpoint was written yet" in bad["diverged"] and bad["valid_ppl"] is None and bad["test_ppl"] is None
    assert bad["epochs"] == 0 and bad["history"] == [] and bad["provenance"]["commit"] == common.git_commit()
    s = doc["summary"]["nplm"]
    assert s["diverged"] == 1 and s["diverged_unscored"] == [1] and s["seeds"] == [0, 1, 2]
    assert s["valid_ppl"]["n"] == 2 and s["valid_ppl"]["values"] == [r["valid_ppl"] for r in rows if r["seed"] != 1]
    assert s["epochs"][1] == 0
    tried = DivergingSeed1.seed1_updates
    again = fill()  # a rerun: every row is in the file, seed 1 included, so nothing trains again
    assert DivergingSeed1.seed1_updates == tried and again == json.loads(out.read_text())["runs"]


# --------------------------------------------------------------------------- which code trained each row
OLD = "9cda8eb"  # the commit in the provenance block of a file written before rows recorded theirs


def at_commit(monkeypatch, commit, modified=False):
    """Every provenance read from now on names ``commit`` (and whether the package differed from it)."""
    monkeypatch.setattr(common, "git_commit", lambda: commit)
    monkeypatch.setattr(common, "package_modified", lambda: modified)


def old_row(method, seed, lr=0.3):
    """A seed's row as the code before per-row provenance wrote it (the keys of output_layers.json's rows)."""
    history = [{"epoch": e, "updates": 10 * e, "train_ppl": 12.0 - e, "lr": lr, "valid_ppl": 10.0 - e, "seconds": 0.5,
                "cpu_seconds": 0.4, "train_seconds": 0.45, "train_cpu_seconds": 0.35, "valid_seconds": 0.05}
               for e in (1, 2, 3)]
    return {"run": f"{method}/seed{seed}", "method": method, "seed": seed, "lr": lr,
            "lr_grid": {"0.1": 9.0, "0.3": 8.0, "1": 10.0}, "valid_ppl": 7.0 + seed, "test_ppl": 7.5 + seed,
            "epochs": 3, "best_epoch": 3, "stopped_early": False, "diverged": None, "reached_max_epochs": True,
            "wall_seconds_training": 1.5, "cpu_seconds_training": 1.2, "history": history,
            "examples_per_cpu_second": 3639.1, "speedup_vs_full": 0.99}


def old_writer(out, head, protocol, rows):
    """What the code before per-row provenance did to merge rows (its write_rows), at commit OLD."""
    header = {**head, "protocol": protocol.record()}
    return merge_results(out, "output-layers", header, {r["run"]: r for r in rows}, time.monotonic(),
                         same=("protocol", *head), key="run", then=with_summaries, field="runs")


def test_a_resumed_run_names_every_commit_it_trained_under(corpus, tmp_path, monkeypatch):
    out, root = tmp_path / "r.json", tmp_path / "runs"
    protocol = Protocol(lrs=(0.1, 0.3, 1.0), grid_epochs=1, patience=5, max_epochs=3, seeds=(0, 1, 2))
    head = {"corpus": corpus.name, "V": corpus.V}
    at_commit(monkeypatch, "aaaaaaa")
    choice = choose_lr(nplm_method(corpus.V), corpus, protocol, root)
    assert {lr: p["commits"] for lr, p in choice["provenance"].items()} == {lr: ["aaaaaaa"] for lr in protocol.lrs}
    per_epoch = -(-len(corpus.windows("train", 3)[1]) // CFG.batch)
    with pytest.raises(Killed):  # seed 1 killed in its third epoch, at commit aaaaaaa
        run_seeds(nplm_method(corpus.V, backend=killed_after(2 * per_epoch + 1)), corpus, protocol, choice, root,
                  out=out, target="output-layers", doc=head, seeds=(1,))
    at_commit(monkeypatch, "bbbbbbb", modified=True)  # resumed by other code
    started = time.monotonic() - 1000.0
    rows = run_seeds(nplm_method(corpus.V), corpus, protocol, choice, root, out=out, target="output-layers", doc=head,
                     seeds=(0, 1), started=started)
    seed0, seed1 = rows
    assert seed1["provenance"]["commits"] == ["aaaaaaa", "bbbbbbb"] and seed1["provenance"]["commit"] == "bbbbbbb"
    assert [s["from_epoch"] for s in seed1["provenance"]["sessions"]] == [1, 3]
    assert seed1["provenance"]["package_modified_since_commit"] is True  # one session's package differed
    assert seed1["provenance"]["nplm_edu"] == [nplm_edu.__version__]  # pyproject.toml's, the same
    # seed 0 went on from its grid run: the grid's epoch under aaaaaaa, the rest under bbbbbbb
    assert [(s["commit"], s["from_epoch"]) for s in seed0["provenance"]["sessions"]] == [("aaaaaaa", 1), ("bbbbbbb", 2)]
    doc = json.loads(out.read_text())
    assert doc["commit"] == "bbbbbbb" and doc["wall_seconds"] >= 1000.0  # the file's: its last writer's, from its start
    grid = doc["grid"]["nplm"]["provenance"]
    assert {lr: p["commits"] for lr, p in grid.items()} == {f"{lr:g}": ["aaaaaaa"] for lr in protocol.lrs}
    # a run found complete trains nothing and records no session
    at_commit(monkeypatch, "ccccccc")
    train_run(nplm_method(corpus.V), corpus, choice["lr"], 1, protocol.max_epochs, protocol, root)
    assert [s["commit"] for s in sessions(root / "nplm" / f"lr{choice['lr']:g}-seed1")] == ["aaaaaaa", "bbbbbbb"]


def test_rows_of_older_code_take_the_files_commit_and_keep_it_through_merges(corpus, tmp_path, monkeypatch):
    out, root = tmp_path / "r.json", tmp_path / "runs"
    protocol = Protocol(lrs=(0.1, 0.3, 1.0), grid_epochs=1, patience=5, max_epochs=2, seeds=(0, 1, 2))
    head = {"corpus": corpus.name, "V": corpus.V}
    at_commit(monkeypatch, OLD)
    old_writer(out, head, protocol, [old_row("nplm", 0), old_row("nplm", 1), old_row("full", 0, lr=1.0)])
    disk = json.loads(out.read_text())
    assert disk["commit"] == OLD and all("provenance" not in r for r in disk["runs"])  # the old shape
    loaded = done_rows(out, "output-layers", head, protocol)  # read by the new code: the file's commit
    assert {k: r["provenance"]["commit"] for k, r in loaded.items()} == dict.fromkeys(loaded, OLD)
    assert loaded["nplm/seed0"]["lr_grid_provenance"]["0.3"]["commits"] == [OLD]
    # the new code trains seed 2 into that file
    at_commit(monkeypatch, "new1234")
    choice = {"lr": 0.3, "grid": {0.1: 9.0, 0.3: 8.0, 1.0: 10.0}}
    (new,) = run_seeds(nplm_method(corpus.V), corpus, protocol, choice, root, out=out, target="output-layers",
                       doc=head, seeds=(2,))
    doc = json.loads(out.read_text())
    runs = {r["run"]: r for r in doc["runs"]}
    assert doc["commit"] == "new1234" and runs["nplm/seed2"]["provenance"]["commits"] == ["new1234"]
    for k in ("nplm/seed0", "nplm/seed1", "full/seed0"):
        assert runs[k]["provenance"]["commit"] == OLD and runs[k]["provenance"]["package_modified_since_commit"] is False
        assert {key: runs[k][key] for key in old_row("nplm", 0) if key != "history"} == {
            key: v for key, v in loaded[k].items() if key not in ("history", "provenance", "lr_grid_provenance")}
    assert doc["summary"]["nplm"]["test_ppl"]["n"] == 3 and doc["grid"]["nplm"]["provenance"]["0.3"]["commit"] == OLD
    # the old code, still running, merges a row of its own (no provenance; the file's commit OLD again)
    at_commit(monkeypatch, OLD)
    old_writer(out, head, protocol, [old_row("full", 1, lr=1.0)])
    assert json.loads(out.read_text())["commit"] == OLD
    at_commit(monkeypatch, "new5678")  # then the new code merges: each row keeps the code that trained it
    write_rows(out, "output-layers", head, [], protocol, time.monotonic())
    runs = {r["run"]: r["provenance"]["commit"] for r in json.loads(out.read_text())["runs"]}
    assert runs == {"nplm/seed0": OLD, "nplm/seed1": OLD, "nplm/seed2": "new1234", "full/seed0": OLD, "full/seed1": OLD}


def test_descriptions_are_never_compared_and_a_writer_of_older_code_keeps_the_file(corpus, tmp_path, monkeypatch):
    """A header's descriptions may differ between processes: the rows still count as done, the file is
    not set aside, each process's descriptions are merged. Older code (which compares its whole header,
    ``rows`` and ``parameters`` among it, and knows no ``descriptions``) merging after new code keeps the
    file and its rows, and drops ``descriptions`` until new code merges again."""
    out = tmp_path / "r.json"
    protocol = Protocol(lrs=(0.1, 0.3, 1.0), grid_epochs=1, patience=5, max_epochs=2, seeds=(0, 1, 2))
    old_head = {"corpus": corpus.name, "V": corpus.V, "rows": {"nplm": "an NPLM"}, "parameters": {"nplm": 100}}
    at_commit(monkeypatch, OLD)
    old_writer(out, old_head, protocol, [old_row("nplm", 0)])
    new_head = {**old_head, "descriptions": {"full": {"what": "the full softmax", "parameters": 120}}}
    reworded = {**new_head, "rows": {"nplm": "the NPLM, reworded"}, "note": "a note"}
    assert set(done_rows(out, "output-layers", new_head, protocol)) == {"nplm/seed0"}
    assert set(done_rows(out, "output-layers", reworded, protocol)) == {"nplm/seed0"}  # descriptions: not compared
    assert done_rows(out, "output-layers", {**new_head, "V": corpus.V + 1}, protocol) == {}  # settings: compared
    at_commit(monkeypatch, "new1234")
    write_rows(out, "output-layers", new_head, [old_row("full", 0, lr=1.0)], protocol, time.monotonic())
    other = {**old_head, "descriptions": {"is": {"what": "importance sampling", "parameters": 90}}}
    doc = write_rows(out, "output-layers", other, [old_row("is", 0)], protocol, time.monotonic())
    assert doc["descriptions"] == {**new_head["descriptions"], **other["descriptions"]} and len(doc["runs"]) == 3
    at_commit(monkeypatch, OLD)  # older code, still running, merges a row of its own
    doc = old_writer(out, old_head, protocol, [old_row("nplm", 1)])
    assert not list(tmp_path.glob("r.replaced-*")) and len(doc["runs"]) == 4 and "descriptions" not in doc
    at_commit(monkeypatch, "new5678")  # new code merges again: its own descriptions are back
    doc = write_rows(out, "output-layers", new_head, [], protocol, time.monotonic())
    assert doc["descriptions"] == new_head["descriptions"] and len(doc["runs"]) == 4
    assert not list(tmp_path.glob("r.replaced-*"))


# --------------------------------------------------------------------------- one corpus for every comparison
def fingerprint(c) -> dict:
    """What a run trains on: the corpus's name (in every run's settings), |V|, the split bounds, and
    hashes of its token ids and of its vocabulary's words."""
    ids = hashlib.sha256(np.ascontiguousarray(c.ids, dtype=np.int64).tobytes()).hexdigest()[:16]
    words = hashlib.sha256("\n".join(c.vocab.words).encode()).hexdigest()[:16]
    return {"name": c.name, "V": c.V, "bounds": [int(b) for b in c.bounds], "ids": ids, "vocab": words}


BROWN_VOCAB = "348b72afb8713dc3"
# The corpora of reproduce output-layers and recurrent as computed by the code the first long runs were
# trained with (each target's own function then, output_layers.comparison_data and recurrent.the_corpus):
# rows trained before and after they became one function must see the same data.
BEFORE = {
    ("output-layers", "brown", False): ("brown[comparison]", 17907, [200000, 250000], "4c7768cbc6eba3e9", BROWN_VOCAB),
    ("recurrent", "brown", False): ("brown[comparison]", 17907, [200000, 250000], "4c7768cbc6eba3e9", BROWN_VOCAB),
    ("output-layers", "brown", True): ("brown[quick]", 17907, [30000, 40000], "42ce26b8465e26a8", BROWN_VOCAB),
    ("recurrent", "brown", True): ("brown[quick][quick-comparison]", 17907, [5000, 6000], "99badee066c1cb58",
                                   BROWN_VOCAB),
    ("output-layers", "synthetic", True): ("synthetic", 47, [3200, 3600], "9590dc5a223f6982", "9b807be2bf8dedce"),
    ("recurrent", "synthetic", True): ("synthetic", 47, [3200, 3600], "9590dc5a223f6982", "9b807be2bf8dedce"),
}


@pytest.mark.parametrize("target, corpus_name, quick", list(BEFORE))
def test_one_corpus_function_gives_each_target_the_data_it_trained_on_before(target, corpus_name, quick):
    from nplm_edu.data.corpus import CorpusSpec
    from nplm_edu.experiments.protocol import comparison_data
    from nplm_edu.experiments.recurrent import QUICK_SLICE

    spec = CorpusSpec(corpus="synthetic", synthetic_tokens=4000) if corpus_name == "synthetic" else CorpusSpec(corpus="brown")
    corpus = comparison_data(spec, quick, QUICK_SLICE if target == "recurrent" else None)
    assert tuple(fingerprint(corpus).values()) == BEFORE[target, corpus_name, quick]


def test_scored_keeps_only_rows_with_a_validation_score():
    rows = [{"seed": 0, "valid_ppl": 200.0}, {"seed": 1, "valid_ppl": None}, {"seed": 2}, {"seed": 3, "valid_ppl": 210.0}]
    assert [r["seed"] for r in scored(rows)] == [0, 3]
    assert scored([]) == []
