"""Beyond the paper: the same network trained with what came later (Adam, dropout), for Table 1.

The network is the paper's (section 2, :class:`~nplm_edu.model.NPLM`, unchanged); only the
training differs. With inverted dropout (Srivastava et al. 2014) on the word features x and on
the hidden output a, one update on a minibatch of K contexts is (the paper's names)::

    x = (C(w_{t-1}), ..., C(w_{t-n+1}))   x~ = x * r_x / (1 - p_x)    r_x ~ Bernoulli(1 - p_x)  (K, (n-1)m)
    o = d + H x~                           a = tanh(o)                                         (K, h)
    a~ = a * r_a / (1 - p_a)                                           r_a ~ Bernoulli(1 - p_a)  (K, h)
    y = b + W x~ + U a~                    p = softmax(y)                                      (K, |V|)

then Adam (Kingma & Ba 2015, Algorithm 1) on the gradient g of the mean NLL, with weight decay
decoupled from the gradient as in AdamW (Loshchilov & Hutter 2019), on C, H, U, W only (never b, d)::

    m <- beta1 m + (1 - beta1) g        v <- beta2 v + (1 - beta2) g^2          t <- t + 1
    p <- p - lr wd p                     (C, H, U, W)
    p <- p - lr_t m / (sqrt(v) + eps sqrt(1 - beta2^t)),   lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t)

(the last line is Algorithm 1's m_hat / (sqrt(v_hat) + eps) with the bias corrections folded into
the step, as section 2 of Kingma & Ba suggests). The learning rate is lr decay^e in epoch e = 0, 1, ...
Dropout is for training only: evaluation (perplexity) uses the plain forward pass, which is the
expectation of the dropped one because the kept units are scaled by 1 / (1 - p).
With p_x = p_a = 0 :func:`loss_and_grads` gives exactly :meth:`~nplm_edu.model.NPLM.loss_and_grads`'s numbers.

:func:`train_modern` also runs the paper's SGD rule (``optimizer="sgd"``) with or without dropout;
``python -m nplm_edu reproduce beyond`` (:mod:`nplm_edu.beyond`) trains the "beyond the paper" row of
Table 1 with it and writes ``data/results/beyond.json``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from .errors import UserError, check_seed
from .model import DECAYED, NPLM, rowwise, segment_sum
from .train import (TrainingDiverged, _Interrupt, _set_params, epoch_order, load_checkpoint, save_checkpoint, sgd_step,
                    training_windows)


@dataclass
class ModernConfig:
    """Adam + dropout hyperparameters (all stated in beyond.json). ``dropout_x``, ``dropout_a``: the
    probability of dropping a unit of x, of a; ``lr_decay``: lr is multiplied by it after every epoch;
    ``tie``: the output vectors U are the word features C (Press & Wolf 2017; needs h = m, no W);
    ``optimizer``: "adam", or "sgd" for the paper's rule (section 4, :func:`nplm_edu.train.sgd_step`:
    weight decay coupled, p -= lr (g + wd p); without dropout the fused :meth:`~nplm_edu.model.NPLM.sgd_update`)."""

    epochs: int = 9
    batch: int = 256
    lr: float = 2e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.1
    dropout_x: float = 0.2
    dropout_a: float = 0.3
    lr_decay: float = 0.6
    patience: int = 2
    tie: bool = False
    optimizer: str = "adam"
    seed: int = 0
    examples_per_epoch: int | None = None
    checkpoint_every_minutes: float = 10.0

    def validate(self) -> None:
        for name in ("epochs", "batch", "patience"):
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("lr", "eps", "lr_decay", "weight_decay", "checkpoint_every_minutes"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0 or (v == 0 and name in ("lr", "lr_decay")):
                raise UserError(f"{name.replace('_', '-')} must be a finite number > 0 (>= 0 for weight decay), "
                                f"got {v}")
        for name in ("beta1", "beta2", "dropout_x", "dropout_a"):
            v = getattr(self, name)
            if not 0 <= v < 1:
                raise UserError(f"{name.replace('_', '-')} must lie in [0, 1), got {v}")
        if self.optimizer not in ("adam", "sgd"):
            raise UserError(f"optimizer must be adam or sgd, got {self.optimizer!r}")
        check_seed(self.seed)
        if self.examples_per_epoch is not None and self.examples_per_epoch < 1:
            raise UserError(f"examples-per-epoch must be at least 1, got {self.examples_per_epoch}")


# these change the trajectory: a resumed run must use the same values
_TRAJECTORY = ("batch", "lr", "beta1", "beta2", "eps", "weight_decay", "dropout_x", "dropout_a", "lr_decay", "tie",
               "optimizer", "seed", "examples_per_epoch")


def dropout_mask(rng: np.random.Generator, shape: tuple, p: float, dtype) -> np.ndarray | None:
    """Inverted dropout: 0 with probability p, else 1 / (1 - p) (so E[mask] = 1); None when p = 0."""
    if p == 0:
        return None
    return (rng.random(shape, dtype=np.float32) >= p).astype(dtype) * np.asarray(1 / (1 - p), dtype)


# --------------------------------------------------------------------------- forward / backward
def forward(model: NPLM, contexts: np.ndarray, mask_x=None, mask_a=None) -> dict:
    """Section 2's forward pass (as ``NPLM._forward`` computes it) with dropout masks on x and a (None:
    no dropout). Caches what :func:`backward` needs; y is in the model's reusable (K, |V|) buffer."""
    P, cfg = model.params, model.config
    K, h = contexts.shape[0], cfg.h
    nm1 = (cfg.n - 1) * cfg.m
    UW = model._output_weights()  # [U W]  (|V|, h + (n-1)m), or U without direct connections
    D = UW.shape[1]
    ids = contexts[:, ::-1]  # (K, n-1) w_{t-1}, ..., w_{t-n+1}
    z = model._buffer("z", (K, h + nm1))  # [a~ x~]  (K, h + (n-1)m)
    x = z[:, h:]  # (K, (n-1)m)
    x[:] = P["C"][ids].reshape(K, nm1)  # x = (C(w_{t-1}), ..., C(w_{t-n+1}))
    if mask_x is not None:
        x *= mask_x  # x~ = x r_x / (1 - p_x)
    a = z[:, :h]  # (K, h)
    np.matmul(x, P["H"].T, out=a)  # o = H x~
    a += P["d"]  # o = d + H x~
    np.tanh(a, out=a)  # a = tanh(o)
    dtanh = 1 - a * a  # (K, h) tanh'(o), before a is dropped
    if mask_a is not None:
        a *= mask_a  # a~ = a r_a / (1 - p_a)
    y = model._buffer("y", (K, cfg.V))  # (K, |V|)
    np.matmul(z[:, :D], UW.T, out=y)  # y = U a~ + W x~
    y += P["b"]  # y = b + W x~ + U a~
    return {"ids": ids, "z": z, "x": x, "dtanh": dtanh, "y": y, "UW": UW, "mask_x": mask_x, "mask_a": mask_a}


