"""The command line, run as users run it: ``python -m nplm_edu ...`` in a subprocess, and, for the checks of
one option's value, ``main()`` (what ``python -m nplm_edu`` calls) in this process, without a second of
interpreter start-up each.

Bad input must give exactly one line on stderr, exit status 2 and no traceback.
"""

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from nplm_edu.data.corpus import PARAGRAPH, TEXT, brown_available, load_corpus, text_tokens

ROOT = Path(__file__).resolve().parents[1]


needs_brown = pytest.mark.skipif(
    not brown_available(), reason="the Brown corpus is not in NLTK_DATA (python -m nltk.downloader brown)")


def run(*args, env=None, check_ok=True):
    p = subprocess.run([sys.executable, "-m", "nplm_edu", *args], capture_output=True, text=True,
                       cwd=ROOT, env={**os.environ, **(env or {})}, timeout=300)
    if check_ok:
        assert p.returncode == 0, p.stderr
    return p


@pytest.fixture
def here(capsys, tmp_path, monkeypatch):
    """run() without the subprocess: ``main(args)`` in this process, from a scratch folder, its status, stdout
    and stderr returned as run() returns them. A Python warning fails the test, as it would be a second line
    on the subprocess's stderr; an exception main() does not turn into one line fails it too."""
    from nplm_edu.cli import main

    monkeypatch.chdir(tmp_path)

    def call(*args):
        capsys.readouterr()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                status = main(list(args))
            except SystemExit as e:  # argparse's usage errors and --help
                status = e.code
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, status, out, err)

    return call


def assert_user_error(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    assert p.stdout == ""


# --------------------------------------------------------------------------- corpus info

def test_info_synthetic():
    out = run("corpus", "info").stdout
    assert "30,000 tokens" in out and "|V| = 47" in out
    assert "24,000" in out and "3,000" in out


@needs_brown
def test_info_brown():
    out = run("corpus", "info", "--corpus", "brown").stdout
    assert "1,177,359 tokens" in out and "|V| = 17,907" in out
    for n in ("800,000", "200,000", "177,359"):
        assert n in out


# --------------------------------------------------------------------------- corpus export

def _check_export(corpus, out: Path):
    words = np.array(corpus.vocab.words, dtype=object)
    for s in ("train", "valid", "test"):
        text = (out / f"{s}.txt").read_text(encoding="utf-8")
        lines = text.splitlines()
        assert text.endswith("\n")
        # the tokens, joined, are exactly the split's stream, vocabulary-mapped
        assert text.split() == words[corpus.split(s)].tolist()
        # one line per paragraph: every line but perhaps the last (cut by the split) ends at a
        # mark, and no line has a paragraph mark inside it
        for line in lines[:-1]:
            toks = line.split()
            assert toks[-1] in (PARAGRAPH, TEXT), line[-40:]
            assert PARAGRAPH not in toks[:-2]
        n_par = int(np.sum(words[corpus.split(s)] == PARAGRAPH))
        last_open = lines[-1].split()[-1] not in (PARAGRAPH, TEXT)
        assert len(lines) == n_par + last_open
        # read back as a text corpus: the same stream (a paragraph mark closes a last line cut by the split)
        assert text_tokens(out / f"{s}.txt") == words[corpus.split(s)].tolist() + [PARAGRAPH] * last_open


def test_export_synthetic(tmp_path):
    out = tmp_path / "syn"
    p = run("corpus", "export", "--out", str(out), "--corpus-seed", "2")
    assert p.stdout.count("wrote") == 3
    _check_export(load_corpus("synthetic", seed=2), out)


@needs_brown
def test_export_brown(tmp_path):
    out = tmp_path / "brown"
    run("corpus", "export", "--corpus", "brown", "--out", str(out))
    _check_export(load_corpus("brown"), out)


# --------------------------------------------------------------------------- bad input

def test_brown_missing(tmp_path):
    empty = tmp_path / "nltk_data"
    empty.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    p = run("corpus", "info", "--corpus", "brown", env={"NLTK_DATA": str(empty), "HOME": str(home)},
            check_ok=False)
    assert_user_error(p, "python -m nltk.downloader brown")


def test_bad_files(tmp_path, monkeypatch, here):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b" \n\t\n  \n")
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("caf\u00e9 cr\u00e8me\n".encode("latin-1"))
    monkeypatch.setenv("NPLM_EDU_CACHE", str(tmp_path / "cache"))
    assert_user_error(here("corpus", "info", "--corpus", str(tmp_path / "nope.txt")), "nope.txt")
    assert_user_error(here("corpus", "info", "--corpus", str(empty)), "empty")
    assert_user_error(here("corpus", "info", "--corpus", str(blank)), "whitespace")
    assert_user_error(here("corpus", "info", "--corpus", str(latin)), "UTF-8")


