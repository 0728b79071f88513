"""θ*'s own map on state values and its limit as depth grows, computed rather than extrapolated: the numbers a
report quotes beside a trained model's (its spectrum and fixed point on the evaluation tasks, and the fixed
point's error against context length on longer trajectories).

θ*'s layer maps the values of the context's states as ``v <- T v + M^ r`` with ``T = I - M^ + gamma P^``
(``algorithm_id``'s module docstring); its fixed point is the depth limit, its spectral radius the asymptotic
rate of the geometric decay of the error (Theorem 2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import torch
from torch import Tensor

from ictd_interp.analyses.metrics.algorithm_id import IterationMap, iteration_map
from ictd_interp.analyses.metrics.depth_limit import depth_limit
from ictd_interp.analyses.metrics.intervals import Interval
from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.stylised.theta_star import theta_star_coefficients
from ictd_interp.tasks.sampling import TaskBatch, sample_from

LIMIT_LENGTHS, LIMIT_TASKS = (30, 100, 300, 1000), 32  # theta*'s limit (fixed point) versus context length


@dataclass(kw_only=True)  # fields in summary.json's order
class LimitRow:
    """θ*'s fixed point at one context length: its sup error (mean over the contracting tasks, t interval), the
    mean spectral radius and the share of tasks whose map contracts; ``tasks`` says which tasks."""

    context_len: int
    tasks: str  # "evaluation" (the report's own tasks) or "long" (other tasks with longer trajectories)
    fixed_point_error: Optional[float]
    fixed_point_error_interval: Optional[Interval]
    spectral_radius_mean: float
    fraction_contracting: float


@dataclass
class DepthLimit:
    n_tasks: int  # tasks of the longer rows
    rows: list[LimitRow]


def star_map(star: HookedICTDTransformer, tasks: TaskBatch) -> IterationMap:
    """θ*'s map on ``tasks``: its spectrum and fixed point (``star``: θ* of a model's config)."""
    return iteration_map(star, tasks, 0, theta_star_coefficients(star.cfg.gamma))


def star_limit(cfg: ICTDConfig) -> HookedICTDTransformer:
    """θ*'s one layer of ``cfg``, in float64: what ``depth_limit`` repeats for θ*'s limit. Under the paper's mask
    whatever ``cfg``'s: θ*'s weights are the same under either mask, and the full mask has no state-space form."""
    return HookedICTDTransformer.from_theta_star(replace(cfg, dtype="float64", n_layers=1, tied=True, mask="paper"))


@torch.no_grad()
def theta_star_rows(cfg: ICTDConfig, tasks: TaskBatch) -> dict[str, Tensor]:
    """θ*'s value rows ``[batch, pos]`` on ``tasks`` as a baselines table takes them (``baselines.compare``'s
    ``extra``): at the depth of ``cfg`` and at its depth limit (``depth_limit``; NaN on a task whose map diverges)."""
    return {
        "theta_star": HookedICTDTransformer.from_theta_star(cfg)(tasks.prompt),
        "theta_star_limit": depth_limit(star_limit(cfg), tasks),
    }


def theta_star_limit(
    cfg: ICTDConfig, dist: TaskDistribution, seed: int, at_training_length: IterationMap
) -> DepthLimit:
    """Per context length, the sup error of θ*'s fixed point and its map's spectral radius. At the training
    length ``dist.context_len``, ``at_training_length`` (its map on the evaluation tasks, as a report's first
    section quotes it); at the longer ``LIMIT_LENGTHS``, on ``LIMIT_TASKS`` other tasks (``seed``) with
    trajectories of the longest length (prefixes for the shorter ones)."""
    n_train = dist.context_len
    tasks = sample_from(dist, LIMIT_TASKS, seed=seed, length=max(LIMIT_LENGTHS))
    star = star_limit(cfg)
    rows = [_limit_row(n_train, at_training_length, "evaluation")]
    for n in (n for n in LIMIT_LENGTHS if n > n_train):
        prefix = TaskBatch(tasks.mrp, tasks.features, tasks.states[:, : n + 1])
        rows.append(_limit_row(n, star_map(star, prefix), "long"))
    return DepthLimit(LIMIT_TASKS, rows)


def _limit_row(n: int, result: IterationMap, tasks: str) -> LimitRow:
    return LimitRow(
        context_len=n,
        tasks=tasks,
        fixed_point_error=result.fixed_point_error,
        fixed_point_error_interval=result.fixed_point_error_interval,
        spectral_radius_mean=result.spectral_radius_mean,
        fraction_contracting=result.fraction_contracting,
    )
