"""experiments/inventory.py and ``python -m nplm_edu results``: the provenance of every results file."""

import json
import subprocess
from pathlib import Path

import pytest

from nplm_edu.cli import main
from nplm_edu.experiments.inventory import entry_of, inventory, problems


def write(folder, name, doc):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


CLEAN = {"command": "python -m nplm_edu reproduce ngrams", "commit": "abc1234",
         "package_modified_since_commit": False, "date": "2026-11-23T10:00:00+00:00"}


def test_provenance_at_the_top_in_a_block_or_per_row():
    assert entry_of(CLEAN, "a.json").problem() is None
    block = {"provenance": {"command": "python benchmarks/bench_scale.py", "commit": "def5678", "package_modified": False}}
    e = entry_of(block, "scale.json")
    assert (e.command, e.commits, e.clean) == ("python benchmarks/bench_scale.py", ["def5678"], True)
    rows = {"rows": {"MLP1": {**CLEAN, "commit": "1111111"}, "MLP3": {**CLEAN, "commit": "2222222"}}}
    e = entry_of(rows, "table1.json")
    assert e.commits == ["1111111", "2222222"] and e.clean is True and e.command == CLEAN["command"]
    modified = {"rows": [{**CLEAN, "package_modified_since_commit": True}, CLEAN]}
    assert entry_of(modified, "t.json").clean is False
    assert "differed" in entry_of(modified, "t.json").problem()
    assert entry_of({**CLEAN, "package_modified_since_commit": None}, "t.json").problem() == "cleanliness not recorded"
    assert entry_of({"command": "x"}, "t.json").problem() == "no commit recorded"
    assert entry_of({"commit": "abc"}, "t.json").problem() == "no command recorded"
    # a protocol's seed rows: each row's provenance block, every commit a resumed run trained under
    row = {"run": "full/seed0", "provenance": {"commit": "3333333", "commits": ["2222222", "3333333"],
                                               "package_modified_since_commit": False}}
    e = entry_of({**CLEAN, "runs": [row, {"run": "full/seed1"}]}, "output_layers.json")
    assert e.commits == ["2222222", "3333333", "abc1234"] and e.clean is True and e.problem() is None
    dirty = {**row, "provenance": {**row["provenance"], "package_modified_since_commit": True}}
    assert entry_of({**CLEAN, "runs": [dirty]}, "output_layers.json").clean is False
    kept = {"command": "x", "kept": "the trials that chose the settings; rerunning them would change no choice"}
    assert entry_of(kept, "t.json").problem() is None


