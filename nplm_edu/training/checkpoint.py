"""One checkpoint format for every trainer: parameters, best parameters, optimizer state, and JSON.

``checkpoint.npz`` holds plain arrays and one JSON string (``meta``), so it loads with
``allow_pickle=False``: a checkpoint from elsewhere can never run code. ``meta`` holds the format
tag, the model's kind and configuration, the training configuration, the :class:`TrainState` and a
fingerprint of the data it was trained on, so a resumed run continues exactly where the
interrupted one stopped, on the same data, or refuses with one line.

Writes are atomic (a temporary file in the same folder, fsync, rename): a kill during a write
leaves the previous checkpoint whole; temporary files left by a kill are removed by the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from ..data.files import atomic_write
from ..errors import UserError, a_model, mistyped_field

FORMAT = "nplm-edu-checkpoint-2"


class TrainingDiverged(UserError):
    """The loss or the parameters became NaN, infinite or exploded. ``report``: (what, at, detail)
    for the trainer's one line, when a backend found it (a hogwild worker), else None."""

    report = None


def check_types(cls, d: dict, what: str, path=None) -> None:
    """Refuse a field of ``d`` (a checkpoint's JSON) that is not of the type the dataclass ``cls``
    declares for it (:func:`~nplm_edu.errors.mistyped_field`). ValueError, or with ``path`` a
    UserError naming the file."""
    bad = mistyped_field(cls, d)
    if bad is None:
        return
    message = f"{what} field {bad[0]!r} is {bad[1]!r}, not {bad[2]}"
    if path is None:
        raise ValueError(message)
    raise UserError(f"{path} is not a readable nplm-edu checkpoint ({message})")


@dataclass
class TrainState:
    """Where a training run is: enough to continue it bit for bit after an interruption."""

    step: int = 0  # updates done
    epoch: int = 0  # epochs done
    batch_in_epoch: int = 0  # batches done in the current epoch
    rng_state: dict | None = None  # the example-order generator at the start of the current epoch
    drop_state: dict | None = None  # the dropout-mask generator now
    loss_sum: float = 0.0  # training NLL summed over the current epoch's examples so far
    loss_count: int = 0
    best_valid: float | None = None
    best_epoch: int | None = None
    bad_epochs: int = 0  # epochs since the best validation perplexity
    history: list = field(default_factory=list)  # one dict per finished epoch
    epoch_seconds: float = 0.0  # time already spent in the current epoch
    epoch_cpu_seconds: float = 0.0  # CPU time (this process's) already spent in the current epoch
    done: bool = False  # early stopping has ended the run

    def drop_last_epoch(self) -> None:
        """Forget the epoch just counted, whose parameters could not be saved: the epoch count, the
        history and the best validation perplexity go back to what they were before it, for the
        report of the run that stops there (the step and the example order stay where they are)."""
        self.history.pop()
        self.epoch, self.done, self.bad_epochs, best = self.epoch - 1, False, 0, None
        for e in self.history:  # as the trainer counts them: a tie is no improvement
            if "valid_ppl" not in e:
                continue
            if best is None or e["valid_ppl"] < best["valid_ppl"]:
                best, self.bad_epochs = e, 0
            else:
                self.bad_epochs += 1
        self.best_valid, self.best_epoch = (best["valid_ppl"], best["epoch"]) if best else (None, None)

    @classmethod
    def from_meta(cls, d: dict) -> "TrainState":
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown state fields {sorted(unknown)}")
        check_types(cls, d, "state")  # JSON of the right types, else a resumed run would fail deep inside
        negative = [k for k in ("step", "epoch", "batch_in_epoch", "loss_count", "bad_epochs") if d.get(k, 0) < 0]
        if negative:
            raise ValueError(f"state fields {negative} are negative")
        if not all(isinstance(e, dict) and isinstance(e.get("epoch"), int) for e in d.get("history", [])):
            raise ValueError("state field 'history' is not a list of epochs")
        for name in ("rng_state", "drop_state"):
            if d.get(name) is not None:
                np.random.PCG64().state = d[name]  # ValueError or TypeError unless a generator's state
        return cls(**d)