def test_export_to_a_file_not_a_folder(tmp_path, here):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert_user_error(here("corpus", "export", "--out", str(afile)), "afile")
    assert_user_error(here("corpus", "export", "--out", str(afile / "sub")), "afile")
    assert afile.read_text() == "x"  # untouched


def test_bad_seed_and_order_in_other_commands(here):
    assert_user_error(here("train", "--seed", "-1", "--epochs", "1"), "seed")
    assert_user_error(here("ngram", "--model", "kn", "--order", "1"), "2..5")


@pytest.mark.parametrize("args,needle", [
    (["--seed", "-1"], "--seed"),      # numpy's default_rng would raise a traceback
    (["--passes", "-1"], "--passes"),  # was accepted and ran no pass at all
])
def test_bad_class_ngram_options(args, needle, here):
    p = here("ngram", "--model", "class", "--classes", "5", "--quiet", *args)
    assert_user_error(p, needle)


@pytest.mark.parametrize("args,needle", [
    (["--model", "kn", "--seed", "-1"], "--seed is for --model class only"),  # was silently ignored
    (["--model", "interp", "--classes", "5", "--seed", "2"], "--classes and --seed are for --model class only"),
    (["--model", "interp", "--em-iterations", "-1"], "--em-iterations must be 0 or more"),
    (["--model", "class", "--classes", "5", "--em-iterations", "3"], "--em-iterations is for --model interp only"),
    (["--model", "kn", "--seed", "1", "--em-iterations", "3"],
     "--seed is for --model class only; --em-iterations is for --model interp only"),
])
def test_ngram_options_of_another_model_or_out_of_range_are_refused(args, needle, here):
    assert_user_error(here("ngram", "--quiet", *args), needle)


@pytest.mark.parametrize("args", [
    ["--train-size", "0.95", "--valid-size", "0.1"],   # fractions adding up to more than 1
    ["--train-size", "40000"],                         # more tokens than the corpus has
    ["--train-size", "20000", "--valid-size", "10000"],  # counts that leave no test set
    ["--train-size", "abc"],                           # not a number
    ["--train-size", "0"],
    ["--valid-size", "-0.1"],
    ["--train-size", "1.5"],
    ["--min-count", "0"],
    ["--synthetic-tokens", "0"],
    ["--corpus-seed", "-1"],                           # numpy would raise deep inside default_rng
])
def test_bad_splits_and_options(args, here):
    assert_user_error(here("corpus", "info", *args))


@needs_brown
def test_bad_split_brown():
    assert_user_error(run("corpus", "info", "--corpus", "brown", "--train-size", "1200000", check_ok=False),
                      "1177359")


@pytest.mark.parametrize("cmd", [[], ["corpus"], ["corpus", "info"], ["corpus", "export"]])
def test_help(cmd, here):
    p = here(*cmd, "--help")
    assert p.returncode == 0 and p.stdout.startswith("usage:")