def test_inventory_of_a_folder_and_the_check(tmp_path, capsys):
    write(tmp_path, "ngrams.json", CLEAN)
    write(tmp_path, "old.json", {"command": "python -m nplm_edu reproduce minibatch", "commit": "abc1234"})
    write(tmp_path, "trials/t1.json", {**CLEAN, "commit": "fff0000"})
    (tmp_path / "scale.json").write_text(json.dumps(CLEAN))
    (tmp_path / "scale.png").write_bytes(b"\x89PNG")
    (tmp_path / "orphan.png").write_bytes(b"\x89PNG")
    entries = inventory(tmp_path)
    assert [e.path for e in entries] == ["ngrams.json", "old.json", "orphan.png", "scale.json", "scale.png",
                                         "trials/t1.json"]
    assert entries[4].made_with == "scale.json" and entries[2].made_with is None
    assert problems(entries) == ["old.json: cleanliness not recorded",
                                 "orphan.png: not JSON, and no JSON file of the same name says how it was made"]
    assert main(["results", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "fff0000" in out and "(written with scale.json)" in out
    assert main(["results", "--dir", str(tmp_path), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 2 results file(s) cannot be traced") and "old.json" in err
    (tmp_path / "orphan.png").unlink()
    write(tmp_path, "old.json", {"command": "x", "kept": "kept on purpose, and why"})
    assert main(["results", "--dir", str(tmp_path), "--check"]) == 0
    assert "all 5 files traced" in capsys.readouterr().out


def test_the_check_fails_on_a_recorded_command_the_command_line_now_refuses(tmp_path, capsys):
    # a results file's command is how a reader reruns it: an option renamed since must be caught
    from nplm_edu.cli.results import stale_commands

    write(tmp_path, "ok.json", {**CLEAN, "command": "python -m nplm_edu reproduce ngrams --passes 3"})
    write(tmp_path, "mpi.json", {**CLEAN, "command": "mpiexec -n 2 python -m nplm_edu train --parallel output-block"})
    write(tmp_path, "bench.json", {**CLEAN, "command": "python benchmarks/bench_x.py --anything"})  # not ours to parse
    write(tmp_path, "chain.json", {**CLEAN, "command": "cd x && python -m nplm_edu results --check; echo done"})
    write(tmp_path, "rows.json", {"rows": {"A": CLEAN, "B": {**CLEAN, "command": "python -m nplm_edu reproduce ngrams --no-such 1"}}})
    assert main(["results", "--dir", str(tmp_path), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: 1 recorded command(s) no longer run as written: rows.json:")
    assert "unrecognized arguments: --no-such 1" in err
    (line,) = stale_commands(inventory(tmp_path))
    assert line.startswith("rows.json: `python -m nplm_edu reproduce ngrams --no-such 1`")
    write(tmp_path, "quote.json", {**CLEAN, "command": "python -m nplm_edu train --out 'runs/x"})
    assert [x.split(":")[0] for x in stale_commands(inventory(tmp_path))] == ["quote.json", "rows.json"]
    (tmp_path / "rows.json").unlink()
    (tmp_path / "quote.json").unlink()
    assert main(["results", "--dir", str(tmp_path), "--check"]) == 0
    assert "their commands parse" in capsys.readouterr().out


def test_bad_folder_or_file_is_one_line(tmp_path, capsys):
    assert main(["results", "--dir", str(tmp_path / "missing")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    (tmp_path / "broken.json").write_text("{")
    assert main(["results", "--dir", str(tmp_path)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_progress_of_training_runs(tmp_path, capsys):
    """--runs: epochs done, best validation perplexity and its epoch, epochs since the best against the patience."""
    from nplm_edu.experiments.inventory import runs_progress

    hist = {"model": {}, "train": {"epochs": 30, "patience": 3}, "best_valid_ppl": 280.0, "best_epoch": 2,
            "epochs": [{"epoch": 1, "valid_ppl": 300.0, "seconds": 100.0}, {"epoch": 2, "valid_ppl": 280.0, "seconds": 100.0},
                       {"epoch": 3, "valid_ppl": 290.0, "seconds": 100.0}]}
    write(tmp_path, "table1/MLP9/history.json", hist)
    write(tmp_path, "other/notes/history.json", {"something": "else"})  # not a run: skipped
    for i, foreign in enumerate([{"epochs": 5}, {"epochs": "x"}, {"epochs": [1, 2]}, {"epochs": [], "train": [1]},
                                 {"epochs": [], "best_epoch": "2"}, {"epochs": [], "best_valid_ppl": "low"}]):
        write(tmp_path, f"other/tool{i}/history.json", foreign)  # another tool's histories: skipped, no traceback
    (r,) = runs_progress(tmp_path)
    assert (r["run"], r["epochs"], r["max_epochs"], r["best_epoch"], r["best_valid"], r["since_best"], r["patience"],
            r["seconds"]) == ("table1/MLP9", 3, 30, 2, 280.0, 1, 3, 300.0)
    assert main(["results", "--runs", str(tmp_path)]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("table1/MLP9"))
    assert line.split()[1:6] == ["3/30", "280.00", "2", "1/3", "0.08"]
    assert main(["results", "--runs", str(tmp_path / "empty")]) == 0
    assert "no training runs" in capsys.readouterr().out


def test_progress_reads_the_trainers_best_epoch_while_a_run_is_under_way(tmp_path):
    # the trainer writes its early-stopping state into history.json after every epoch, not only at the end
    from nplm_edu.data.corpus import load_corpus
    from nplm_edu.experiments.inventory import runs_progress
    from nplm_edu.models.nplm import NPLM, NPLMConfig
    from nplm_edu.training.trainer import TrainConfig, train

    corpus = load_corpus("synthetic")
    seen = []

    def on_epoch(history):  # after each epoch's history.json is written: what --runs shows at that moment
        (r,) = runs_progress(tmp_path)
        seen.append((r["epochs"], r["best_epoch"], r["best_valid"], r["since_best"]))

    model = NPLM(NPLMConfig(V=corpus.V, n=3, m=4, h=6, seed=0))
    hist = train(model, corpus, TrainConfig(epochs=3, batch=64, lr=0.1, seed=0), out_dir=tmp_path / "run",
                 quiet=True, on_epoch=on_epoch)
    valid = [e["valid_ppl"] for e in hist["epochs"]]
    want = []
    for k in range(1, len(valid) + 1):
        b = min(range(k), key=lambda i: valid[i])  # the first lowest of the epochs so far
        want.append((k, b + 1, valid[b], k - b - 1))
    assert seen == want


def test_every_committed_results_file_is_traced_to_a_commit_of_this_repository():
    # data/results/ as committed: every file made by one commit of clean code, or kept with its reason
    # (a "kept" key), and every commit it names is in the history of the checked-out commit
    root = Path(__file__).resolve().parents[1]
    entries = inventory(root / "data" / "results")
    assert problems(entries) == []
    from nplm_edu.cli.results import stale_commands

    assert stale_commands(entries) == []  # and each command it records still runs as written
    if not (root / ".git").exists():
        pytest.skip("not a git checkout: the commits cannot be looked up")
    for e in entries:
        for sha in e.commits:
            found = subprocess.run(["git", "merge-base", "--is-ancestor", sha, "HEAD"], cwd=root, capture_output=True)
            assert found.returncode == 0, f"{e.path} names commit {sha}, which is not in the history of HEAD"


def test_valid_json_of_odd_types_is_read_without_a_traceback(tmp_path, capsys):
    odd = {"command": ["python", "-m"], "date": 5, "commit": 3, "kept": 1,
           "rows": [{"commit": "abc1234", "date": "2026-11-23", "package_modified_since_commit": "no"},
                    {"commit": 7}, "not a row"]}
    e = entry_of(odd, "odd.json")
    assert (e.command, e.commits, e.clean, e.date, e.kept) == (None, ["abc1234"], None, "2026-11-23", None)
    write(tmp_path, "odd.json", odd)
    assert main(["results", "--dir", str(tmp_path)]) == 0
    assert main(["results", "--dir", str(tmp_path), "--check"]) == 2
    (tmp_path / "deep.json").write_text('{"rows": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert main(["results", "--dir", str(tmp_path)]) == 2
    assert "nested too deeply" in capsys.readouterr().err
    runs = tmp_path / "runs" / "r"
    runs.mkdir(parents=True)
    (runs / "history.json").write_text('{"epochs": [{"seconds": "x"}], "train": {"epochs": [1]}, "best_epoch": 1}')
    (tmp_path / "runs" / "deep").mkdir()
    (tmp_path / "runs" / "deep" / "history.json").write_text("[" * 100_000 + "]" * 100_000)
    assert main(["results", "--runs", str(tmp_path / "runs")]) == 0
    assert "no training runs" in capsys.readouterr().out


def test_a_file_that_recorded_no_date_shows_its_commits_day_never_a_question_mark(tmp_path, capsys):
    from nplm_edu.experiments.common import PACKAGE

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=PACKAGE).stdout.strip()
    if not head:
        pytest.skip("not a git checkout")
    day = subprocess.run(["git", "show", "-s", "--format=%cs", head], capture_output=True, text=True, cwd=PACKAGE).stdout.strip()
    write(tmp_path, "undated.json", {"command": "python -m nplm_edu reproduce minibatch", "commit": head, "clean": True})
    write(tmp_path, "nothing.json", {"command": "python -m nplm_edu reproduce minibatch"})
    assert main(["results", "--dir", str(tmp_path)]) == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()[1:]}
    assert f" {day}* " in lines["undated.json"]
    assert " unrecorded " in lines["nothing.json"]
