"""Every training choice in one dataclass: the rule, the schedule, regularisation, early stopping,
checkpoints (section 4 of the paper on Brown: K = 1, lr 1e-3, r = 1e-8, weight decay 1e-4)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UserError, check_field_types, check_seed
from ..models.nplm import PARAM_NAMES

OPTIMIZERS = ("sgd", "adam")  # the paper's SGD rule; Adam (Kingma and Ba 2015)


@dataclass
class TrainConfig:
    """Every training choice (section 4; the paper on Brown: K = 1, lr 1e-3, r = 1e-8, weight decay 1e-4).

    ``optimizer``: "sgd" (the paper's rule) or "adam"; ``lr_decay``: lr multiplied by it after every
    epoch; ``dropout_x``, ``dropout_a``: inverted-dropout probabilities on x and a; ``tie``: U = C.
    ``examples_per_epoch`` limits each epoch to the first examples of its shuffled order;
    ``max_updates`` stops the run after that many updates (None: no limit).
    ``frozen``: comma-separated parameters never updated (e.g. "C": the word features stay as they
    were initialised or loaded, the paper's fixed-feature comparison of section 1.2); serial only.
    ``threads``: the threads one process computes on (the output layer split among them, section
    3.2's output blocks); None: the cores this process may use. The same seed and thread count give
    the same numbers."""

    epochs: int = 20
    batch: int = 128
    lr: float = 0.1
    decay_rate: float = 1e-8
    lr_decay: float = 1.0
    weight_decay: float = 1e-4
    optimizer: str = "sgd"
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    dropout_x: float = 0.0
    dropout_a: float = 0.0
    tie: bool = False
    seed: int = 0
    patience: int = 3
    checkpoint_every_minutes: float = 10.0
    examples_per_epoch: int | None = None
    max_updates: int | None = None
    frozen: str = ""
    threads: int | None = None

    def frozen_names(self) -> tuple[str, ...]:
        """The parameters ``frozen`` names, as a tuple ("C, H" -> ("C", "H"))."""
        return tuple(x.strip() for x in self.frozen.split(",") if x.strip())

    def validate(self) -> None:
        check_field_types(self)  # a checkpoint written now must read back (1e4 is no count of updates)
        for name in ("epochs", "batch", "patience"):
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be at least 1, got {getattr(self, name)}", setting=name)
        for name in ("lr", "decay_rate", "weight_decay", "checkpoint_every_minutes", "eps", "lr_decay"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise UserError(f"{name} must be a finite number >= 0, got {v}", setting=name)
        for name in ("lr", "lr_decay"):
            if getattr(self, name) == 0:
                raise UserError(f"{name} must be positive, got 0", setting=name)
        for name in ("beta1", "beta2", "dropout_x", "dropout_a"):
            v = getattr(self, name)
            if not 0 <= v < 1:
                raise UserError(f"{name} must lie in [0, 1), got {v}", setting=name)
        if self.optimizer not in OPTIMIZERS:
            raise UserError(f"optimizer must be {' or '.join(OPTIMIZERS)}, got {self.optimizer!r}", setting="optimizer")
        check_seed(self.seed)
        for name in ("examples_per_epoch", "max_updates", "threads"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise UserError(f"{name} must be at least 1, got {v}", setting=name)
        bad = [x for x in self.frozen_names() if x not in PARAM_NAMES]
        if bad:
            raise UserError(f"frozen: unknown parameter {bad[0]!r}: use names among {', '.join(PARAM_NAMES)}",
                            setting="frozen")
        if self.tie and "C" in self.frozen_names():
            raise UserError("frozen C with tied embeddings (tie) would freeze U too: untie them or train C", setting="frozen")


# these change the trajectory: a resumed run must use the same values
TRAJECTORY = ("batch", "lr", "decay_rate", "lr_decay", "weight_decay", "optimizer", "beta1", "beta2", "eps",
              "dropout_x", "dropout_a", "tie", "seed", "examples_per_epoch")