def backward(model: NPLM, cache: dict, targets: np.ndarray) -> tuple[float, dict]:
    """Gradients of the mean NLL for every parameter, keyed and shaped like ``params``: the reverse of
    :func:`forward`, line by line, as ``NPLM._backward`` does it (section 2; chapter 5 derives each line)."""
    cfg, P = model.config, model.params
    y, z, x, UW = cache["y"], cache["z"], cache["x"], cache["UW"]
    K, h, D = y.shape[0], cfg.h, cache["UW"].shape[1]
    rows = np.arange(K)
    yt = y[rows, targets].astype(np.float64)  # (K,) target logits
    lse, s = model._log_softmax_rows(y)  # y <- exp(y - max)
    loss = float(np.mean(lse - yt))
    # backward through softmax + NLL: dL/dy = (p - onehot(w_t)) / K
    scale = (1.0 / (s * K)).astype(y.dtype)[:, None]  # (K, 1)

    def block(lo, hi):
        y[lo:hi] *= scale[lo:hi]

    rowwise(block, K, y.size)
    y[rows, targets] -= y.dtype.type(1.0 / K)
    gy = y  # (K, |V|)
    # backward through y = b + [U W] [a~ x~]: dL/d[a~ x~] = dL/dy [U W]
    gzT = model._buffer("gzT", (z.shape[1], K))  # (h + (n-1)m, K)
    np.matmul(UW.T, gy.T, out=gzT[:D])
    if D < z.shape[1]:  # no direct connections
        gzT[D:] = 0
    gz = gzT.T  # (K, h + (n-1)m)
    ga = gz[:, :h]  # dL/da~  (K, h)
    if cache["mask_a"] is not None:
        ga *= cache["mask_a"]  # backward through dropout on a: dL/da = dL/da~ r_a / (1 - p_a)
    go = ga * cache["dtanh"]  # backward through tanh: dL/do = (1 - a^2) dL/da   (K, h)
    gx = gz[:, h:]  # dL/dx~  (K, (n-1)m)
    gx += go @ P["H"]  # backward through o = d + H x~
    g = {}
    gUW = gy.T @ z[:, :D]  # dL/d[U W] = dL/dy^T [a~ x~]   (|V|, h + (n-1)m)
    g["U"] = gUW[:, :h]
    if cfg.direct:
        g["W"] = gUW[:, h:]
    g["b"] = gy.sum(axis=0)  # (|V|,)
    g["H"] = go.T @ x  # dL/dH = dL/do^T x~   (h, (n-1)m)
    g["d"] = go.sum(axis=0)  # (h,)
    if cache["mask_x"] is not None:
        gx *= cache["mask_x"]  # backward through dropout on x: dL/dx = dL/dx~ r_x / (1 - p_x)
    # backward through the look-up: each slot's gradient added to its word's row of C
    words, sums = segment_sum(cache["ids"].ravel(), gx.reshape(-1, cfg.m))
    gC = np.zeros_like(P["C"])
    gC[words] = sums  # (|V|, m)
    g["C"] = gC
    return loss, {k: g[k] for k in P}


