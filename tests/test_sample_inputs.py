"""cli.sample.load_model reads each kind of checkpoint by what its meta records (the kind, and the
``input`` record the trainer writes for an input layer other than C), not by which parameters it holds:
every network is tiny and trained one update, saved by the trainer as every run is, then read back."""

import json
from dataclasses import replace

import numpy as np
import pytest

from nplm_edu.cli.sample import load_model
from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.training.checkpoint import load_checkpoint, save_checkpoint
from nplm_edu.training.trainer import TrainConfig, train

CFG = TrainConfig(epochs=1, batch=4, lr=0.1, seed=0, max_updates=1)
TIED = replace(CFG, tie=True)  # the Transformer's, tied as it is built


@pytest.fixture(scope="module")
def corpus():
    return load_corpus("synthetic", synthetic_tokens=3_000)


def saved(model, corpus, folder, backend=None, cfg=CFG, method=None):
    """``model`` trained one update, its checkpoint in ``folder`` (with the run_config.json that
    ``reproduce output-layers`` writes, for ``method``); the checkpoint's path."""
    train(model, corpus, cfg, out_dir=folder, quiet=True, backend=backend)
    if method is not None:
        (folder / "run_config.json").write_text(json.dumps({"method": method, "settings": {}}))
    return folder / "checkpoint.npz"


def networks(corpus, root):
    """{name: (checkpoint path, what load_model must give: a check on the model)} for every kind."""
    from nplm_edu.experiments.lightrnn_char import char_lstm
    from nplm_edu.experiments.output_layers import OutputLayersOptions
    from nplm_edu.experiments.output_methods import build_model
    from nplm_edu.models.char_input import CharInput
    from nplm_edu.models.input import WithInput
    from nplm_edu.models.lightrnn import LightInput
    from nplm_edu.models.nplm import NPLMConfig
    from nplm_edu.models.rnn import RecurrentConfig
    from nplm_edu.models.transformer import TransformerConfig, WindowReader
    from nplm_edu.numerics.fused import FusedNPLM
    from nplm_edu.numerics.recurrent import recurrent_model
    from nplm_edu.numerics.sparse import SparseNPLM
    from nplm_edu.numerics.transformer import FastTransformer
    from nplm_edu.numerics.window_recurrent import WindowRecurrent, WindowRecurrentConfig
    from nplm_edu.training.blocks import BlockBackend
    from nplm_edu.training.stream import StreamBackend, StreamConfig

    net = NPLMConfig(V=corpus.V, n=3, m=8, h=8, direct=False, seed=1)
    rnn = recurrent_model(RecurrentConfig(V=corpus.V, cell="lstm", m=8, h=8, seed=1))
    char = char_lstm(corpus.vocab.words, seed=1, sizes={"h": 8}, quick=True)
    window = WindowRecurrent(WindowRecurrentConfig(V=corpus.V, cell="lstm", n=3, m=8, h=8, seed=1))
    transformer = FastTransformer(TransformerConfig(V=corpus.V, n_ctx=4, m=8, heads=2, layers=1, d_ff=8, seed=1))

    def stream(model):
        return StreamBackend(model, CFG, StreamConfig(T=4))

    def reads(cls, layer=None):  # the model's class, and the class of its input layer (None: the table C)
        return lambda m: isinstance(m, cls) and type(getattr(m, "input", None)) is (layer or type(None))

    return {
        "nplm": (saved(FusedNPLM(net), corpus, root / "nplm"), reads(FusedNPLM)),
        "lstm": (saved(rnn, corpus, root / "lstm", stream(rnn)), reads(type(rnn))),
        "char-lstm": (saved(char, corpus, root / "char", stream(char)), reads(WithInput, CharInput)),
        "lstm-window": (saved(window, corpus, root / "window"), reads(WindowRecurrent)),
        "transformer": (saved(transformer, corpus, root / "transformer", BlockBackend(transformer, TIED), TIED),
                        reads(WindowReader)),
        "nce": (saved(build_model("nce", corpus, net, OutputLayersOptions())[0], corpus, root / "ol" / "nce",
                      method="nce"),
                lambda m: isinstance(m, SparseNPLM) and m.kind == "nplm-NCE"),
        "lightrnn": (saved(build_model("lightrnn", corpus, net, OutputLayersOptions())[0], corpus,
                           root / "ol" / "lightrnn", method="lightrnn"), reads(WithInput, LightInput)),
    }