def saved_at(state: TrainState) -> str:
    """Where a checkpoint of ``state`` stands, as a message says it.

    >>> saved_at(TrainState(epoch=2, batch_in_epoch=0, step=40)), saved_at(TrainState(epoch=2, batch_in_epoch=5, step=45))
    ('at the end of epoch 2', 'at update 45, in epoch 3')
    """
    if state.batch_in_epoch == 0:
        return f"at the end of epoch {state.epoch}"
    return f"at update {state.step:,}, in epoch {state.epoch + 1}"


def nothing_to_train(state: TrainState, config) -> str | None:
    """Why a resumed run has nothing left to train, in one line (None: it trains).

    >>> from types import SimpleNamespace
    >>> config = SimpleNamespace(epochs=9, patience=3, max_updates=None)  # a TrainConfig's settings
    >>> nothing_to_train(TrainState(epoch=4, bad_epochs=3, done=True), config)
    'nothing to train: the run stopped early after epoch 4 (3 epochs without a better validation perplexity, patience 3): a larger patience continues it'
    """
    if state.done:
        return (f"nothing to train: the run stopped early after epoch {state.epoch} ({state.bad_epochs} epochs without "
                f"a better validation perplexity, patience {config.patience}): a larger patience continues it")
    if state.epoch >= config.epochs:
        return f"nothing to train: the run has done {state.epoch} epochs of {config.epochs}: more epochs continue it"
    if config.max_updates is not None and state.step >= config.max_updates:
        return (f"nothing to train: the run has done {state.step:,} updates, max_updates {config.max_updates:,}: "
                "a larger max_updates continues it")
    return None


def data_fingerprints(V: int, *arrays, words=None) -> tuple[str, str]:
    """Short hashes of the vocabulary size and the token arrays (training targets, validation targets),
    in one pass: (with the vocabulary's words in id order, when known; by the ids alone). A checkpoint
    resumes only on the data it was trained on, not on other words that happen to have the same ids;
    one fingerprinted by ids alone (trained from bare windows, or before the words counted) still does."""
    h = hashlib.sha256(f"V={V}".encode())
    for a in arrays:
        if a is not None:
            a = np.ascontiguousarray(a)
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(a.tobytes())
    ids_only = h.hexdigest()[:20]
    if words is not None:
        h.update(b"|words|" + "\x00".join(words).encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:20], ids_only


def data_fingerprint(V: int, *arrays, words=None) -> str:
    """The first of :func:`data_fingerprints`: what a checkpoint records of its data."""
    return data_fingerprints(V, *arrays, words=words)[0]


def corpus_fingerprints(corpus, n: int) -> tuple[str, str]:
    """The fingerprints a network of order ``n`` trained on ``corpus`` may carry (:func:`data_fingerprints`)."""
    return data_fingerprints(corpus.V, corpus.windows("train", n)[1], corpus.windows("valid", n)[1],
                             words=corpus.vocab.words)


def epoch_copy(path) -> Path:
    """Where the last checkpoint at the end of an epoch (validated) waits while a checkpoint made
    inside the next epoch (unvalidated) holds ``path``: ``checkpoint.epoch.npz`` beside
    ``checkpoint.npz``. A run that diverges falls back on it."""
    path = Path(path)
    return path.with_name(path.stem + ".epoch" + path.suffix)


def keep_aside(path: Path, copy: Path) -> None:
    """``copy`` becomes a second name of ``path``'s file (a hard link; a copy written atomically where
    links are not possible), which the atomic rename of the next write of ``path`` leaves untouched."""
    copy.unlink(missing_ok=True)
    try:
        os.link(path, copy)
    except OSError:
        with open(path, "rb") as src:
            atomic_write(copy, lambda f: shutil.copyfileobj(src, f))