def loss_and_grads(model: NPLM, contexts, targets, mask_x=None, mask_a=None) -> tuple[float, dict]:
    """Mean NLL and its gradients with fixed dropout masks (both None: :meth:`~nplm_edu.model.NPLM.loss_and_grads`)."""
    contexts, targets = model._check(contexts, targets)
    return backward(model, forward(model, contexts, mask_x, mask_a), targets)


class MaskedLoss:
    """A model whose ``loss_and_grads`` uses fixed masks: for :func:`nplm_edu.gradcheck.gradcheck`."""

    def __init__(self, model: NPLM, mask_x=None, mask_a=None):
        self.model, self.params, self.mask_x, self.mask_a = model, model.params, mask_x, mask_a

    def loss_and_grads(self, contexts, targets):
        return loss_and_grads(self.model, contexts, targets, self.mask_x, self.mask_a)


def tie(model: NPLM) -> None:
    """Make U the same array as C (y = b + C a~: the output vector of word i is its feature vector)."""
    cfg = model.config
    if cfg.direct or cfg.h != cfg.m:
        raise UserError(f"tied embeddings need h = m and no direct connections, got h={cfg.h}, m={cfg.m}, "
                        f"direct={cfg.direct}")
    model.params["U"] = model.params["C"]


def tied_grads(grads: dict) -> dict:
    """The gradient of the shared array: dL/dC (input side) + dL/dU (output side); no "U" key."""
    grads["C"] += grads.pop("U")
    return grads