def test_missing_subcommand_is_a_usage_error():
    p = run("corpus", check_ok=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr


def test_out_of_memory_is_one_line(monkeypatch, tmp_path, capsys):
    """A batch too large for memory (numpy raises MemoryError while allocating) is one line, exit 2."""
    from nplm_edu.cli import main
    from nplm_edu.numerics.fused import FusedNPLM

    def too_big(self, *a, **k):
        raise MemoryError("Unable to allocate 57.0 GiB for an array with shape (800000, 17907)")

    monkeypatch.setattr(FusedNPLM, "sgd_update", too_big)
    rc = main(["train", "--corpus", "synthetic", "--synthetic-tokens", "3000", "--epochs", "1", "--quiet",
               "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip().splitlines() == ["error: out of memory: try a smaller --batch, model or corpus"]


def test_train_writes_a_results_file_with_provenance(tmp_path, capsys):
    """--results FILE: the history beside the command, commit and machine; an unwritable FILE is found
    before any training (one line, exit 2, no checkpoint written)."""
    from nplm_edu.cli import main

    base = ["train", "--corpus", "synthetic", "--synthetic-tokens", "3000", "--epochs", "2", "--quiet",
            "--n", "3", "--h", "8", "--m", "6"]
    out = tmp_path / "slice.json"
    assert main(base + ["--out", str(tmp_path / "run"), "--results", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["command"].startswith("python -m nplm_edu") and doc["commit"] and doc["machine"]  # argv: pytest's here
    assert doc["corpus"].startswith("synthetic") and doc["tokens"]["train"] == 2400
    assert [e["epoch"] for e in doc["history"]["epochs"]] == [1, 2] and doc["history"]["model"]["h"] == 8
    assert doc["history"]["epochs"] == json.loads((tmp_path / "run" / "history.json").read_text())["epochs"]
    capsys.readouterr()
    assert main(base + ["--out", str(tmp_path / "run2"), "--results", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err and not (tmp_path / "run2").exists()


# --------------------------------------------------------------------------- --help texts and option validation

def _all_parsers(parser=None, path=()):
    """(command words, parser) of every (sub)command of `python -m nplm_edu`, the top level first."""
    import argparse

    from nplm_edu.cli import build_parser

    parser = parser or build_parser()
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _all_parsers(sub, path + (name,))


def test_no_command_lists_the_commands(capsys):
    """`python -m nplm_edu` alone, as chapter 1 names it, shows what it can do (status 2: nothing was done)."""
    from nplm_edu.cli import main

    with pytest.raises(SystemExit) as e:
        main([])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "usage: python -m nplm_edu" in err
    assert all(f"    {name} " in err for name in ("corpus", "ngram", "train", "mix", "results"))
    assert err.endswith("name a COMMAND; python -m nplm_edu COMMAND --help gives its options\n")


def test_every_help_reads_as_plain_text(monkeypatch):
    """Every --help: no reST markup from a docstring, no Python dict, no default shown twice or as
    None or empty, a description for every leaf command, and a help text for every option."""
    monkeypatch.setenv("COLUMNS", "200")
    seen = 0
    for path, parser in _all_parsers():
        text = parser.format_help()
        for bad in ("``", ":func:", ":mod:", ":class:", "(default None)", "(default )", "{'", "modes checkpoints"):
            assert bad not in text, (path, bad)
        for action in parser._actions:
            if action.option_strings and action.help is not None and "--help" not in action.option_strings:
                assert action.help.count("(default") <= 1, (path, action.option_strings, action.help)
                assert not action.help.startswith("(default"), (path, action.option_strings)  # says what it is
        if path and not any(a.__class__.__name__ == "_SubParsersAction" for a in parser._actions):
            assert parser.description, path
        seen += 1
    assert seen >= 16  # corpus info/export, ngram, train, mix, results, reproduce's eight targets, ...


def test_recurrent_help_gives_each_models_setting(monkeypatch, capsys):
    from nplm_edu.cli import build_parser

    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["reproduce", "recurrent", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    # the rows are named with the default ones; their learning rates come from the protocol's grid
    assert "--models MODELS rows to train, comma-separated, among rnn,lstm,gru," in out
    assert "(default rnn,lstm,gru,lstm-4,nplm-dropout)" in out
    assert "--lr" not in out


@pytest.mark.parametrize("argv, says", [
    (["train", "--resume", "--force"], "argument --force: not allowed with argument --resume"),
    (["train", "--optimizer", "sdg"], "argument --optimizer: invalid choice: 'sdg'"),
    (["train", "--dtype", "float16"], "argument --dtype: invalid choice: 'float16'"),
    (["reproduce", "beyond", "--optimizer", "adamw"], "argument --optimizer: invalid choice: 'adamw'"),
])
def test_conflicting_or_unknown_values_are_refused_by_argparse(argv, says, capsys):
    from nplm_edu.cli import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 2 and says in capsys.readouterr().err


@pytest.mark.parametrize("args, says", [
    (["corpus", "info", "--min-count", "0"], "--min-count"),
    (["train", "--checkpoint-every-minutes", "-1"], "--checkpoint-every-minutes"),
    (["train", "--examples-per-epoch", "0"], "--examples-per-epoch"),
    (["train", "--epochs", "0"], "--epochs must be at least 1"),
    (["train", "--seed", "-1"], "--seed must be"),
    (["train", "--h", "0", "--no-direct"], "--h 0 needs direct connections"),
    (["train", "--parallel", "hogwild", "--workers", "0"], "--workers must be at least 1"),
    (["reproduce", "central-claim", "--families", "cat-dog"], "--families: unknown family"),
])
def test_messages_name_options_as_typed(args, says, tmp_path, here):
    """A bad option value is named as the user typed it, with its dashes."""
    extra = ["--out", str(tmp_path / "run")] if args[0] == "train" else []
    assert_user_error(here(*args, *extra), says)


def test_more_hogwild_workers_than_four_per_core_are_refused(tmp_path, monkeypatch, capsys):
    """--workers 5000 forked thousands of processes on two cores; the cores counted are those this
    process may use (here one, so that the test forks nothing should the check be lost)."""
    import nplm_edu.cli.train as cli_train
    from nplm_edu.cli import main

    monkeypatch.setattr(cli_train, "usable_cores", lambda: 1)
    args = ["train", "--parallel", "hogwild", "--corpus", "synthetic", "--epochs", "1", "--out", str(tmp_path / "r")]
    assert main([*args, "--workers", "5"]) == 2
    assert capsys.readouterr().err.strip() == "error: --workers 5 is more than 4 workers per core this process may use (1)"
    assert main(["train", "--workers", "5"]) == 2  # without hogwild, the option itself is the mistake
    assert "--workers is for --parallel hogwild" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["train", "--out", ""], ["corpus", "export", "--out", ""]])
def test_an_empty_output_folder_is_refused(args, tmp_path, monkeypatch, capsys):
    """An empty --out named the current folder: a run wrote its checkpoint wherever the shell stood."""
    from nplm_edu.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    assert capsys.readouterr().err.strip() == ("error: an empty path names no folder: give the output folder "
                                               "(. for this one)")
    assert list(tmp_path.iterdir()) == []


def test_library_messages_name_the_setting():
    """A library caller reads the keyword argument it passed (the command line says the option)."""
    from nplm_edu.errors import UserError, a_model

    with pytest.raises(UserError, match=r"^min_count must be at least 1") as info:
        load_corpus("synthetic", min_count=0)
    assert info.value.setting == "min_count"
    assert [a_model(k) for k in ("nplm", "rnn", "lstm", "energy")] == ["an NPLM", "an RNN", "an LSTM", "an energy"]


def test_description_strips_rest_markup():
    from nplm_edu.cli.options import description

    doc = "``python -m nplm_edu x``: runs :func:`~nplm_edu.a.fit` (:mod:`nplm_edu.b`), writes ``o.json``. Commands::"
    assert description(doc) == "Runs fit (nplm_edu.b), writes o.json. Commands:"


def test_export_checks_its_folder_before_reading_the_corpus(tmp_path, monkeypatch, capsys):
    import nplm_edu.cli.corpus as cli_corpus
    from nplm_edu.cli import main

    def never(args):
        raise AssertionError("the corpus was read before the output folder was checked")

    monkeypatch.setattr(cli_corpus, "corpus_from_args", never)
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["corpus", "export", "--out", str(afile / "sub")]) == 2
    assert capsys.readouterr().err.strip() == f"error: cannot write to {afile / 'sub'}: {afile} is a file, not a folder"


def test_export_of_a_corpus_that_cannot_be_read_leaves_no_new_folder(tmp_path, capsys):
    from nplm_edu.cli import main

    empty, out = tmp_path / "empty.txt", tmp_path / "new"
    empty.write_text("")
    assert main(["corpus", "export", "--corpus", str(empty), "--out", str(out)]) == 2
    assert not out.exists() and "empty" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_an_interrupted_export_leaves_every_file_as_it_was(tmp_path, monkeypatch, capsys, how):
    """Ctrl-C or SIGTERM (timeout, a batch scheduler) while the streams are written: one line, status 130,
    no file cut short and no new folder; an earlier export in the folder stays whole (all three or none)."""
    import os
    import signal

    import nplm_edu.data.corpus as corpus_mod
    from nplm_edu.cli import main

    real, calls = corpus_mod.np.split, []

    def interrupted_at_valid(a, ends):  # train.txt written, valid.txt under way
        calls.append(1)
        if len(calls) == 2:
            if how == "SIGTERM":
                os.kill(os.getpid(), signal.SIGTERM)
            else:
                raise KeyboardInterrupt
        return real(a, ends)

    monkeypatch.setattr(corpus_mod.np, "split", interrupted_at_valid)
    new = tmp_path / "new"
    assert main(["corpus", "export", "--out", str(new)]) == 130
    assert capsys.readouterr().err.strip() == "interrupted" and not new.exists()
    old = tmp_path / "old"
    old.mkdir()
    for s in ("train", "valid", "test"):
        (old / f"{s}.txt").write_text(f"an earlier {s}\n")
    calls.clear()
    assert main(["corpus", "export", "--out", str(old)]) == 130
    assert sorted(p.name for p in old.iterdir()) == ["test.txt", "train.txt", "valid.txt"]
    assert (old / "train.txt").read_text() == "an earlier train\n"


def test_an_export_that_cannot_replace_a_file_replaces_none(tmp_path, capsys):
    """valid.txt is a folder: found before the first rename, so train.txt keeps its earlier content and
    no temporary file is left (one left by a killed export is swept)."""
    from nplm_edu.cli import main

    out = tmp_path / "out"
    out.mkdir()
    (out / "train.txt").write_text("an earlier train\n")
    (out / "valid.txt").mkdir()
    (out / "test.txt.k1ll3d.tmp").write_text("half")
    assert main(["corpus", "export", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == f"error: is a folder, not a file: {out / 'valid.txt'}"
    assert sorted(p.name for p in out.iterdir()) == ["train.txt", "valid.txt"]
    assert (out / "train.txt").read_text() == "an earlier train\n"


def test_two_train_runs_into_one_out_one_is_refused_naming_the_other(tmp_path, capsys):
    from nplm_edu.cli import main
    from nplm_edu.data.locks import one_writer

    out = tmp_path / "x"
    with one_writer(out):  # another run writing there now
        rc = main(["train", "--corpus", "synthetic", "--synthetic-tokens", "3000", "--epochs", "1", "--quiet",
                   "--out", str(out), "--force"])
    err = capsys.readouterr().err
    assert rc == 2 and f"{out} is being written (a train run) by process {os.getpid()}" in err
    assert len(err.strip().splitlines()) == 1 and not (out / "checkpoint.npz").exists()


def test_no_output_path_may_be_an_input(tmp_path, here):
    base = ["--corpus", "synthetic", "--synthetic-tokens", "3000"]
    run("train", *base, "--epochs", "1", "--quiet", "--out", str(tmp_path / "X"))
    ckpt = tmp_path / "X" / "checkpoint.npz"
    before = ckpt.read_bytes()
    assert_user_error(here("mix", str(ckpt), *base, "--json", str(ckpt)), "--json", "is CHECKPOINT")
    assert_user_error(here("train", *base, "--epochs", "1", "--quiet", "--force", "--out", str(tmp_path / "X"),
                           "--results", str(ckpt)), "--results", "lies inside --out")
    assert ckpt.read_bytes() == before
    text = tmp_path / "f.txt"
    text.write_text("the cat sat on the mat .\n" * 200)
    assert_user_error(here("ngram", "--corpus", str(text), "--json", str(text)), "is --corpus")
    assert_user_error(here("reproduce", "ngrams", "--corpus", str(text), "--out", str(text)), "--out", "is --corpus")
    (tmp_path / "E").mkdir()
    train_txt = tmp_path / "E" / "train.txt"
    train_txt.write_text(text.read_text())
    assert_user_error(here("corpus", "export", "--corpus", str(train_txt), "--out", str(tmp_path / "E")), "--out",
                      "is --corpus")
    assert text.read_text().startswith("the cat") and train_txt.read_text().startswith("the cat")


def test_a_corpus_that_is_a_pipe_is_refused_with_its_name(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert_user_error(run("corpus", "info", "--corpus", str(fifo), check_ok=False), f"--corpus {fifo}",
                      "not a regular file")


def test_a_results_file_of_another_target_is_never_replaced(tmp_path, here):
    other = tmp_path / "t1.json"
    other.write_text((ROOT / "data" / "results" / "table1_quick.json").read_text())
    before = other.read_bytes()
    for args in (["reproduce", "ngrams", "--corpus", "synthetic", "--synthetic-tokens", "3000", "--classes", "5"],
                 ["reproduce", "recurrent", "--corpus", "synthetic", "--synthetic-tokens", "3000", "--quick"],
                 ["train", "--corpus", "synthetic", "--synthetic-tokens", "3000", "--epochs", "1",
                  "--out", str(tmp_path / "run"), "--results"]):
        flag = [] if args[0] == "train" else ["--out"]
        assert_user_error(here(*args, *flag, str(other), "--quiet"), "is a table1 results file")
    assert other.read_bytes() == before
# --------------------------------------------------------------------------- sample

SYN = ["--corpus", "synthetic", "--synthetic-tokens", "6000"]


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory):
    """A tiny NPLM, the NPLM with three cheap output layers and with LightRNN's layers, a tiny Elman network,
    a tiny LSTM reading a window of 4 words (``reproduce recurrent``'s lstm-4) and a tiny Transformer
    (trained as ``reproduce recurrent`` trains one: on blocks), on a small synthetic corpus (seconds)."""
    from dataclasses import replace

    from nplm_edu.cli import main
    from nplm_edu.models.rnn import RecurrentConfig
    from nplm_edu.models.transformer import TransformerConfig
    from nplm_edu.numerics.recurrent import recurrent_model
    from nplm_edu.numerics.transformer import FastTransformer
    from nplm_edu.numerics.window_recurrent import WindowRecurrent, WindowRecurrentConfig
    from nplm_edu.training.blocks import BlockBackend
    from nplm_edu.training.stream import StreamBackend, StreamConfig
    from nplm_edu.training.trainer import TrainConfig, train

    root = tmp_path_factory.mktemp("sample")
    assert main(["train", *SYN, "--n", "3", "--m", "8", "--h", "16", "--epochs", "2", "--quiet",
                 "--out", str(root / "nplm")]) == 0
    assert main(["reproduce", "output-layers", *SYN, "--methods", "class-frequency,tree-huffman,nce,lightrnn", "--quick",
                 "--seeds", "0", "--quiet", "--out", str(root / "ol.json"), "--runs-dir", str(root)]) == 0
    for row in json.loads((root / "ol.json").read_text())["runs"]:  # seed 0's run at the chosen rate: ol/<method>
        (root / "ol" / row["method"] / f"lr{row['lr']:g}-seed0").rename(root / "chosen")
        (root / "ol" / row["method"]).rename(root / "ol" / f"{row['method']}-grid")
        (root / "chosen").rename(root / "ol" / row["method"])
    corpus = load_corpus("synthetic", synthetic_tokens=6000)
    cfg = TrainConfig(epochs=1, batch=4, lr=1.0, seed=0)
    model = recurrent_model(RecurrentConfig(V=corpus.V, cell="rnn", m=8, h=12, seed=1))
    train(model, corpus, cfg, out_dir=root / "rnn", quiet=True, backend=StreamBackend(model, cfg, StreamConfig(T=9)))
    model = WindowRecurrent(WindowRecurrentConfig(V=corpus.V, cell="lstm", n=5, m=8, h=12, seed=1))
    train(model, corpus, replace(cfg, batch=32), out_dir=root / "lstm-4", quiet=True)
    model = FastTransformer(TransformerConfig(V=corpus.V, n_ctx=6, m=8, heads=2, layers=1, d_ff=16, seed=1))
    cfg = TrainConfig(epochs=1, batch=8, lr=3e-3, optimizer="adam", tie=True, max_updates=30, seed=0)
    train(model, corpus, cfg, out_dir=root / "transformer", quiet=True, backend=BlockBackend(model, cfg, clip=1.0))
    return root


def _sample(capsys, *args):
    from nplm_edu.cli import main

    status = main(["sample", *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("which", ["nplm", "nplm/checkpoint.npz", "ol/class-frequency", "ol/tree-huffman", "ol/nce",
                                   "ol/lightrnn", "rnn", "lstm-4", "transformer", "kn3", "interp"])
def test_sample_is_fixed_by_its_seed(tiny_runs, capsys, which):
    model = str(tiny_runs / which) if "/" in which or which in ("nplm", "rnn", "lstm-4", "transformer") else which
    runs = [_sample(capsys, model, *SYN, "--words", "25", "--seed", str(s), "--prompt", "the", "--quiet")
            for s in (3, 3, 4)]
    assert all(status == 0 and err == "" for status, _, err in runs), runs
    texts = [out.split() for _, out, _ in runs]
    assert texts[0] == texts[1] != texts[2]  # the same seed, the same words; another seed, others
    assert texts[0][0] == "the" and len(texts[0]) == 26  # the prompt, then --words words
    assert set(texts[0] + texts[2]) <= set(load_corpus("synthetic", synthetic_tokens=6000).vocab.words)


def test_a_transformer_samples_past_its_window(tiny_runs, capsys):
    """A prompt longer than the Transformer's n_ctx = 6 words, and samples longer than its window:
    the window slides; the latest parameters are another network, so other text."""
    prompt = "the cat saw the dog and the cat"
    runs = [_sample(capsys, str(tiny_runs / "transformer"), *SYN, "--words", "20", "--prompt", prompt, "--quiet",
                    *latest) for latest in ([], ["--latest"])]
    assert all(status == 0 and err == "" for status, _, err in runs), runs
    assert [len(out.split()) for _, out, _ in runs] == [28, 28]


def test_load_network_refuses_a_transformer_in_one_line(tiny_runs):
    from nplm_edu.analysis.sampling import load_network
    from nplm_edu.errors import UserError

    for tokens in (6000, 7000):  # its own data or another split: not an NPLM either way
        with pytest.raises(UserError, match="holds a transformer model, not an NPLM") as e:
            load_network([tiny_runs / "transformer" / "checkpoint.npz"], load_corpus("synthetic", synthetic_tokens=tokens))
        assert "\n" not in str(e.value)


def test_sample_temperature(tiny_runs, capsys):
    """T = 0 always takes the most probable word, whatever the seed; T = 1 draws from the model; a
    low one keeps to fewer words, a high one spreads the draws evenly over the vocabulary."""
    model = str(tiny_runs / "nplm")

    def words(T, seed, n=200):
        status, out, err = _sample(capsys, model, *SYN, "--words", str(n), "--seed", str(seed),
                                   "--temperature", str(T), "--quiet")
        assert status == 0, err
        return out.split()

    assert words(0, 1) == words(0, 2)
    assert words(1, 1) != words(1, 2)
    from collections import Counter

    top = {T: Counter(words(T, 1, 400)).most_common(1)[0][1] for T in (0.2, 1, 50)}
    assert top[0.2] > top[1] > top[50], top
    assert len(set(words(0.2, 1, 400))) < len(set(words(1, 1, 400)))


@pytest.mark.parametrize("args, says", [
    (["nowhere/checkpoint.npz"], "no checkpoint at nowhere/checkpoint.npz: give a checkpoint.npz"),
    (["kn9"], "no checkpoint at kn9"),
    (["{tmp}"], "holds no checkpoint.npz"),
    (["{tmp}/not.npz"], "is not a readable nplm-edu checkpoint"),
    (["kn3", "--words", "0"], "--words must be at least 1, got 0"),
    (["kn3", "--temperature", "-1"], "--temperature must be a number >= 0"),
    (["kn3", "--temperature", "nan"], "--temperature must be a number >= 0"),
    (["kn3", "--samples", "0"], "--samples must be at least 1"),
    (["{runs}/nplm", *SYN[:2], "--synthetic-tokens", "7000"], "was trained on other data than synthetic as split here"),
    (["{runs}/nplm", *SYN, "--train-size", "0.7"], "was trained on other data than synthetic as split here"),
    (["{runs}/rnn", *SYN[:2], "--synthetic-tokens", "7000"], "was trained on other data"),
    (["{runs}/transformer", *SYN[:2], "--synthetic-tokens", "7000"], "was trained on other data than synthetic"),
    (["{runs}/transformer", *SYN, "--train-size", "0.7"], "was trained on other data than synthetic as split here"),
    (["{tmp}/mystery.npz"], "holds a mystery model, which sample cannot read"),
])
def test_sample_refuses_bad_input_in_one_line(tiny_runs, tmp_path, capsys, args, says):
    from nplm_edu.training.checkpoint import load_checkpoint, save_checkpoint

    (tmp_path / "not.npz").write_text("hello")
    meta, params, best, extra = load_checkpoint(tiny_runs / "transformer" / "checkpoint.npz")
    save_checkpoint(tmp_path / "mystery.npz", params, {**meta, "kind": "mystery"}, best, extra)
    args = [a.format(tmp=tmp_path, runs=tiny_runs) for a in args]
    status, out, err = _sample(capsys, *args, *([] if "--synthetic-tokens" in args else SYN), "--quiet")
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1, (status, out, err)
    assert err.startswith("error: ") and says in err, err


def test_a_test_size_and_the_split_said_in_the_first_line(tmp_path, capsys):
    from nplm_edu.cli import main
    from nplm_edu.data.corpus import load_corpus

    whole, cut = load_corpus("synthetic", synthetic_tokens=3000), load_corpus("synthetic", synthetic_tokens=3000, test=100)
    assert cut.name == "synthetic[test 100]" and len(cut.test) == 100 and cut.vocab.words == whole.vocab.words
    assert np.array_equal(cut.ids, whole.ids[:len(whole.train) + len(whole.valid) + 100])
    assert main(["train", "--corpus", "synthetic", "--synthetic-tokens", "3000", "--test-size", "0.05", "--epochs",
                 "1", "--max-updates", "2", "--out", str(tmp_path / "x")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("synthetic[test 150]: |V| = 47, 2,400 / 300 / 150 train / valid / test tokens"), first
    assert main(["corpus", "info", "--corpus", "synthetic", "--synthetic-tokens", "3000", "--test-size", "301"]) == 2
    assert "--test-size must be a positive count or fraction of at most the 300 tokens" in capsys.readouterr().err
