"""Pretraining configuration and its presets (SAELens style): the model's config and the task
distribution nested in one validated dataclass, each setting declared once, where it belongs.

On the command line every nested field is a flat flag (``--d-model``, ``--context-len``); ``flat_fields``
lists them and ``TrainConfig.with_flat`` routes a flat setting to the config that holds it. Files written
before the nesting (flat ``config.json`` of run folders, shipped ``card.json``) are read through
``TrainConfig.from_dict``, which migrates them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Union, get_args

from ictd_interp.config.fields import (
    DEVICES,
    FORWARDS,
    LR_SCHEDULES,
    OPTIMIZER_KERNELS,
    OPTIMIZERS,
    SAMPLERS,
    check_bool,
    check_choice,
    check_positive_int,
    from_dict_strict,
)
from ictd_interp.config.linear import LinearICTDConfig
from ictd_interp.config.registry import FAMILIES, OBJECTIVES
from ictd_interp.config.standard import StandardConfig
from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.config.tasks import TaskDistribution

# The architecture registry, the one list (a new architecture is one entry here): each model config is the record
# of its architecture (its ``architecture`` name, ``description``, ``quick_preset``, ``model_module`` and
# ``original_architecture``: where its model class lives, and ``holds_theta_star``); every other list of
# architectures, the model classes and the CLI's choices derive from it.
ModelConfig = Union[ICTDConfig, StandardConfig, LinearICTDConfig]
MODEL_CONFIGS: dict[str, type] = {cls.architecture: cls for cls in get_args(ModelConfig)}
ARCHITECTURES = tuple(MODEL_CONFIGS)
SHARED = ("d_features", "gamma")  # held by the model and the tasks: a flat setting sets both, they must agree


@dataclass
class TrainConfig:
    """Multi-task pretraining on a family of MRPs (randomized Boyan chains by default; docs/theory.md §6).

    Args:
        model: the model's config: ICTDConfig (stylised: the residual stream is the prompt, theta* is a point of it),
            StandardConfig (a pre-LN transformer with MLPs) or LinearICTDConfig (the predecessor's linear model).
        tasks: the task distribution trained and evaluated on.
        objective: the loss: <objectives>.
        tasks_per_batch: B, fresh tasks per step.
        windows_per_task: W, TD windows per task (W + 1 prompts share one forward pass).
        steps: optimiser steps.
        lr: learning rate.
        weight_decay: weight decay of the optimiser.
        optimizer: adam, adamw or sgd.
        optimizer_kernel: how the update runs: fused (one kernel per parameter; needs torch >= 2.4 on a CPU) or
            foreach (one multi-tensor kernel per update term, bit for bit torch's per-tensor loop: the numerics of runs
            and models saved before this field, which load as foreach). The two differ by float rounding (a few ulp per
            step); fused is the faster on the stylised models' tiny parameters (docs/performance.md).
        mc_horizon: truncation of the Monte-Carlo return (mc objective).
        train_depths: tied models: LO:HI draws each step's depth from LO..HI (empty: always n_layers).
        loss_depths: tied models: D1,D2,... averages the loss over the predictions at these depths, each step
            (empty: the loss at n_layers alone); a model trained so is judged at n_layers, so let it be the deepest.
        spectral_penalty: tied models trained through the state-space forward: adds this times the mean spectral
            radius of the moving part of the layer's map of the values (on each task's first window) to the loss,
            so the layer contracts faster and its depth leaves less of the way to its limit (0: off;
            docs/theory.md §6).
        forward: positional (the prompt through the layers) or state-space (the exact state-space forward of the
            stylised paper-mask TSM softmax model: the same function, whose cost does not grow with the context
            length, so long contexts and deep models train in minutes; docs/theory.md §6).
        lr_schedule: constant, or cosine (decays to 0 at the last step).
        warmup_steps: the learning rate rises linearly from 0 over these first steps (0: none).
        grad_clip: the gradient's norm is clipped to this (0: not clipped).
        task_pool: task diversity: the number of distinct tasks (an MRP and its features) pretraining sees, each
            step's tasks picked uniformly from this pool with fresh trajectories (0: a fresh task every time,
            unlimited). Any family; the pool is seeded by ``seed``, apart from the evaluation tasks.
        shuffle_rewards: a null for what pretraining learns: each training trajectory's rewards are permuted in time
            before its windows are cut, so a reward says nothing about the state it was received in (the TD
            objective, any family; evaluation is on ordinary tasks).
        seed: seeds the training data (the flag --seed also seeds the model's initial weights).
        eval_seed: seeds the fixed evaluation tasks (apart from training, so curves compare across runs).
        n_eval_tasks: evaluation tasks.
        eval_every: steps between evaluations (metrics.jsonl).
        checkpoint_every: steps between checkpoints (resume points).
        device: cpu or cuda.
        sampler: where the training batches are drawn. host: from the run's generator on the CPU, copied to the
            device each step. device: counter-based draws (``ictd_interp.tasks.counter``) made on the run's
            device, one call for a whole stack of runs; a family with split draws (Boyan chains); other numbers
            than host's, the same on every device and in any stack.
        compile: torch.compile the model's hook-free training path (inductor: compiled once per depth, 20-60 s on
            a CPU and a C++ compiler needed; float rounding differs from eager's). Faster or slower depending on the
            CPU and the model (measured: docs/performance.md); measure with benchmarks/train_throughput.py
            --compile (docs/theory.md §4).
    """

    model: ModelConfig = field(default_factory=lambda: ICTDConfig(d_features=4))
    tasks: TaskDistribution = field(default_factory=TaskDistribution)
    objective: str = "td"
    tasks_per_batch: int = 64
    windows_per_task: int = 16
    steps: int = 4000
    lr: float = 1e-3
    weight_decay: float = 1e-6
    optimizer: str = "adam"
    optimizer_kernel: str = "fused"
    mc_horizon: int = 40
    train_depths: str = ""
    loss_depths: str = ""
    forward: str = "positional"
    spectral_penalty: float = 0.0
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    grad_clip: float = 0.0
    task_pool: int = 0
    shuffle_rewards: bool = False
    seed: int = 0
    eval_seed: int = 20260529
    n_eval_tasks: int = 256
    eval_every: int = 250
    checkpoint_every: int = 1000
    device: str = "cpu"
    sampler: str = "host"
    compile: bool = False

    def __post_init__(self) -> None:
        """Every check, in this order: the parts and what they share, the choices and numbers, the objective
        against the tasks, the task options, the depths, the positions the model covers (the first problem found
        is the error)."""
        self._check_parts()
        self._check_numbers()
        self._check_objective()
        self._check_task_options()
        self._check_depths()
        self._check_forward()
        self._check_spectral_penalty()
        self._check_sampler()
        self.model.check_positions(self.tasks.context_len + 1)

    def _check_depths(self) -> None:
        """Depths other than n_layers need one tied layer run at any depth; sampled and averaged depths exclude
        each other."""
        for name in ("train_depths", "loss_depths"):
            if getattr(self, name):
                self.depth_range if name == "train_depths" else self.depth_list  # noqa: B018 (parsing validates)
                if not self.model.tied or getattr(self.model, "mask", "paper") != "paper":
                    raise ValueError(
                        f"{name}: needs tied weights (and, for the stylised model, the paper mask): "
                        "one layer run at any depth"
                    )
        if self.train_depths and self.loss_depths:
            raise ValueError("loss_depths: one of train_depths (sampled) and loss_depths (averaged), not both")

    def _check_sampler(self) -> None:
        """Counter-based draws are the uniforms of a family with split draws (Boyan chains)."""
        check_choice("sampler", self.sampler, SAMPLERS)
        if self.sampler == "device" and not self.tasks.split_draws:
            splits = " or ".join(f.name for f in FAMILIES.values() if f.split_draws)
            raise ValueError(
                f"sampler: 'device' draws the uniforms of a family with split draws ({splits}), "
                f"got {self.tasks.family!r}; use --sampler host"
            )

    def _check_forward(self) -> None:
        """The state-space forward is exact only where every position's value is a function of its state."""
        check_choice("forward", self.forward, FORWARDS)
        if self.forward == "positional":
            return
        model = self.model
        ok = isinstance(model, ICTDConfig) and (model.form, model.attention, model.mask) == ("tsm", "softmax", "paper")
        if not ok:
            raise ValueError(
                "forward: 'state-space' is exact for the stylised model in TSM form with softmax attention and the "
                "paper mask alone; use --forward positional"
            )
        if self.tasks.n_actions is not None or self.tasks.family.startswith("gym:") or self.shuffle_rewards:
            raise ValueError(
                "forward: 'state-space' needs each reward to be its state's (no control family, no Gymnasium "
                "environment, no shuffled rewards); use --forward positional"
            )

    def _check_spectral_penalty(self) -> None:
        """A finite weight >= 0; the radius is that of one tied layer's map in the state-space forward."""
        value = self.spectral_penalty
        if not (isinstance(value, (int, float)) and 0 <= value < float("inf")):
            raise ValueError(f"spectral_penalty: must be a finite number >= 0 (0: off), got {value!r}")
        if value and (self.forward != "state-space" or not self.model.tied):
            raise ValueError(
                "spectral_penalty: the radius of one tied layer's value map, read in the state-space forward: "
                f"needs --forward state-space and tied weights, got forward {self.forward!r}, tied {self.model.tied}"
            )

    def _check_parts(self) -> None:
        """A registered model config and a TaskDistribution, agreeing on the settings both hold (``SHARED``)."""
        if not isinstance(self.model, tuple(MODEL_CONFIGS.values())):
            names = ", ".join(cls.__name__ for cls in MODEL_CONFIGS.values())
            raise ValueError(f"model: must be one of {names}, got {type(self.model).__name__}")
        if not isinstance(self.tasks, TaskDistribution):
            raise ValueError(f"tasks: must be a TaskDistribution, got {type(self.tasks).__name__}")
        for name in SHARED:
            if getattr(self.model, name) != getattr(self.tasks, name):
                raise ValueError(
                    f"{name}: the model has {getattr(self.model, name)!r}, the tasks "
                    f"{getattr(self.tasks, name)!r}; they must agree"
                )

    def _check_numbers(self) -> None:
        """The choices (objective, optimizer, device), the flags and the numbers each in its range."""
        check_choice("objective", self.objective, tuple(OBJECTIVES))
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("optimizer_kernel", self.optimizer_kernel, OPTIMIZER_KERNELS)
        check_choice("device", self.device, DEVICES)
        check_bool(self, "compile")
        check_positive_int(
            self, "tasks_per_batch", "windows_per_task", "n_eval_tasks", "eval_every", "checkpoint_every"
        )
        check_positive_int(self, "steps", least=0)
        if not self.lr > 0:
            raise ValueError(f"lr: must be > 0, got {self.lr}")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay: must be >= 0, got {self.weight_decay}")
        check_choice("lr_schedule", self.lr_schedule, LR_SCHEDULES)
        check_positive_int(self, "warmup_steps", least=0)
        if not (isinstance(self.grad_clip, (int, float)) and self.grad_clip >= 0 and self.grad_clip < float("inf")):
            raise ValueError(f"grad_clip: must be a finite number >= 0 (0: off), got {self.grad_clip!r}")

    def _check_objective(self) -> None:
        """A control objective needs a control family; Monte-Carlo returns need a horizon."""
        if OBJECTIVES[self.objective].control and self.tasks.n_actions is None:
            controls = " or ".join(f.name for f in FAMILIES.values() if f.control)
            raise ValueError(
                f"objective: {self.objective!r} learns action values: it needs a control family "
                f"(--family {controls}), got {self.tasks.family!r}"
            )
        if OBJECTIVES[self.objective].needs_returns and self.mc_horizon < 1:
            raise ValueError(f"mc_horizon: the {self.objective} objective needs a horizon >= 1, got {self.mc_horizon}")

    def _check_task_options(self) -> None:
        """A finite task pool works on every family; the shuffled-reward null is one of the TD objective."""
        check_positive_int(self, "task_pool", least=0)
        check_bool(self, "shuffle_rewards")
        if self.shuffle_rewards and self.objective != "td":
            raise ValueError(f"shuffle_rewards: a null of the TD objective, got objective {self.objective!r}")

    @property
    def architecture(self) -> str:
        return self.model.architecture

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
    def depth_list(self) -> tuple[int, ...]:
        """The depths parsed from ``loss_depths`` (empty: none)."""
        if not self.loss_depths:
            return ()
        try:
            depths = tuple(int(part) for part in self.loss_depths.split(","))
        except ValueError:
            raise ValueError(f"loss_depths: expected D1,D2,... such as '12,24,48', got {self.loss_depths!r}") from None
        if any(d < 1 for d in depths) or len(set(depths)) != len(depths):
            raise ValueError(f"loss_depths: need distinct depths >= 1, got {self.loss_depths!r}")
        return depths

    def lr_at(self, step: int) -> float:
        """The learning rate of step ``step`` (0-based): warm-up, then the schedule."""
        factor = min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps else 1.0
        if self.lr_schedule == "cosine":
            factor *= 0.5 * (1 + math.cos(math.pi * step / max(self.steps, 1)))
        return self.lr * factor

    def with_flat(self, **settings: Any) -> "TrainConfig":
        """A copy with flat settings (``d_model=64``, ``context_len=100``, ``architecture="standard"``) routed
        to the config that holds each; a setting of the other architecture is an error, never ignored."""
        unknown = sorted(set(settings) - set(flat_fields()))
        if unknown:
            raise ValueError(f"TrainConfig: unknown setting(s) {unknown}; known settings are {sorted(flat_fields())}")
        model = self.model
        if settings.get("architecture", self.architecture) != self.architecture:
            check_choice("architecture", settings["architecture"], ARCHITECTURES)
            target = MODEL_CONFIGS[settings["architecture"]]
            common = {f.name for f in fields(model)} & {f.name for f in fields(target)}
            model = target(**{k: getattr(model, k) for k in common})
        model_fields = {f.name for f in fields(model)}
        foreign = sorted(k for k in settings if k not in model_fields and k in _model_only())
        if foreign:
            others = [a for a, cls in MODEL_CONFIGS.items() if {f.name for f in fields(cls)} >= set(foreign)]
            hint = f" (choose --architecture {' or '.join(others)})" if others else ""
            raise ValueError(f"{', '.join(foreign)}: not a setting of the {model.architecture} architecture{hint}")
        own = {k: v for k, v in settings.items() if k in _own_fields()}
        model = replace(model, **{k: v for k, v in settings.items() if k in model_fields})
        tasks = replace(self.tasks, **{k: v for k, v in settings.items() if k in _task_fields()})
        return replace(self, model=model, tasks=tasks, **own)

    def to_dict(self) -> dict[str, Any]:
        own = {name: getattr(self, name) for name in sorted(_own_fields(), key=FIELD_ORDER.get)}
        own = {k: v for k, v in own.items() if WRITTEN_WHEN_SET.get(k, object()) != v}
        return {"architecture": self.architecture, "model": self.model.to_dict(), "tasks": self.tasks.to_dict(), **own}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        """Inverse of ``to_dict``; a flat dict of the layout before the nesting (run folders and cards
        written by earlier releases) is migrated: ``migrate_flat``."""
        if "model" not in data:
            data = migrate_flat(data)
        data = {"optimizer_kernel": "foreach", **data}  # saved before the field existed: trained with foreach
        architecture = data.pop("architecture", "stylised")
        check_choice("architecture", architecture, ARCHITECTURES)
        if not isinstance(data.get("model"), dict) or not isinstance(data.get("tasks"), dict):
            raise ValueError("TrainConfig: a nested config needs 'model' and 'tasks' tables")
        model = MODEL_CONFIGS[architecture].from_dict(data.pop("model"))
        tasks = TaskDistribution.from_dict(data.pop("tasks"))
        return from_dict_strict(cls, {**data, "model": model, "tasks": tasks})

    def differences(self, other: "TrainConfig") -> list[str]:
        """``field: mine -> other`` for every setting that differs, nested ones by their path ("model.d_model")."""
        mine, theirs = _paths(self.to_dict()), _paths(other.to_dict())
        return [
            f"{k}: {mine.get(k)!r} -> {theirs.get(k)!r}"
            for k in sorted(set(mine) | set(theirs))
            if mine.get(k) != theirs.get(k)
        ]

    @classmethod
    def from_flat(cls, **settings: Any) -> "TrainConfig":
        """The defaults with flat settings applied, as the command line takes them: ``from_flat(tied=True,
        context_len=50, architecture="standard")``."""
        return cls().with_flat(**settings)

    @classmethod
    def from_preset(cls, name: str, **settings: Any) -> "TrainConfig":
        """A preset with flat ``settings`` applied (``with_flat``)."""
        if name not in PRESETS:
            raise ValueError(f"preset: unknown preset {name!r}; choose from {sorted(PRESETS)}")
        return PRESETS[name].with_flat(**settings)


FIELD_ORDER = {f.name: i for i, f in enumerate(fields(TrainConfig))}
# Fields added after runs were shipped, written only when set otherwise than here: every earlier run's files (its
# train_config.json, a report's summary.json) stay as they were
WRITTEN_WHEN_SET = {"sampler": "host"}


def migrate_flat(data: dict[str, Any]) -> dict[str, Any]:
    """The nested layout of a flat ``TrainConfig`` dict written before the nesting: each setting moved to the
    config that holds it, in its architecture's current names (its config's ``migrate_flat``); settings of the other
    architectures (written at their defaults) are dropped."""
    data = dict(data)
    architecture = data.pop("architecture", "stylised")
    check_choice("architecture", architecture, ARCHITECTURES)
    model_cls = MODEL_CONFIGS[architecture]
    data = model_cls.migrate_flat(data)
    model_fields, task_fields = {f.name for f in fields(model_cls)}, _task_fields()
    model = {k: data[k] for k in model_fields if k in data}
    tasks = {k: data[k] for k in task_fields if k in data}
    rest = {k: v for k, v in data.items() if k not in model_fields | task_fields | _model_only()}
    if "seed" in data:
        rest["seed"] = data["seed"]
    return {"architecture": architecture, "model": model, "tasks": tasks, **rest}


def flat_fields() -> dict[str, str]:
    """Every flat setting, in declaration order, and where it lives: ``"architecture"``, ``"model"`` (either
    architecture's config), ``"tasks"`` (``d_features`` and ``gamma`` set the model's too) or ``"train"``
    (``seed`` seeds the model's weights too)."""
    names = {"architecture": "architecture"}
    for cls in MODEL_CONFIGS.values():
        names |= {f.name: "model" for f in fields(cls) if f.name in _model_only() and f.name not in names}
    names |= {f.name: "tasks" for f in fields(TaskDistribution)}
    names |= {f.name: "train" for f in fields(TrainConfig) if f.name in _own_fields()}
    return names


def _own_fields() -> set[str]:
    return {f.name for f in fields(TrainConfig)} - {"model", "tasks"}


def _task_fields() -> set[str]:
    return {f.name for f in fields(TaskDistribution)}


def _model_only() -> set[str]:
    return {f.name for cls in MODEL_CONFIGS.values() for f in fields(cls)} - _task_fields() - {"seed"}


def _paths(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out |= _paths(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


PRESETS: dict[str, TrainConfig] = {
    # README main command: 12 tied layers learn in context (beat the constant and first-visit Monte Carlo) in about
    # a minute on one CPU core; 3 or 6 tied layers do not at this budget (docs/emergence.md).
    "quick": TrainConfig(
        model=ICTDConfig(d_features=4, tied=True, n_layers=12),
        steps=1500,
        lr=1e-2,
        eval_every=250,
        checkpoint_every=500,
        n_eval_tasks=256,
    ),
    # The flagship: 24 tied layers and a longer run, 5.3-6.4 minutes on one CPU core; its three shipped seeds learn in
    # context (docs/emergence.md).
    "flagship": TrainConfig(
        model=ICTDConfig(d_features=4, tied=True, n_layers=24),
        steps=4000,
        lr=5e-3,
        eval_every=500,
        checkpoint_every=1000,
        n_eval_tasks=256,
    ),
    # In-context TD (docs/emergence.md, "A recipe that runs TD"): 48 tied layers, the learning rate warmed up over 100
    # steps then decayed by a cosine, the gradient clipped at norm 1, trained through the exact state-space forward.
    # Run deeper its error falls toward the tabular TD fixed point of the context; the quick preset's rises.
    # Checkpoints every 60 steps: the last 20% of the run is judged at 6 of them
    # (ictd_interp.analyses.metrics.stability).
    "deep": TrainConfig(
        model=ICTDConfig(d_features=4, tied=True, n_layers=48),
        steps=1500,
        lr=1e-2,
        warmup_steps=100,
        lr_schedule="cosine",
        grad_clip=1.0,
        forward="state-space",
        eval_every=250,
        checkpoint_every=60,
        n_eval_tasks=256,
    ),
    # The predecessor's scale with per-layer weights and a long run.
    "paper": TrainConfig(steps=30000, eval_every=1000, checkpoint_every=5000),
    # One layer's weights shared across depth, as the predecessor's default mode, run long.
    "tied": TrainConfig(model=ICTDConfig(d_features=4, tied=True), steps=20000, eval_every=1000, checkpoint_every=5000),
    # The standard architecture (docs/theory.md §10): minutes on 2 CPU cores, and a longer run.
    "standard-quick": TrainConfig(
        model=StandardConfig(d_features=4, n_ctx=31),
        steps=3000,
        lr=1e-3,
        tasks_per_batch=16,
        eval_every=250,
        checkpoint_every=1000,
    ),
    "standard": TrainConfig(
        model=StandardConfig(d_features=4, n_ctx=31), steps=20000, lr=1e-3, eval_every=1000, checkpoint_every=5000
    ),
    # In-context control (docs/theory.md §14): the quick model on the state-action chains of random two-action
    # MDPs of 4 states under the uniform behaviour policy, where the TD objective is SARSA's.
    "control-quick": TrainConfig(
        model=ICTDConfig(d_features=4, tied=True),
        tasks=TaskDistribution(family="mdp-random", n_states=4, d_features=4),
        steps=3000,
        lr=3e-3,
        eval_every=250,
        checkpoint_every=1000,
        n_eval_tasks=256,
    ),
}
# In-context TD on contexts of 100 transitions (docs/emergence.md, "In-context TD beyond one corner"): the deep
# recipe at twice its depth, 96 tied layers, trained at n = 100. At n = 100 its own depth is within a few percent of
# the context's TD fixed point and below every-visit Monte Carlo; the 48-layer recipe trained there stops early.
PRESETS["deep-long"] = replace(
    PRESETS["deep"],
    model=replace(PRESETS["deep"].model, n_layers=96),
    tasks=replace(PRESETS["deep"].tasks, context_len=100),
)
# In-context TD at a long horizon (docs/emergence.md, "In-context TD beyond one corner"): at γ = 0.97 (horizon
# 1/(1 − γ) ≈ 33) the deep-long recipe stops early whatever its length of training: its layer settles at a step a with
# a × depth ≈ 40-50 and a discount above γ that makes up for the short run. Twice the depth and three times the
# learning rate bring a × depth to about 100, three horizons, and the discount to γ.
# The paper's depth at n = 100: the deep recipe's 48 tied layers trained at n = 100 stop early (0/5 run TD), a third
# of the way to the layer's limit left at their depth; a penalty on the spectral radius of the layer's value map
# (weight 1) leaves a fifth, and 10 of 10 seeds run TD (docs/emergence.md, td-spectral; 0.5 gives 2/5, 2 gives 0/5).
PRESETS["deep-spectral"] = PRESETS["deep"].with_flat(context_len=100, spectral_penalty=1.0)
PRESETS["deep-g97"] = PRESETS["deep-long"].with_flat(n_layers=192, gamma=0.97, lr=0.03, steps=3000)
# Six horizons per forward pass: at 384 tied layers a × depth is 180-210 and the learned discount lands within 0.0011
# of γ = 0.97 in every seed measured (6 of 6 run TD); at 192 layers 7 of 10 do, the rest with a discount too high.
PRESETS["deep-g97-384"] = PRESETS["deep-g97"].with_flat(n_layers=384)