def check_writable(folder) -> Path:
    """Create ``folder`` if needed and prove it is writable now, before any training: one clear line if not."""
    if str(folder) == "":  # Path("") is the current folder: an empty --out is a slip, not a choice
        raise UserError("an empty path names no folder: give the output folder (. for this one)")
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test.")
        try:  # a byte written and flushed to disk: a full disk fails here, not only at the first save
            os.write(fd, b"x")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as e:  # a file where a folder should be says so; anything else, as the system says it
        blocker = next((p for p in [folder, *folder.parents] if p.exists() and not p.is_dir()), None)
        why = f"{blocker} is a file, not a folder" if blocker is not None else e.strerror or str(e)
        raise UserError(f"cannot write to {folder}: {why}") from None
    return folder


def check_space(folder, need: int, what: str) -> None:
    """One clear line, before any training, when ``folder``'s disk has less than ``need`` bytes free."""
    free = shutil.disk_usage(folder).free
    if free < need:
        raise UserError(f"{folder} has {free / 2 ** 20:,.1f} MiB free, and {what} need about "
                        f"{need / 2 ** 20:,.1f} MiB: free some space or choose another folder")


def save_checkpoint(path, params: dict, meta: dict, best: dict | None = None, extra: dict | None = None) -> None:
    """Write ``path`` atomically. ``params``, ``best``: named arrays; ``extra``: more arrays (optimizer state);
    ``meta``: JSON-able. Refuses (TrainingDiverged) when a parameter is not finite: the last good file stays.
    Integer arrays among the parameters (a sampler's counter) are named in the meta's ``integer``
    list: a reader accepts integers there only."""
    path = Path(path)
    if not all(np.all(np.isfinite(p)) for p in params.values()):
        raise TrainingDiverged(f"parameters are no longer finite: {path} not overwritten (the last good "
                               "checkpoint is kept); try a smaller learning rate")
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {f"param/{k}": v for k, v in params.items()}
    arrays.update({f"best/{k}": v for k, v in (best or {}).items()})
    arrays.update(extra or {})
    integer = sorted(k for k, v in params.items() if v.dtype.kind in "iu")
    arrays["meta"] = np.array(json.dumps(dict(meta, format=FORMAT, integer=integer)))
    atomic_write(path, lambda f: np.savez(f, **arrays))


REQUIRED_META = {"kind": str, "model": dict, "train": dict, "state": dict}


def _what_went_wrong(path: Path, error: Exception) -> str:
    """Why a file did not load as a checkpoint, named from its first bytes where they tell."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:  # a folder, no permission ...
        return e.strerror or str(e)
    if not head:
        return "an empty file"
    if head.startswith(b"\x93NUMPY"):
        return "a single numpy array (.npy), not a checkpoint archive"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "a Python pickle, not loaded: it could run code"
    if not head.startswith(b"PK"):
        return "not a zip archive: another kind of file, or a damaged one"
    if "pickle" in str(error).lower():
        return "an archive holding pickled objects, not loaded: they could run code"
    if "zip" in str(error).lower() or "eof" in str(error).lower():
        return "a damaged zip archive, perhaps cut short"
    return str(error)


def check_meta(meta) -> dict:
    """A checkpoint's meta, of this version's format, with its required fields and a readable state;
    ValueError otherwise."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"format is {meta.get('format') if isinstance(meta, dict) else None!r}, "
                         f"not {FORMAT!r} (made by another version: train again)")
    for key, typ in REQUIRED_META.items():
        if not isinstance(meta.get(key), typ):
            raise ValueError(f"meta field {key!r} is missing or not a {typ.__name__}")
    TrainState.from_meta(meta["state"])
    return meta


