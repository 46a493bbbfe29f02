"""Every model the package trains, tiny, on the synthetic corpus: for tests/test_resume_every_model.py.

Run as a script, ``python tests/resume_models.py NAME OUT [KILL_AT | resume]`` trains model NAME into
OUT; with KILL_AT it checkpoints after every update and kills itself with SIGKILL at that update
(kill -9), with ``resume`` it resumes from OUT. It prints nothing; OUT holds the checkpoint and history.
"""

import os
import signal
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nplm_edu.data.corpus import load_corpus  # noqa: E402
from nplm_edu.models.adaptive_softmax import AdaptiveSoftmax  # noqa: E402
from nplm_edu.models.class_softmax import ClassSoftmax, frequency_classes  # noqa: E402
from nplm_edu.models.differentiated_softmax import DifferentiatedSoftmax  # noqa: E402
from nplm_edu.models.energy import EnergyConfig, EnergyNPLM  # noqa: E402
from nplm_edu.models.nplm import NPLMConfig  # noqa: E402
from nplm_edu.models.rnn import RecurrentConfig  # noqa: E402
from nplm_edu.models.sampled_softmax import (AdaptiveImportanceSampling, ImportanceSampling,  # noqa: E402
                                             ImportanceSamplingWithTarget, NCESoftmax)
from nplm_edu.models.sparse_output import train_counts  # noqa: E402
from nplm_edu.models.transformer import TransformerConfig  # noqa: E402
from nplm_edu.models.tree_softmax import TreeSoftmax  # noqa: E402
from nplm_edu.models.trees import Tree, huffman_merges  # noqa: E402
from nplm_edu.numerics.fused import FusedNPLM  # noqa: E402
from nplm_edu.numerics.recurrent import recurrent_model  # noqa: E402
from nplm_edu.numerics.sparse import SparseNPLM  # noqa: E402
from nplm_edu.numerics.transformer import FastTransformer  # noqa: E402
from nplm_edu.training.blocks import BlockBackend  # noqa: E402
from nplm_edu.training.stream import StreamBackend, StreamConfig  # noqa: E402
from nplm_edu.training.trainer import TrainConfig, train  # noqa: E402

SGD = TrainConfig(epochs=3, batch=32, lr=0.3, decay_rate=1e-3, weight_decay=1e-3, seed=2, patience=5)
MODELS = ("nplm-sgd", "nplm-adam-dropout", "class", "tree", "is", "is-adaptive", "is-target", "nce", "adaptive",
          "differentiated", "energy", "rnn", "lstm", "gru", "transformer")


def corpus():
    return load_corpus("synthetic", synthetic_tokens=3000, seed=3)


def build(name: str, c):
    """(model, TrainConfig, backend or None) of one model of the package."""
    net = NPLMConfig(V=c.V, n=3, m=6, h=8, direct=False, seed=1)
    counts = train_counts(c.train, c.V)
    sparse = {"class": lambda: ClassSoftmax(c.V, 8, frequency_classes(counts, 5)),
              "tree": lambda: TreeSoftmax(c.V, 8, Tree(huffman_merges(counts), c.V)),
              "is": lambda: ImportanceSampling(c.V, 8, counts, 5, seed=1),
              "is-adaptive": lambda: AdaptiveImportanceSampling(c.V, 8, counts, 5, seed=1),
              "is-target": lambda: ImportanceSamplingWithTarget(c.V, 8, counts, 5, seed=1),
              "nce": lambda: NCESoftmax(c.V, 8, counts, 5, seed=1),
              "adaptive": lambda: AdaptiveSoftmax(c.V, 8, (4, 12), counts),
              "differentiated": lambda: DifferentiatedSoftmax(c.V, 8, (4, 12), (4, 3, 1), counts)}
    if name == "nplm-sgd":
        return FusedNPLM(replace(net, direct=True)), SGD, None
    if name == "nplm-adam-dropout":
        cfg = replace(SGD, optimizer="adam", lr=3e-3, dropout_x=0.1, dropout_a=0.2, lr_decay=0.8, decay_rate=0.0)
        return FusedNPLM(replace(net, direct=True)), cfg, None
    if name in sparse:
        return SparseNPLM(net, sparse[name]()), SGD, None
    if name == "energy":
        return EnergyNPLM(EnergyConfig(V=c.V, n=3, m=6, h=8, seed=1)), replace(SGD, batch=64, epochs=2), None
    if name == "transformer":  # Adam, clipping, the output tied to the table
        model = FastTransformer(TransformerConfig(V=c.V, n_ctx=6, m=8, heads=2, layers=1, d_ff=16, seed=1))
        cfg = replace(SGD, optimizer="adam", lr=3e-3, batch=8, decay_rate=0.0, lr_decay=0.8, tie=True)
        return model, cfg, BlockBackend(model, cfg, clip=1.0)
    cfg = replace(SGD, batch=4, lr=0.5, decay_rate=0.0, lr_decay=0.8, dropout_x=0.1)
    model = recurrent_model(RecurrentConfig(V=c.V, cell=name, m=6, h=8, seed=1))
    return model, cfg, StreamBackend(model, cfg, StreamConfig(T=12, clip=1.0))


def run(name: str, out, kill_at: int | None = None, resume: bool = False, stop_at: int | None = None) -> dict:
    """Train ``name`` into ``out``; ``kill_at``: kill -9 this process at that update (checkpointing
    after every update); ``stop_at``: stop there as Ctrl-C does (the trainer's own interruption)."""
    c = corpus()
    model, cfg, backend = build(name, c)
    if kill_at is not None:
        cfg = replace(cfg, checkpoint_every_minutes=0.0)  # a timed checkpoint after every update

    def callback(step, _):
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if step == stop_at:
            raise KeyboardInterrupt  # as Ctrl-C: a checkpoint of this update, then the run stops

    history = train(model, c, cfg, out_dir=out, resume=resume, quiet=True, backend=backend, callback=callback,
                    callback_every=1)
    return {"history": history, "params": model.params}


if __name__ == "__main__":
    arg = sys.argv[3] if len(sys.argv) > 3 else None
    run(sys.argv[1], sys.argv[2], kill_at=int(arg) if arg not in (None, "resume") else None, resume=arg == "resume")
