"""The trainer's ``frozen`` option: named parameters never move; the others train as before."""

import numpy as np
import pytest

from nplm_edu.data.corpus import load_corpus
from nplm_edu.errors import UserError
from nplm_edu.models.nplm import NPLM, NPLMConfig
from nplm_edu.numerics.fused import FusedNPLM
from nplm_edu.training.trainer import TrainConfig, train


@pytest.mark.parametrize("cls", [NPLM, FusedNPLM])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_frozen_parameters_stay(cls, optimizer):
    corpus = load_corpus("synthetic", synthetic_tokens=4_000, seed=1)
    model = cls(NPLMConfig(V=corpus.V, n=3, m=4, h=6, seed=0))
    before = {k: v.copy() for k, v in model.params.items()}
    cfg = TrainConfig(epochs=2, batch=16, lr=0.3 if optimizer == "sgd" else 1e-2, weight_decay=1e-3,
                      optimizer=optimizer, frozen="C, d")
    hist = train(model, corpus, cfg, quiet=True)
    for k in ("C", "d"):
        assert np.array_equal(model.params[k], before[k]), k  # no step, no weight decay
    for k in ("H", "U", "W", "b"):
        assert not np.array_equal(model.params[k], before[k]), k
    assert hist["epochs"][-1]["valid_ppl"] < corpus.V  # it still learned something


def test_frozen_resume_and_errors(tmp_path):
    corpus = load_corpus("synthetic", synthetic_tokens=4_000, seed=1)
    new = lambda: FusedNPLM(NPLMConfig(V=corpus.V, n=3, m=4, h=6, seed=0))  # noqa: E731
    cfg = TrainConfig(epochs=2, batch=16, lr=0.3, frozen="C", seed=3)
    whole = new()
    train(whole, corpus, cfg, quiet=True)
    part = new()
    train(part, corpus, TrainConfig(**{**cfg.__dict__, "epochs": 1}), out_dir=tmp_path, quiet=True)
    again = new()
    train(again, corpus, cfg, out_dir=tmp_path, resume=True, quiet=True)
    assert all(np.array_equal(whole.params[k], again.params[k]) for k in whole.params)
    with pytest.raises(UserError, match="frozen"):
        train(new(), corpus, TrainConfig(**{**cfg.__dict__, "frozen": ""}), out_dir=tmp_path, resume=True,
              quiet=True)
    with pytest.raises(UserError, match="unknown parameter"):
        TrainConfig(frozen="Q").validate()
    with pytest.raises(UserError, match="tied"):
        TrainConfig(frozen="C", tie=True).validate()