def check_arrays(files: dict, integer: list) -> None:
    """Parameters are finite floating-point numbers, or integers where the meta's ``integer`` list
    names them (save_checkpoint's promise), and the best ones have the parameters' names and shapes:
    ValueError otherwise."""
    if not isinstance(integer, list) or not all(isinstance(k, str) for k in integer):
        raise ValueError(f"meta field 'integer' is {integer!r}, not a list of names")
    for k, v in files.items():
        if not k.startswith(("param/", "best/")):
            continue
        if k.split("/", 1)[1] in integer:
            if v.dtype.kind not in "iu":
                raise ValueError(f"array {k!r} is not integers ({v.dtype})")
        elif v.dtype.kind != "f" or not np.all(np.isfinite(v)):
            raise ValueError(f"array {k!r} is not finite floating-point numbers ({v.dtype})")
    shapes = {k[6:]: v.shape for k, v in files.items() if k.startswith("param/")}
    best_shapes = {k[5:]: v.shape for k, v in files.items() if k.startswith("best/")}
    if best_shapes and best_shapes != shapes:  # the best parameters are a copy of the parameters
        raise ValueError(f"the best parameters' names and shapes {best_shapes} differ from the parameters' {shapes}")


def load_checkpoint(path) -> tuple[dict, dict, dict | None, dict]:
    """(meta, params, best params or None, extra arrays) from a checkpoint; one clear UserError for
    anything else (a missing file, a truncated zip, pickled objects, a wrong or incomplete meta)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"no checkpoint at {path}")
    try:
        with np.load(path, allow_pickle=False) as z:
            files = {k: z[k] for k in z.files}
        if "meta" not in files:
            raise ValueError("no meta entry")
        meta = check_meta(json.loads(str(files.pop("meta"))))
        check_arrays(files, meta.get("integer", []))
    except Exception as e:  # noqa: BLE001 -- truncated zip, pickled objects, bad JSON, bad meta ...
        raise UserError(f"{path} is not a readable nplm-edu checkpoint ({_what_went_wrong(path, e)})") from None
    params = {k[6:]: v for k, v in files.items() if k.startswith("param/")}
    best = {k[5:]: v for k, v in files.items() if k.startswith("best/")} or None
    extra = {k: v for k, v in files.items() if not k.startswith(("param/", "best/"))}
    return meta, params, best, extra


def set_params(model, params: dict) -> None:
    """Copy ``params`` into the model's arrays in place (keeps fused views fused); UserError on a mismatch."""
    for k, p in model.params.items():
        if k not in params or params[k].shape != p.shape or params[k].dtype.kind != p.dtype.kind:
            raise UserError(f"checkpoint parameter {k} is missing or has the wrong shape or type")
        p[...] = params[k]


def build_from_meta(path, build, config: dict):
    """``build(config)``, the model a checkpoint's configuration describes; one line naming the file
    when it cannot be built (an unknown field, a value of the wrong type, |V| = -3 ...: the model's
    own ``validate``)."""
    try:
        return build(config)
    except (TypeError, ValueError, UserError) as e:
        raise UserError(f"{path} has an unreadable model configuration ({e})") from None


def network_from_checkpoint(path, kinds, what: str, build, best: bool = True):
    """The network a checkpoint holds, when its kind is one of ``kinds`` (``what`` names them for the
    one-line error on another kind): ``build(meta)`` rebuilds it from the checkpoint's description,
    then it takes the best parameters (lowest validation perplexity) when stored and ``best``, else the latest."""
    meta, params, best_params, _ = load_checkpoint(path)
    if meta["kind"] not in kinds:
        raise UserError(f"{path} holds {a_model(meta['kind'])} model, not {what}")
    model = build(meta)
    set_params(model, best_params if best and best_params is not None else params)
    return model


def model_from_checkpoint(path, best: bool = True):
    """A fast NPLM (:class:`~nplm_edu.numerics.fused.FusedNPLM`) with the configuration and parameters of a
    checkpoint: the best ones (lowest validation perplexity) when stored and ``best``, else the latest."""
    from ..models.nplm import NPLMConfig
    from ..numerics.fused import FusedNPLM

    def build(meta):
        tie = meta["train"].get("tie", False)
        if not isinstance(tie, bool):
            raise UserError(f"{path} is not a readable nplm-edu checkpoint (training field 'tie' is {tie!r}, not bool)")
        model = build_from_meta(path, lambda config: FusedNPLM(NPLMConfig(**config)), meta["model"])
        if tie:
            model.tie()
        return model

    return network_from_checkpoint(path, ("nplm",), "an NPLM", build, best)
