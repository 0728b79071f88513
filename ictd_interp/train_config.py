"""Pretraining configuration and its presets (SAELens style: one validated dataclass)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from ictd_interp.config import ARCHITECTURES, OBJECTIVE_NAMES, ICTDConfig, check_choice, from_dict_strict
from ictd_interp.standard_config import StandardConfig
from ictd_interp.task_distribution import TaskDistribution

OPTIMIZERS = ("adam", "adamw", "sgd")
DEVICES = ("cpu", "cuda")


@dataclass
class TrainConfig:
    """Multi-task pretraining on a family of MRPs (randomized Boyan chains by default; docs/theory.md §6).

    Args:
        architecture: stylised (the paper's model: the residual stream is the prompt, theta* is a point of it) or standard (a pre-LN transformer with MLPs, nothing pinned).
        objective: loss: td (semi-gradient TD), neu (norm of the expected update), mc (Monte-Carlo return) or supervised (true v_pi).
        d_features: feature dimension d; the residual stream has d + 3 rows.
        n_layers: depth L of the model (one layer is one TD step under theta*).
        form: tsm (one head and the parameter-free temporal shift) or dual (two heads, the second shifted).
        attention: softmax (this paper) or linear (the predecessor's model).
        tied: share one layer's weights across depth.
        mask: paper (A free in its feature block, V in the row each head writes) or full (every entry free).
        init_scale: standard deviation of the random initial weights.
        d_model: standard architecture: residual stream width.
        n_heads: standard architecture: attention heads per layer.
        d_mlp: standard architecture: MLP hidden width (0: attention-only).
        layer_norm: standard architecture: pre-LN blocks and a final LayerNorm.
        pos_embed: standard architecture: learned positional embeddings.
        dtype: float32 or float64.
        family: the MRPs trained on: boyan, loop, random, random-sparse or gym:ENV_ID (e.g. gym:FrozenLake-v1).
        n_states: states per MRP (a Gymnasium environment sets its own).
        context_len: n, transitions in each prompt.
        gamma: discount of the tasks, the objective and the temporal shift.
        feature_kind: uniform (U(-1, 1) per entry) or onehot (needs d_features >= n_states).
        feature_scale: feature scale, the softmax kernel's inverse temperature.
        terminal: Gymnasium families: terminal transitions restart (ergodic) or are absorbing.
        tasks_per_batch: B, fresh tasks per step.
        windows_per_task: W, TD windows per task (W + 1 prompts share one forward pass).
        steps: optimiser steps.
        lr: learning rate.
        weight_decay: weight decay of the optimiser.
        optimizer: adam, adamw or sgd.
        mc_horizon: truncation of the Monte-Carlo return (mc objective).
        train_depths: tied models: LO:HI draws each step's depth from LO..HI (empty: always n_layers).
        seed: seeds the initial weights and the training data.
        eval_seed: seeds the fixed evaluation tasks (apart from training, so curves compare across runs).
        n_eval_tasks: evaluation tasks.
        eval_every: steps between evaluations (metrics.jsonl).
        checkpoint_every: steps between checkpoints (resume points).
        device: cpu or cuda.
    """

    architecture: str = "stylised"
    objective: str = "td"
    d_features: int = 4
    n_layers: int = 3
    form: str = "tsm"
    attention: str = "softmax"
    tied: bool = False
    mask: str = "paper"
    init_scale: float = 0.01
    d_model: int = 32
    n_heads: int = 2
    d_mlp: int = 64
    layer_norm: bool = True
    pos_embed: bool = False
    dtype: str = "float32"
    family: str = "boyan"
    n_states: int = 10
    context_len: int = 30
    gamma: float = 0.9
    feature_kind: str = "uniform"
    feature_scale: float = 1.0
    terminal: str = "restart"
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
        check_choice("architecture", self.architecture, ARCHITECTURES)
        self._check_architecture_fields()
        check_choice("objective", self.objective, OBJECTIVE_NAMES)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("device", self.device, DEVICES)
        for name in ("tasks_per_batch", "windows_per_task", "n_eval_tasks",
                     "eval_every", "checkpoint_every"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name}: must be a positive integer, got {getattr(self, name)!r}")
        if not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"steps: must be a non-negative integer, got {self.steps!r}")
        if not self.lr > 0 or not self.weight_decay >= 0:
            raise ValueError(f"lr must be > 0 and weight_decay >= 0, got lr={self.lr}, weight_decay={self.weight_decay}")
        _ = self.tasks  # building it validates the task settings (family, sizes, features)
        if self.objective == "mc" and self.mc_horizon < 1:
            raise ValueError(f"mc_horizon: the mc objective needs a horizon >= 1, got {self.mc_horizon}")
        if self.train_depths:
            self.depth_range  # noqa: B018 (parsing validates)
            if not self.tied or self.mask != "paper":
                raise ValueError("train_depths: needs tied weights (and, for the stylised model, the paper mask): "
                                 "one layer run at any depth")
        if self.device == "cuda" and not _cuda_available():
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

    def _check_architecture_fields(self) -> None:
        """A setting of the other architecture is an error, never silently ignored."""
        others = STANDARD_ONLY if self.architecture == "stylised" else STYLISED_ONLY
        changed = [name for name in others if getattr(self, name) != getattr(TrainConfig, name)]
        if changed:
            raise ValueError(f"{', '.join(changed)}: not a setting of the {self.architecture} architecture "
                             f"(leave at the default, or choose --architecture "
                             f"{'standard' if self.architecture == 'stylised' else 'stylised'})")

    @property
    def model(self) -> ICTDConfig | StandardConfig:
        """The model's config, of the chosen architecture."""
        if self.architecture == "standard":
            return StandardConfig(d_features=self.d_features, d_model=self.d_model, n_heads=self.n_heads,
                                  n_layers=self.n_layers, d_mlp=self.d_mlp, layer_norm=self.layer_norm,
                                  pos_embed=self.pos_embed, n_ctx=self.context_len + 1, gamma=self.gamma,
                                  tied=self.tied, init_range=self.init_scale, dtype=self.dtype, seed=self.seed)
        return ICTDConfig(d_features=self.d_features, n_layers=self.n_layers, gamma=self.gamma, form=self.form,
                          attention=self.attention, tied=self.tied, mask=self.mask, init_scale=self.init_scale,
                          dtype=self.dtype, seed=self.seed)

    @property
    def tasks(self) -> TaskDistribution:
        """The task distribution trained and evaluated on."""
        return TaskDistribution(family=self.family, n_states=self.n_states, d_features=self.d_features,
                                context_len=self.context_len, gamma=self.gamma, feature_kind=self.feature_kind,
                                feature_scale=self.feature_scale, terminal=self.terminal)

    @classmethod
    def for_model(cls, cfg: ICTDConfig | StandardConfig, **task: Any) -> "TrainConfig":
        """The training config a model config implies (a bare checkpoint's), with ``task`` settings;
        the inverse of ``model`` on the architecture fields."""
        shared = dict(d_features=cfg.d_features, n_layers=cfg.n_layers, gamma=cfg.gamma, tied=cfg.tied,
                      dtype=cfg.dtype, seed=cfg.seed)
        if cfg.architecture == "standard":
            arch = dict(architecture="standard", d_model=cfg.d_model, n_heads=cfg.n_heads, d_mlp=cfg.d_mlp,
                        layer_norm=cfg.layer_norm, pos_embed=cfg.pos_embed, init_scale=cfg.init_range)
        else:
            arch = dict(form=cfg.form, attention=cfg.attention, mask=cfg.mask, init_scale=cfg.init_scale)
        return cls(**shared, **arch, **task)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def applicable_dict(self) -> dict[str, Any]:
        """``to_dict`` without the other architecture's fields (what a report records; ``from_dict``
        restores their defaults)."""
        others = STANDARD_ONLY if self.architecture == "stylised" else STYLISED_ONLY
        return {k: v for k, v in self.to_dict().items() if k not in others}

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


STANDARD_ONLY = ("d_model", "n_heads", "d_mlp", "layer_norm", "pos_embed")
STYLISED_ONLY = ("form", "attention", "mask")


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


PRESETS: dict[str, TrainConfig] = {
    # README main command: tied weights reach theta*'s signature within minutes on 2 CPU cores.
    "quick": TrainConfig(tied=True, steps=3000, lr=3e-3, eval_every=250, checkpoint_every=1000, n_eval_tasks=256),
    # The predecessor's scale with per-layer weights and a long run.
    "paper": TrainConfig(tied=False, steps=30000, eval_every=1000, checkpoint_every=5000),
    # One layer's weights shared across depth, as the predecessor's default mode, run long.
    "tied": TrainConfig(tied=True, steps=20000, eval_every=1000, checkpoint_every=5000),
    # The standard architecture (docs/theory.md §10): minutes on 2 CPU cores, and a longer run.
    "standard-quick": TrainConfig(architecture="standard", steps=3000, lr=1e-3, init_scale=0.1, tasks_per_batch=16,
                                  eval_every=250, checkpoint_every=1000),
    "standard": TrainConfig(architecture="standard", steps=20000, lr=1e-3, init_scale=0.1, eval_every=1000,
                            checkpoint_every=5000),
}
