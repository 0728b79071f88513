"""How much the claims report runs: ``quick`` (≤ 10 minutes on 2 idle cores) and ``full`` (more seeds, longer
contexts, deeper models, the standard architecture trained; ≤ 2 hours on 2 cores, split across a Ray cluster
with no code change). A budget is a plain validated dataclass, recorded in the report and in the folder's
request, so a folder never mixes budgets."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from ictd_interp.config.fields import FORWARDS, check_choice
from ictd_interp.config.registry import OBJECTIVES
from ictd_interp.config.train import TrainConfig


@dataclass(frozen=True)
class Budget:
    """Args:
    name: quick, full, or a custom name.
    theorem1_lengths: context lengths n at which θ* is compared with softmax TD layer by layer.
    theorem1_scales: feature scales of that comparison (uniform and one-hot features, both forms).
    theorem1_depth: layers compared.
    margin_scales: feature scales at which Assumption 5.1's margin C is measured (uniform and one-hot).
    margin_tasks: tasks per (kind, scale).
    limit_lengths: context lengths of θ*'s computed limit (the fixed point of its map).
    limit_tasks: tasks of that computation.
    neu_lengths: context lengths n of Theorem 3's population NEU grid.
    neu_depths: depths L of that grid.
    neu_tasks: tasks per grid cell (the same tasks for θ*, the zero predictor and the model; jackknife intervals).
    neu_model: the shipped TD-trained model compared at its own depth.
    seeds: seeds of every trained condition.
    steps: training steps of every trained condition (the quick preset otherwise).
    n_eval_tasks: evaluation tasks of every trained cell.
    objectives: pretraining objectives of the emergence rows.
    depth_sampling: the tied model trained at depths drawn from LO:HI each step, against its fixed depth.
    forward: how those two studies train the quick preset: positional, or state-space (the same function, its
        steps 2.5× faster for TD and 5× for NEU's second-order one: the quick budget's).
    standard_seeds: seeds of the standard architecture trained (empty: the shipped standard-quick-s0).
    control_objectives: pretraining objectives of the control emergence row (the control-quick preset: on the
        state-action chain TD is SARSA's objective, q-learning bootstraps on the best next action, MC regresses
        on returns, supervised on q of the behaviour, supervised-q-star on q*).
    acting_tasks: random MDPs on which the acting row scores each greedy policy's regret.
    deep_models: the shipped models of the ``deep`` recipe whose layer the second iterated row runs deeper.
    deep_long_models, deep_spectral_models, horizon_models: those of the ``deep-long`` (n = 100), ``deep-spectral``
        (n = 100, 48 layers) and ``deep-g97-384`` (γ = 0.97) recipes, for the third, fourth and fifth.
    """

    name: str
    theorem1_lengths: tuple[int, ...] = (5, 30, 100)
    theorem1_scales: tuple[float, ...] = (0.5, 2.0, 5.0)
    theorem1_depth: int = 10
    margin_scales: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 5.0)
    margin_tasks: int = 64
    limit_lengths: tuple[int, ...] = (30, 100, 300, 1000, 10000, 100000)
    limit_tasks: int = 32
    neu_lengths: tuple[int, ...] = (10, 30, 100, 300)
    neu_depths: tuple[int, ...] = (1, 3, 12, 24, 96)
    neu_tasks: int = 4096
    neu_model: str = "depth3-td-s0"
    seeds: tuple[int, ...] = (0, 1)
    steps: Optional[int] = None
    n_eval_tasks: Optional[int] = None
    objectives: tuple[str, ...] = ("td", "neu", "mc", "supervised")
    depth_sampling: str = "6:18"
    forward: str = "positional"
    standard_seeds: tuple[int, ...] = ()
    control_objectives: tuple[str, ...] = ("td", "q-learning", "mc", "supervised", "supervised-q-star")
    acting_tasks: int = 256
    deep_models: tuple[str, ...] = ("deep-td-s0", "deep-td-s1", "deep-td-s2")
    deep_long_models: tuple[str, ...] = ("deep-long-td-s0", "deep-long-td-s1", "deep-long-td-s2")
    deep_spectral_models: tuple[str, ...] = ("deep-spectral-td-s0", "deep-spectral-td-s1", "deep-spectral-td-s2")
    horizon_models: tuple[str, ...] = ("deep-g97-384-td-s0", "deep-g97-384-td-s2", "deep-g97-384-td-s3")
    extra: dict[str, Any] = field(default_factory=dict)  # fixed training settings of every study (tests)

    def __post_init__(self) -> None:
        for name in (
            "theorem1_lengths",
            "theorem1_scales",
            "margin_scales",
            "limit_lengths",
            "neu_lengths",
            "neu_depths",
            "seeds",
            "objectives",
            "control_objectives",
            "deep_models",
            "deep_long_models",
            "deep_spectral_models",
            "horizon_models",
        ):
            if not getattr(self, name):
                raise ValueError(f"{name}: needs at least one value")
        for name in ("objectives", "control_objectives"):
            unknown = [o for o in getattr(self, name) if o not in OBJECTIVES]
            if unknown:
                raise ValueError(f"{name}: {unknown} not registered (ictd_interp.config.registry: {list(OBJECTIVES)})")
        if self.neu_tasks < 64:
            raise ValueError(f"neu_tasks: the jackknife over 32 groups needs at least 64 tasks, got {self.neu_tasks}")
        if self.acting_tasks < 2:
            raise ValueError(f"acting_tasks: an interval over tasks needs at least 2, got {self.acting_tasks}")
        check_choice("forward", self.forward, FORWARDS)
        if len(self.seeds) < 2:
            raise ValueError(f"seeds: an interval over seeds needs at least 2, got {list(self.seeds)}")

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def eval_tasks(self) -> int:
        """The evaluation tasks per trained model: the budget's, else the quick preset's."""
        return self.n_eval_tasks or TrainConfig.from_preset("quick").n_eval_tasks

    def studies(self) -> dict[str, dict[str, Any]]:
        """The studies this budget trains, as study specs (``ictd_interp.analyses.studies``)."""
        fixed = {
            **({"steps": self.steps} if self.steps else {}),
            **({"n_eval_tasks": self.n_eval_tasks} if self.n_eval_tasks else {}),
            **self.extra,
        }
        quick = {"forward": self.forward, **fixed}
        specs = {
            "objectives": {
                "name": "claims-objectives",
                "preset": "quick",
                "seeds": list(self.seeds),
                "fixed": dict(quick),
                "grid": {"objective": list(self.objectives)},
                "description": "Does θ* emerge under every pretraining objective?",
            },
            "depth_sampling": {
                "name": "claims-depth-sampling",
                "preset": "quick",
                "seeds": list(self.seeds),
                "fixed": dict(quick),
                "grid": {"train_depths": ["", self.depth_sampling]},
                "description": "A tied layer trained at one depth versus at depths drawn each step.",
            },
            "control_objectives": {
                "name": "claims-control-objectives",
                "preset": "control-quick",
                "seeds": list(self.seeds),
                "fixed": dict(fixed),
                "grid": {"objective": list(self.control_objectives)},
                "description": "Does θ* emerge for control (TD on the state-action chain is "
                "SARSA's objective; Q-learning's and q* targets beside it)?",
            },
        }
        if self.standard_seeds:
            specs["architectures"] = {
                "name": "claims-architectures",
                "preset": "standard-quick",
                "seeds": list(self.standard_seeds),
                "fixed": dict(fixed),
                "grid": {"architecture": ["standard"]},
                "description": "The standard architecture on the same tasks.",
            }
        return specs


BUDGETS = {
    "quick": Budget("quick", forward="state-space"),
    "full": Budget(
        "full",
        theorem1_lengths=(5, 30, 100, 300),
        theorem1_scales=(0.5, 1.0, 2.0, 3.0, 5.0),
        theorem1_depth=16,
        margin_tasks=256,
        limit_lengths=(30, 100, 300, 1000, 3000, 10000, 100000, 1000000),
        limit_tasks=64,
        neu_lengths=(10, 30, 100, 300, 1000),
        neu_depths=(1, 3, 12, 24, 96, 384),
        neu_tasks=16384,
        seeds=(0, 1, 2, 3, 4),
        standard_seeds=(0, 1, 2),
        acting_tasks=1024,
    ),
}
