"""The backends' interface (training.backends): which update a model gets is what the model declares
(``fused_sgd``: a fused SGD step; ``sparse_grads``: dL/dC as rows), never what attributes it happens
to have. A network read through an input layer (models.input.WithInput) declares neither, so its
gradient goes back through the layer: trained, it is the plain network trained on the layer's table."""

import numpy as np
import pytest

from nplm_edu.data.corpus import load_corpus
from nplm_edu.models.energy import EnergyNPLM
from nplm_edu.models.input import Table, WithInput
from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.models.rnn import RecurrentConfig
from nplm_edu.numerics.fused import FusedNPLM
from nplm_edu.numerics.recurrent import recurrent_model
from nplm_edu.numerics.sparse import SparseNPLM
from nplm_edu.numerics.window_recurrent import WindowRecurrent
from nplm_edu.training.stream import StreamBackend, StreamConfig
from nplm_edu.training.trainer import TrainConfig, train

CFG = TrainConfig(epochs=2, batch=16, lr=0.3, decay_rate=1e-3, weight_decay=1e-3, seed=4, patience=5)


@pytest.fixture(scope="module")
def corpus():
    return load_corpus("synthetic", synthetic_tokens=3_000, seed=2)


def counting(monkeypatch, cls, *names):
    """Count the calls of ``cls``'s methods ``names`` (the methods still run)."""
    calls = dict.fromkeys(names, 0)
    for name in names:
        real = getattr(cls, name)

        def counted(self, *a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(self, *a, **k)

        monkeypatch.setattr(cls, name, counted)
    return calls


def test_what_each_model_declares():
    assert FusedNPLM.fused_sgd and SparseNPLM.fused_sgd
    assert not NPLM.fused_sgd and not WindowRecurrent.fused_sgd and not EnergyNPLM.fused_sgd  # the one rule
    rec = RecurrentConfig(V=12, cell="lstm", m=3, h=4)
    assert recurrent_model(rec).sparse_grads and not recurrent_model(rec, fast=False).sparse_grads
    for net in (FusedNPLM(NPLMConfig(V=12, n=3, m=3, h=4)), recurrent_model(rec)):
        wrapped = WithInput(net, Table(12, 3))
        assert not wrapped.fused_sgd and not wrapped.sparse_grads  # declared off, whatever the network has


def test_the_nplm_takes_its_fused_step_and_an_input_layer_the_generic_path(corpus, monkeypatch):
    net = NPLMConfig(V=corpus.V, n=3, m=4, h=6, dtype="float64", seed=1)
    calls = counting(monkeypatch, FusedNPLM, "sgd_update", "loss_and_grads")
    train(FusedNPLM(net), corpus, CFG, quiet=True)
    assert calls["sgd_update"] > 0 and calls["loss_and_grads"] == 0
    calls.update(sgd_update=0, loss_and_grads=0)
    plain, model = NPLM(net), WithInput(FusedNPLM(net), Table(corpus.V, 4))
    model.params["C"][...] = plain.params["C"]  # the layer's table starts where the plain network's does
    h_in, h_plain = train(model, corpus, CFG, quiet=True), train(plain, corpus, CFG, quiet=True)
    assert calls["sgd_update"] == 0 and calls["loss_and_grads"] == h_in["updates"] > 0
    for k in plain.params:  # the table C trained through the layer, as the plain network trains its own
        np.testing.assert_allclose(model.params[k], plain.params[k], rtol=1e-9, atol=1e-12, err_msg=k)
    assert [e["valid_ppl"] for e in h_in["epochs"]] == pytest.approx([e["valid_ppl"] for e in h_plain["epochs"]],
                                                                      rel=1e-10)


def test_the_fast_recurrent_net_sends_rows_and_an_input_layer_the_whole_gradient(corpus, monkeypatch):
    rec = RecurrentConfig(V=corpus.V, cell="lstm", m=4, h=5, dtype="float64", seed=1)
    cfg = TrainConfig(epochs=1, batch=4, lr=0.5, decay_rate=0.0, weight_decay=1e-4, seed=2)
    fast = type(recurrent_model(rec))
    calls = counting(monkeypatch, fast, "loss_and_sparse_grads", "loss_and_grads")

    def fit(model):
        return train(model, corpus, cfg, quiet=True, backend=StreamBackend(model, cfg, StreamConfig(T=6, clip=0.5)))

    fit(recurrent_model(rec))
    assert calls["loss_and_sparse_grads"] > 0 and calls["loss_and_grads"] == 0
    calls.update(loss_and_sparse_grads=0, loss_and_grads=0)
    plain, model = recurrent_model(rec, fast=False), WithInput(recurrent_model(rec), Table(corpus.V, 4))
    model.params["C"][...] = plain.params["C"]
    h_in, h_plain = fit(model), fit(plain)
    assert calls["loss_and_grads"] == h_in["updates"] > 0  # (the fast net computes it from its rows)
    for k in plain.params:
        np.testing.assert_allclose(model.params[k], plain.params[k], rtol=1e-9, atol=1e-12, err_msg=k)
    assert h_in["epochs"][-1]["valid_ppl"] == pytest.approx(h_plain["epochs"][-1]["valid_ppl"], rel=1e-10)
