"""The LightRNN and character-aware rows (experiments.lightrnn_char): the LightRNN network trains with its
table reassigned after every epoch (the history says the perplexities before and after, the checkpoint
keeps the table, a resumed run continues), and the character-aware LSTM trains on the stream."""

import numpy as np

from nplm_edu.data.corpus import load_corpus
from nplm_edu.experiments.lightrnn_char import CHAR_QUICK, Reassigning, char_lstm, lightrnn_network
from nplm_edu.models.nplm import NPLMConfig
from nplm_edu.training.backends import SerialBackend
from nplm_edu.training.stream import StreamBackend, StreamConfig
from nplm_edu.training.trainer import TrainConfig, train


class Backend(Reassigning, SerialBackend):
    pass


def test_lightrnn_reassigns_after_every_epoch_and_resumes(tmp_path):
    corpus = load_corpus("synthetic", synthetic_tokens=5_000, seed=3)
    net = NPLMConfig(V=corpus.V, n=3, m=8, h=16, direct=False, seed=1)
    model, desc = lightrnn_network(corpus, net)
    assert desc["table"] == [7, 7] and desc["cost_per_example"] == 7 + 7 + 16
    cfg = TrainConfig(epochs=2, batch=16, lr=0.1, seed=2)
    h = train(model, corpus, cfg, out_dir=tmp_path, quiet=True, backend=Backend(model, cfg))
    for e in h["epochs"]:
        r = e["reassign"]
        assert r["cost_after"] <= r["cost_before"] and {"valid_ppl_before", "valid_ppl_after", "moved"} <= set(r)
        assert e["reassign_cpu_seconds"] >= 0
    slot = model.params["slot"].copy()
    again, _ = lightrnn_network(corpus, net)
    cfg3 = TrainConfig(epochs=3, batch=16, lr=0.1, seed=2)
    h3 = train(again, corpus, cfg3, out_dir=tmp_path, resume=True, quiet=True, backend=Backend(again, cfg3))
    assert len(h3["epochs"]) == 3 and h3["epochs"][:2] == h["epochs"]
    assert len(np.unique(again.params["slot"])) == corpus.V and slot.shape == again.params["slot"].shape


def test_lightrnn_is_a_method_of_output_layers():
    from nplm_edu.experiments.output_layers import NETWORK
    from nplm_edu.experiments.output_methods import METHODS, LightRNNBackend, build_model

    corpus = load_corpus("synthetic", synthetic_tokens=5_000, seed=3)
    model, desc = build_model("lightrnn", corpus, NPLMConfig(V=corpus.V, seed=1, **NETWORK), None)
    assert "lightrnn" in METHODS and desc["table"] == [7, 7]
    c, _ = corpus.windows("valid", model.order)
    p = model.probs(c[:50])  # first: the input layer fills the rows of C it reads (a sampler asks probs alone)
    assert np.allclose(p.sum(axis=1), 1.0, atol=1e-5) and np.allclose(p, np.exp(model.log_probs(c[:50])))
    cfg = TrainConfig(epochs=2, batch=32, lr=1.0, seed=0, threads=1)
    hist = train(model, corpus, cfg, quiet=True, backend=LightRNNBackend(model, cfg))["epochs"]
    assert hist[-1]["valid_ppl"] < hist[0]["valid_ppl"] < corpus.V
    assert all("train_cpu_seconds" in e and "reassign" in e for e in hist)


def test_the_char_lstm_trains_on_the_stream():
    corpus = load_corpus("synthetic", synthetic_tokens=3_000, seed=3)
    model = char_lstm(corpus.vocab.words, seed=1, sizes={"h": 16}, quick=True)
    assert model.config.m == CHAR_QUICK.m and "C" not in model.params
    cfg = TrainConfig(epochs=2, batch=4, lr=1.0, seed=2)
    e = train(model, corpus, cfg, quiet=True, backend=StreamBackend(model, cfg, StreamConfig(T=8, clip=0.25)))["epochs"]
    assert e[-1]["valid_ppl"] < e[0]["valid_ppl"] < corpus.V


def test_char_lstm_is_a_row_of_the_recurrent_table():
    from nplm_edu.analysis.recurrent import gradient_through_time
    from nplm_edu.experiments.recurrent_rows import ROWS, parameter_counts, sizes

    corpus = load_corpus("synthetic", synthetic_tokens=3_000, seed=3)
    row = ROWS["char-lstm"]
    assert row.kind == "stream"
    model = row.make(corpus.V, 0, {**sizes(True), "words": corpus.vocab.words})
    assert model.input.S.shape[0] == corpus.V and model.config.m == 525
    assert parameter_counts(corpus.V, True, ["char-lstm"])["char-lstm"] == model.num_params()
    norms = gradient_through_time(model, corpus.valid, K=3, positions=4, warmup=2)  # through the LSTM it wraps
    assert len(norms) == 4 and all(n > 0 for n in norms)


def test_a_char_lstm_checkpoint_samples_through_the_cli(tmp_path, capsys):
    """A tiny character-aware LSTM trained one epoch on the stream (its checkpoint saved by the trainer,
    as every run's is) samples through ``python -m nplm_edu sample``: the layer rebuilt from the
    checkpoint spells the corpus's words, so the CLI draws the very words the trained model in memory
    draws with the same seed. A checkpoint whose meta predates the layer's record (the row's first
    runs) is read from its parameters' shapes, with the same text."""
    from nplm_edu.analysis.sampling import sample
    from nplm_edu.cli import main
    from nplm_edu.cli.sample import context_ids
    from nplm_edu.training.checkpoint import load_checkpoint, save_checkpoint

    syn = ["--corpus", "synthetic", "--synthetic-tokens", "3000"]
    corpus = load_corpus("synthetic", synthetic_tokens=3_000)  # the corpus those options name
    model = char_lstm(corpus.vocab.words, seed=1, sizes={"h": 12}, quick=True)
    cfg = TrainConfig(epochs=1, batch=4, lr=1.0, seed=2)
    train(model, corpus, cfg, out_dir=tmp_path / "run", quiet=True, backend=StreamBackend(model, cfg, StreamConfig(T=8)))
    path = tmp_path / "run" / "checkpoint.npz"
    meta, params, best, extra = load_checkpoint(path)
    assert meta["kind"] == "lstm" and "C" not in params
    assert meta["input"] == {"char": {"d": 8, "widths": [1, 2, 3], "filters": 4, "max_len": 20}}  # CHAR_QUICK
    prompt = "the"
    ids = context_ids(model, corpus.vocab, prompt)
    expected = [prompt, *corpus.vocab.decode(sample(model, ids, np.random.default_rng(5), length=12)[0])]

    def cli_words(where):
        status = main(["sample", str(where), *syn, "--words", "12", "--seed", "5", "--prompt", prompt, "--latest",
                       "--quiet"])
        out, err = capsys.readouterr()
        assert status == 0 and err == "", err
        return out.split()

    assert cli_words(tmp_path / "run") == expected
    old = {k: v for k, v in meta.items() if k != "input"}
    save_checkpoint(tmp_path / "old" / "checkpoint.npz", params, old, best, extra)
    assert cli_words(tmp_path / "old") == expected
