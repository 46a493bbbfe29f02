"""``python -m nplm_edu sample``: text from any trained network or n-gram model.

    python -m nplm_edu sample ~/.cache/nplm_edu/runs/table1/MLP9 --prompt "It was"   # a run folder
    python -m nplm_edu sample runs/train/checkpoint.npz --corpus synthetic --words 30 --seed 1
    python -m nplm_edu sample kn5 --prompt "It was" --samples 3 --temperature 0.8    # an n-gram

A checkpoint (or the run folder holding ``checkpoint.npz``) of the NPLM, of the NPLM with a cheap
output layer (``reproduce output-layers``, with the ``run_config.json`` beside it), of a
recurrent network (the character-aware LSTM too: it spells the corpus's vocabulary) or of a Transformer
(``reproduce recurrent``); or an n-gram by name (``kn5``, ``kn3``, ``mle3``, ``interp``: the deleted-
interpolation trigram), fitted on the training split first. The corpus options name the data the
network was trained on (its vocabulary reads and writes the words; another split is refused).
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from pathlib import Path

import numpy as np

from ..analysis.sampling import check_trained_on, sample
from ..data.vocab import PARAGRAPH, UNK
from ..errors import UserError, a_model
from ..models.rnn import ALL_CELLS
from ..models.transformer import Transformer
from .corpus import add_corpus_args, corpus_from_args

NGRAM = re.compile(r"^(mle|kn|interp)([2-5]?)$")
WINDOW_KINDS = tuple(f"{cell}-window" for cell in ALL_CELLS)  # a recurrent cell reading the last n-1 words
ACCEPTED = "a checkpoint.npz, a run folder holding one, or an n-gram: kn5, kn3, mle3, interp"


def _checkpoint_path(spec: str) -> Path | None:
    """The checkpoint ``spec`` names, None for an n-gram's name; one line for anything else."""
    path = Path(spec).expanduser()
    if not path.exists():
        if NGRAM.match(spec):
            return None
        raise UserError(f"no checkpoint at {spec}: give {ACCEPTED}")
    if path.is_dir():
        if not (path / "checkpoint.npz").is_file():
            raise UserError(f"{spec} holds no checkpoint.npz: give {ACCEPTED}")
        path = path / "checkpoint.npz"
    return path


def _check_options(args) -> None:
    """The flags, before any work."""
    if args.words < 1:
        raise UserError(f"--words must be at least 1, got {args.words}")
    if args.samples < 1:
        raise UserError(f"--samples must be at least 1, got {args.samples}")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise UserError(f"--temperature must be a number >= 0 (1: the model itself, 0: always its most "
                        f"probable word), got {args.temperature}")
    if args.seed < 0:
        raise UserError(f"--seed must be 0 or more, got {args.seed}")


def _output_layer_network(path: Path, meta: dict, corpus):
    """An NPLM with a cheap output layer (or LightRNN's input and output layers), rebuilt as
    ``reproduce output-layers`` built it (its ``run_config.json`` names the method); its parameters are
    not yet set."""
    from ..experiments.output_layers import OutputLayersOptions
    from ..experiments.output_methods import build_model
    from ..models.nplm import NPLMConfig
    from ..training.checkpoint import build_from_meta

    stamp = path.parent / "run_config.json"
    if not stamp.is_file():
        what = f"the {meta['kind'][5:]} output layer" if meta["kind"] != "nplm" else "an input layer other than C"
        raise UserError(f"{path} holds an NPLM with {what}, but no run_config.json beside it says how it was built")
    doc = json.loads(stamp.read_text())
    s = doc.get("settings", {})
    opts = OutputLayersOptions(n_classes=s.get("n_classes"), k_is=s.get("k_is", 100), k_nce=s.get("k_nce", 25),
                               class_file=doc.get("class_file"))
    config = build_from_meta(path, lambda c: NPLMConfig(**c), meta["model"])
    return build_model(doc["method"], corpus, config, opts, cache=path.parent.parent)[0]


def _loaders() -> dict:
    """{checkpoint kind: a function (path, best) -> the model to sample from}, one entry a kind ``sample``
    reads whole (an NPLM with a cheap output layer, kind ``nplm-<layer>``, is read apart: it needs its
    run folder's run_config.json)."""
    from ..training.blocks import transformer_from_checkpoint
    from ..numerics.window_recurrent import WindowRecurrent, WindowRecurrentConfig
    from ..training.checkpoint import build_from_meta, model_from_checkpoint, network_from_checkpoint
    from ..training.stream import recurrent_from_checkpoint

    def window_recurrent(path, best):  # lstm-4 of ``reproduce recurrent``: read as an NPLM is, from its window
        def build(meta):
            return build_from_meta(path, lambda c: WindowRecurrent(WindowRecurrentConfig(**c)), meta["model"])

        return network_from_checkpoint(path, WINDOW_KINDS, "a recurrent network reading a window", build, best)

    return {"nplm": model_from_checkpoint, **dict.fromkeys(ALL_CELLS, recurrent_from_checkpoint),
            **dict.fromkeys(WINDOW_KINDS, window_recurrent),
            # read as the recurrent models are: it keeps the last n_ctx words read
            Transformer.kind: lambda path, best: transformer_from_checkpoint(path, best).window_model()}