@pytest.fixture(scope="module")
def checkpoints(corpus, tmp_path_factory):
    return networks(corpus, tmp_path_factory.mktemp("inputs"))


@pytest.mark.parametrize("name", ["nplm", "lstm", "char-lstm", "lstm-window", "transformer", "nce", "lightrnn"])
def test_each_checkpoint_is_read_by_its_own_loader(checkpoints, corpus, tmp_path, name):
    path, check = checkpoints[name]
    meta, params, best, extra = load_checkpoint(path)
    records = {"char-lstm": {"char"}, "lightrnn": {"lightrnn"}}  # the trainer names the input layer, if not C
    assert set(meta.get("input", {})) == records.get(name, set()), meta.get("input")
    assert check(load_model(str(path), corpus, latest=True))
    # the parameters read are the saved ones: the latest with latest=True, else the best; this one-epoch
    # checkpoint stores no best apart, so both read the latest; a copy whose best is moved 1 away from the
    # latest shows which one was read
    assert best is None
    moved = {k: v + 1 if v.dtype.kind == "f" else v for k, v in params.items()}
    copy = tmp_path / "checkpoint.npz"
    save_checkpoint(copy, params, meta, moved, extra)
    if (path.parent / "run_config.json").exists():  # an output layer's run: its run_config.json says which
        (tmp_path / "run_config.json").write_text((path.parent / "run_config.json").read_text())
    for where, latest, want in ((path, False, params), (copy, True, params), (copy, False, moved)):
        got = load_model(str(where), corpus, latest=latest).params
        assert set(got) == set(want), (where, latest, sorted(set(got) ^ set(want)))
        assert all(np.array_equal(got[k], want[k]) for k in want), (where, latest)


def test_a_checkpoint_from_before_the_record_is_read_from_its_parameters(checkpoints, corpus, tmp_path):
    """Checkpoints written before the trainer kept the ``input`` record: no C means LightRNN's input layer
    under an NPLM (the character-aware layer under a recurrent cell: tests/test_lightrnn_char.py)."""
    path, check = checkpoints["lightrnn"]
    meta, params, best, extra = load_checkpoint(path)
    old = tmp_path / "checkpoint.npz"
    save_checkpoint(old, params, {k: v for k, v in meta.items() if k != "input"}, best, extra)
    (tmp_path / "run_config.json").write_text((path.parent / "run_config.json").read_text())
    assert "C" not in params and check(load_model(str(old), corpus, latest=True))


@pytest.mark.parametrize("name, record, says", [
    ("char-lstm", {"spelling": {}},
     "an LSTM model reading its words through the input layer 'spelling', which sample cannot read"),
    ("nplm", {"char": {}}, "an NPLM model reading its words through the input layer 'char', which sample cannot read"),
    ("lstm", ["char"], "an LSTM model reading its words through the input layer ['char'], which sample cannot read"),
])
def test_an_input_record_sample_cannot_read_is_one_clear_line(checkpoints, corpus, tmp_path, name, record, says):
    meta, params, best, extra = load_checkpoint(checkpoints[name][0])
    save_checkpoint(tmp_path / "checkpoint.npz", params, {**meta, "input": record}, best, extra)
    with pytest.raises(UserError, match="input layer") as e:
        load_model(str(tmp_path), corpus)
    assert says in str(e.value) and "\n" not in str(e.value)
