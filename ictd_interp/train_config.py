"""Pretraining configuration and its presets (SAELens style: one validated dataclass)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from ictd_interp.config import ICTDConfig, check_choice, from_dict_strict
from ictd_interp.features import FEATURE_KINDS
from ictd_interp.objectives import OBJECTIVES

OPTIMIZERS = ("adam", "adamw", "sgd")
DEVICES = ("cpu", "cuda")


@dataclass
class TrainConfig:
    """Multi-task pretraining on randomized Boyan chains (SPEC §6).

    Args:
        objective: ``td`` (semi-gradient TD), ``neu`` (norm of expected update), ``mc`` or ``supervised``.
        d_features, n_layers, form, attention, tied, mask, init_scale, dtype: the model (see ``ICTDConfig``).
        n_states: states per Boyan chain.
        context_len: ``n``, transitions in each prompt.
        gamma: discount of the tasks, the objective and the model's temporal shift.
        feature_kind, feature_scale: random features per task (``uniform`` or ``onehot``) and their scale.
        tasks_per_batch: ``B``, fresh tasks per step.
        windows_per_task: ``W``, TD windows per task (``W + 1`` prompts share one forward pass).
        steps, lr, weight_decay, optimizer: optimisation.
        mc_horizon: truncation of the Monte-Carlo return (``mc`` objective).
        train_depths: tied models only: ``LO:HI`` draws each step's depth uniformly from LO..HI (the same
            layer run LO to HI times; empty: always ``n_layers``), to test whether depth-varied training
            gives a layer that converges when iterated.
        seed: seeds the initial weights and the training data.
        eval_seed: seeds the fixed evaluation tasks, apart from training so curves compare across runs.
        n_eval_tasks: evaluation tasks.
        eval_every, checkpoint_every: logging and checkpoint intervals in steps.
        device: ``cpu`` or ``cuda``.
    """

    objective: str = "td"
    d_features: int = 4
    n_layers: int = 3
    form: str = "tsm"
    attention: str = "softmax"
    tied: bool = False
    mask: str = "paper"
    init_scale: float = 0.01
    dtype: str = "float32"
    n_states: int = 10
    context_len: int = 30
    gamma: float = 0.9
    feature_kind: str = "uniform"
    feature_scale: float = 1.0
    tasks_per_batch: int = 64
    windows_per_task: int = 16
    steps: int = 4000
    lr: float = 1e-3
    weight_decay: float = 1e-6
    optimizer: str = "adam"
    mc_horizon: int = 40
    train_depths: str = ""
    seed: int = 0
    eval_seed: int = 20260529
    n_eval_tasks: int = 256
    eval_every: int = 250
    checkpoint_every: int = 1000
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_choice("objective", self.objective, OBJECTIVES)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("feature_kind", self.feature_kind, FEATURE_KINDS)
        check_choice("device", self.device, DEVICES)
        for name in ("n_states", "context_len", "tasks_per_batch", "windows_per_task", "n_eval_tasks",
                     "eval_every", "checkpoint_every"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name}: must be a positive integer, got {getattr(self, name)!r}")
        if not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"steps: must be a non-negative integer, got {self.steps!r}")
        if not self.lr > 0 or not self.weight_decay >= 0:
            raise ValueError(f"lr must be > 0 and weight_decay >= 0, got lr={self.lr}, weight_decay={self.weight_decay}")
        if self.n_states < 2:
            raise ValueError(f"n_states: a Boyan chain needs at least 2 states, got {self.n_states}")
        if self.feature_kind == "onehot" and self.d_features < self.n_states:
            raise ValueError(f"d_features: one-hot features need d_features >= n_states ({self.d_features} < {self.n_states})")
        if self.objective == "mc" and self.mc_horizon < 1:
            raise ValueError(f"mc_horizon: the mc objective needs a horizon >= 1, got {self.mc_horizon}")
        if self.train_depths:
            self.depth_range  # noqa: B018 (parsing validates)
            if not self.tied or self.mask != "paper":
                raise ValueError("train_depths: needs tied weights and the paper mask (one layer run at any depth)")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device: 'cuda' requested but torch sees no CUDA device; use --device cpu")
        _ = self.model  # building it validates the architecture fields

    @property
    def depth_range(self) -> tuple[int, int] | None:
        """``(lo, hi)`` parsed from ``train_depths``, or None."""
        if not self.train_depths:
            return None
        try:
            lo, hi = (int(part) for part in self.train_depths.split(":"))
        except ValueError:
            raise ValueError(f"train_depths: expected LO:HI such as '1:6', got {self.train_depths!r}") from None
        if not 1 <= lo <= hi:
            raise ValueError(f"train_depths: need 1 <= LO <= HI, got {self.train_depths!r}")
        return lo, hi

    @property
    def model(self) -> ICTDConfig:
        return ICTDConfig(d_features=self.d_features, n_layers=self.n_layers, gamma=self.gamma, form=self.form,
                          attention=self.attention, tied=self.tied, mask=self.mask, init_scale=self.init_scale,
                          dtype=self.dtype, seed=self.seed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        return from_dict_strict(cls, data)

    def differences(self, other: "TrainConfig") -> list[str]:
        """``field: mine -> other`` for every field that differs (empty when equal)."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [f"{k}: {mine[k]!r} -> {theirs[k]!r}" for k in mine if mine[k] != theirs[k]]

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> "TrainConfig":
        if name not in PRESETS:
            raise ValueError(f"preset: unknown preset {name!r}; choose from {sorted(PRESETS)}")
        return replace(PRESETS[name], **overrides)


PRESETS: dict[str, TrainConfig] = {
    # README main command: tied weights reach theta*'s signature within minutes on 2 CPU cores.
    "quick": TrainConfig(tied=True, steps=3000, lr=3e-3, eval_every=250, checkpoint_every=1000, n_eval_tasks=256),
    # The predecessor's scale with per-layer weights and a long run.
    "paper": TrainConfig(tied=False, steps=30000, eval_every=1000, checkpoint_every=5000),
    # One layer's weights shared across depth, as the predecessor's default mode, run long.
    "tied": TrainConfig(tied=True, steps=20000, eval_every=1000, checkpoint_every=5000),
}