INPUTS = {"char": ALL_CELLS, "lightrnn": ("nplm",)}  # the input layers other than C sample reads, under which kinds


def input_layer(path: Path, meta: dict, params: dict) -> str | None:
    """The input layer a checkpoint's network reads its words through, as its meta's ``input`` record
    names it (None: the table C). A checkpoint written before the record was kept has none: a network
    without C reads its words through the character-aware layer (a recurrent cell) or LightRNN's (an NPLM)."""
    if "input" not in meta:
        legacy = {kind: name for name, kinds in INPUTS.items() for kind in kinds}
        return None if "C" in params else legacy.get(meta["kind"])
    record = meta["input"]  # {layer's name: its settings}
    name = next(iter(record)) if isinstance(record, dict) and len(record) == 1 else None
    if name == "table":
        return None
    if meta["kind"] not in INPUTS.get(name, ()):
        raise UserError(f"{path} holds {a_model(meta['kind'])} model reading its words through the input "
                        f"layer {name or record!r}, which sample cannot read")
    return name


def load_model(spec: str, corpus, latest: bool = False, quiet: bool = False):
    """The model ``spec`` names (see the module docstring), ready to sample from ``corpus``'s vocabulary."""
    from ..training.checkpoint import load_checkpoint, set_params
    from ..training.stream import char_recurrent_network

    path = _checkpoint_path(spec)
    if path is None:
        from ..models.ngram.build import build_model

        name, order = NGRAM.match(spec).groups()
        model = build_model(name, int(order or (3 if name == "interp" else 5)), corpus.V, quiet=True)
        if name == "interp":
            return model.fit(corpus.train, valid=corpus.windows("valid", 3))
        return model.fit(corpus.train, progress=not quiet)
    meta, params, best, _ = load_checkpoint(path)
    kind, loaders = meta["kind"], _loaders()
    if kind == "energy":
        raise UserError(f"{path} holds the energy-minimization network, which has no next-word distribution "
                        "cheap enough to sample from")
    if kind not in loaders and not kind.startswith("nplm-"):
        raise UserError(f"{path} holds {a_model(kind)} model, which sample cannot read")
    check_trained_on(path, meta, corpus)
    layer = input_layer(path, meta, params)
    if layer is None and kind in loaders:  # read whole, as it was trained
        return loaders[kind](path, not latest)
    if layer == "char":  # the character-aware LSTM: it spells the corpus's words
        model = char_recurrent_network(path, meta, params, corpus.vocab.words)
    else:  # a cheap output layer, or LightRNN's input and output layers: as its run_config.json says
        model = _output_layer_network(path, meta, corpus)
    set_params(model, best if best is not None and not latest else params)
    return model


def context_ids(model, vocab, prompt: str) -> np.ndarray:
    """The prompt's ids, after paragraph marks that fill the window a model of order n reads (a
    recurrent model or a Transformer reads one mark and the prompt): the text starts a paragraph."""
    words = prompt.split()
    need = 1 if hasattr(model, "initial_state") else model.order - 1
    pad = PARAGRAPH if PARAGRAPH in vocab.index else UNK
    return vocab.encode([pad] * max(need - len(words), 1 if not words else 0) + words)


def _cmd_sample(args) -> int:
    _check_options(args)
    _checkpoint_path(args.model)  # a bad path is refused before the corpus is read
    corpus = corpus_from_args(args)
    model = load_model(args.model, corpus, latest=args.latest, quiet=args.quiet)
    ids = context_ids(model, corpus.vocab, args.prompt)
    ban = corpus.vocab.encode([UNK]).tolist() if args.no_unk else []
    texts = sample(model, ids, np.random.default_rng(args.seed), length=args.words, temperature=args.temperature,
                   ban=ban, samples=args.samples)
    for k, t in enumerate(texts):
        text = " ".join(args.prompt.split() + corpus.vocab.decode(t))
        print(("\n" if k else "") + textwrap.fill(text, 88))
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "sample", help="generate text from a trained network or an n-gram model",
        description="Continue a prompt with words drawn one at a time from a model's next-word distribution "
                    f"(ancestral sampling). MODEL: {ACCEPTED} (fitted on the training split first). The corpus "
                    "options name the data the network was trained on; a seed fixes the text.")
    p.add_argument("model", metavar="MODEL", help=ACCEPTED)
    add_corpus_args(p)
    p.add_argument("--words", type=int, default=40, help="words to draw per sample (default 40)")
    p.add_argument("--samples", type=int, default=1, help="how many samples (default 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed: the same seed, the same text (default 0)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="1 samples the model itself (default), below 1 sharpens it (0: always the most "
                        "probable word), above 1 flattens it")
    p.add_argument("--prompt", default="", help="the words to continue (default: none, a paragraph's start)")
    p.add_argument("--no-unk", action="store_true", help=f"never draw {UNK}")
    p.add_argument("--latest", action="store_true",
                   help="the checkpoint's latest parameters (default: the best on validation)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_sample)