# --------------------------------------------------------------------------- Adam
class Adam:
    """Adam with decoupled weight decay (see the module docstring); moments ``m``, ``v`` per parameter.

    The first step moves every parameter by about lr against the sign of its gradient:

    >>> p = {"b": np.array([1.0])}
    >>> Adam(p).step(p, {"b": np.array([0.5])}, lr=0.1)
    >>> round(float(p["b"][0]), 6)
    0.9
    """

    def __init__(self, params: dict, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
        self.beta1, self.beta2, self.eps, self.weight_decay = beta1, beta2, eps, weight_decay
        self.t = 0
        self.m = {k: np.zeros_like(p) for k, p in params.items()}
        self.v = {k: np.zeros_like(p) for k, p in params.items()}
        self._tmp = {k: np.empty_like(p) for k, p in params.items()}

    def step(self, params: dict, grads: dict, lr: float) -> None:
        """One update of every parameter in place (grads may be overwritten)."""
        self.t += 1
        b1, b2, t = self.beta1, self.beta2, self.t
        c2 = math.sqrt(1 - b2 ** t)
        lr_t = lr * c2 / (1 - b1 ** t)  # bias corrections folded into the step
        for k, g in grads.items():
            p, m, v, tmp = params[k], self.m[k], self.v[k], self._tmp[k]
            m *= b1
            np.multiply(g, 1 - b1, out=tmp)
            m += tmp  # m = beta1 m + (1 - beta1) g
            v *= b2
            np.multiply(g, g, out=tmp)
            tmp *= 1 - b2
            v += tmp  # v = beta2 v + (1 - beta2) g^2
            if k in DECAYED and self.weight_decay:
                p *= 1 - lr * self.weight_decay  # decoupled weight decay, never on b, d
            np.sqrt(v, out=tmp)
            tmp += self.eps * c2
            np.divide(m, tmp, out=tmp)
            tmp *= lr_t
            p -= tmp  # p -= lr_t m / (sqrt(v) + eps sqrt(1 - beta2^t))

    def arrays(self) -> dict:
        return {**{f"adam_m/{k}": v for k, v in self.m.items()}, **{f"adam_v/{k}": v for k, v in self.v.items()}}

    def load(self, arrays: dict, t: int) -> None:
        for k in self.m:
            self.m[k][...] = arrays[f"adam_m/{k}"]
            self.v[k][...] = arrays[f"adam_v/{k}"]
        self.t = t


def epoch_lr(config: ModernConfig, epoch: int) -> float:
    """lr decay^epoch (epoch = 0 first)."""
    return config.lr * config.lr_decay ** epoch


# --------------------------------------------------------------------------- training loop
def train_modern(model: NPLM, corpus_or_windows, config: ModernConfig, out_dir=None, resume: bool = False,
                 quiet: bool = False, on_epoch=None) -> dict:
    """Adam + dropout with validation after every epoch and early stopping keeping the best parameters
    (as :func:`nplm_edu.train.train` does for the paper's SGD, section 4),
    checkpoints (``out_dir/checkpoint.npz``: every epoch, every ``checkpoint_every_minutes``, on Ctrl-C;
    :func:`nplm_edu.train.save_checkpoint`'s format with the Adam moments as extra arrays) and resume.
    ``on_epoch(history)`` runs after every epoch. Returns the history (``epochs``: train/valid ppl, lr,
    seconds per epoch)."""
    from tqdm.auto import tqdm

    tr_ctx, tr_tgt, valid, per_epoch = training_windows(corpus_or_windows, model, config)
    N = len(tr_tgt)
    ckpt = Path(out_dir) / "checkpoint.npz" if out_dir is not None else None
    order_rng = np.random.default_rng(config.seed)  # one permutation per epoch (train.epoch_order)
    drop_rng = np.random.default_rng([config.seed, 1])  # the dropout masks
    if config.tie:
        tie(model)
    trained = {k: p for k, p in model.params.items() if not (config.tie and k == "U")}  # U is C when tied
    adam = Adam(trained, config.beta1, config.beta2, config.eps, config.weight_decay)
    state = {"train": asdict(config), "step": 0, "epoch": 0, "batch_in_epoch": 0,
             "rng_state": order_rng.bit_generator.state, "drop_state": drop_rng.bit_generator.state,
             "loss_sum": 0.0, "loss_count": 0, "best_valid": None, "bad_epochs": 0, "history": [],
             "epoch_seconds": 0.0, "done": False}
    best = None
    if resume and ckpt is not None and ckpt.exists():
        meta, params, best = load_checkpoint(ckpt)
        if meta["model"] != asdict(model.config):
            raise UserError(f"checkpoint model {meta['model']} differs from this model {asdict(model.config)}")
        for k in _TRAJECTORY:
            if meta["train"].get(k) != getattr(config, k):
                raise UserError(f"cannot resume with {k}={getattr(config, k)}: the checkpoint used "
                                f"{meta['train'].get(k)}")
        _set_params(model, params)
        if config.optimizer == "adam":
            adam.load(params, meta["step"])
        state.update({k: meta[k] for k in state if k in meta})
        state["train"] = asdict(config)
        drop_rng.bit_generator.state = state["drop_state"]

    def checkpoint():
        if ckpt is not None:
            state["drop_state"] = drop_rng.bit_generator.state
            moments = adam.arrays() if config.optimizer == "adam" else {}
            save_checkpoint(ckpt, SimpleNamespace(params={**model.params, **moments}, config=model.config), state, best)

    K, h, nm1 = config.batch, model.config.h, (model.config.n - 1) * model.config.m
    dt = np.dtype(model.config.dtype)
    n_batches = -(-per_epoch // K)
    last_save = time.monotonic()
    with _Interrupt() as stop:
        while state["epoch"] < config.epochs and not state["done"]:
            order_rng.bit_generator.state = state["rng_state"]
            order = epoch_order(N, order_rng)[:per_epoch]
            lr = epoch_lr(config, state["epoch"])
            t_epoch = time.monotonic() - state["epoch_seconds"]
            bar = tqdm(total=per_epoch, initial=min(state["batch_in_epoch"] * K, per_epoch), unit="ex",
                       desc=f"epoch {state['epoch'] + 1}/{config.epochs}", disable=quiet, leave=False)
            for j in range(state["batch_in_epoch"], n_batches):
                idx = order[j * K:(j + 1) * K]
                mx = dropout_mask(drop_rng, (len(idx), nm1), config.dropout_x, dt)
                ma = dropout_mask(drop_rng, (len(idx), h), config.dropout_a, dt)
                if config.optimizer == "sgd" and mx is None and ma is None and not config.tie:
                    loss = model.sgd_update(tr_ctx[idx], tr_tgt[idx], lr, config.weight_decay)  # fused, same rule
                else:
                    loss, grads = loss_and_grads(model, tr_ctx[idx], tr_tgt[idx], mx, ma)
                    if config.tie:
                        grads = tied_grads(grads)
                    if config.optimizer == "sgd":
                        sgd_step(trained, grads, lr, config.weight_decay)
                    else:
                        adam.step(model.params, grads, lr)
                if not math.isfinite(loss):
                    bar.close()
                    raise TrainingDiverged(f"the training loss became {loss} at update {state['step']}; "
                                           "try a smaller learning rate")
                state["step"] += 1
                state["batch_in_epoch"] = j + 1
                state["loss_sum"] += loss * len(idx)
                state["loss_count"] += len(idx)
                bar.update(len(idx))
                if not quiet and j % 20 == 0:
                    bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
                if stop.flag or time.monotonic() - last_save > 60 * config.checkpoint_every_minutes:
                    state["epoch_seconds"] = time.monotonic() - t_epoch
                    checkpoint()
                    last_save = time.monotonic()
                    if stop.flag:
                        bar.close()
                        raise KeyboardInterrupt
            bar.close()
            # ---- end of epoch: validation (dropout off), early stopping, checkpoint
            entry = {"epoch": state["epoch"] + 1, "updates": state["step"], "lr": lr,
                     "train_ppl": math.exp(state["loss_sum"] / max(state["loss_count"], 1))}  # with dropout on
            if valid is not None:
                entry["valid_ppl"] = model.perplexity(*valid, batch=1024)
                if not math.isfinite(entry["valid_ppl"]):
                    raise TrainingDiverged(f"validation perplexity became {entry['valid_ppl']}")
                if state["best_valid"] is None or entry["valid_ppl"] < state["best_valid"]:
                    state["best_valid"], state["bad_epochs"] = entry["valid_ppl"], 0
                    best = {k: v.copy() for k, v in model.params.items()}
                else:
                    state["bad_epochs"] += 1
                    state["done"] = state["bad_epochs"] >= config.patience
            entry["seconds"] = time.monotonic() - t_epoch
            state["history"].append(entry)
            if not quiet:
                v = f"  valid ppl {entry['valid_ppl']:8.2f}" if "valid_ppl" in entry else ""
                on = " (dropout on)" if config.dropout_x or config.dropout_a else ""
                print(f"epoch {entry['epoch']:3d}  train ppl{on} {entry['train_ppl']:8.2f}{v}  "
                      f"lr {lr:.3g}  {entry['seconds']:.1f} s", flush=True)
            state.update(epoch=state["epoch"] + 1, batch_in_epoch=0, loss_sum=0.0, loss_count=0, epoch_seconds=0.0,
                         rng_state=order_rng.bit_generator.state)
            checkpoint()
            last_save = time.monotonic()
            if on_epoch is not None:
                on_epoch({"epochs": state["history"]})
    if best is not None:
        _set_params(model, best)  # early stopping: keep the best parameters
    return {"epochs": state["history"], "best_valid_ppl": state["best_valid"], "updates": state["step"],
            "stopped_early": bool(state["done"])}
