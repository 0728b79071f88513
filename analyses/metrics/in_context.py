"""Does a trained model learn in context? The function-space verdict (docs/theory.md §7a).

Weight cosines with θ* cannot answer this: a model can point its weights at θ*'s and still predict no better than a
constant. The verdict reads the model's value predictions on held-out tasks only:

* **learns in context** when the model's MSVE is significantly below both the **constant** ``mean(R)/(1-γ)`` (the
  value level of the context, no attention at all) and **first-visit Monte Carlo** (the simplest estimator that uses
  which state is where); significant: the paired 95% t interval over tasks of the per-task MSVE difference lies
  wholly below 0 (``intervals.paired``). Every other baseline is reported beside it, not required.
* **effective discount** ``b/(-c)`` of the last layer (the one iterated), against the task's γ: exact when read from
  the weights (the interval is the point), a bootstrap interval over tasks when fitted. ``within γ ± 0.1`` when the
  interval lies inside, ``above``/``below`` when it lies wholly past that band, else ``undecided``.
* **its level on the verdict ladder** (``ladder``): learns in context, beats Monte Carlo, or runs TD, judged across
  context lengths and depths against every-visit Monte Carlo and the tabular TD fixed point of the context (CE).
* **iterated past its depth**: the trained layers run to ``PAST`` times the trained depth (a tied model repeats its
  layer, a per-layer one its last); the per-task change of MSVE from the trained depth, with its t interval:
  ``falls`` / ``rises`` when the interval lies below / above ``-FLAT`` / ``+FLAT`` times the trained depth's MSVE,
  ``flat`` when it lies within that band, else ``undecided``; a non-finite error ``rises``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np
import torch
from torch import Tensor

from ictd_interp.analyses.metrics.algorithm_id import LayerReading
from ictd_interp.analyses.metrics.baselines import LABELS, MODEL_ROW, REQUIRED, Baselines, error_parts, first_level
from ictd_interp.analyses.metrics.cosine_null import NullRow
from ictd_interp.analyses.metrics.draws import draw_seed
from ictd_interp.analyses.metrics.extrapolation import values_at_depth
from ictd_interp.analyses.metrics.intervals import Interval, t_interval
from ictd_interp.analyses.metrics.ladder import FLAT, Ladder, depth_verdict, ladder
from ictd_interp.analyses.metrics.linear_family import FamilyReading
from ictd_interp.analyses.metrics.stability import OverTraining
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.models.base import check_tasks
from ictd_interp.models.registry import HookedModel
from ictd_interp.tasks.sampling import TaskBatch

DISCOUNT_BAND = 0.1  # "within γ ± 0.1"
PAST = 4  # iterated to 4x the trained depth


@dataclass(kw_only=True)  # fields in summary.json's order
class Discount:
    """The last layer's effective discount ``b/(-c)`` against γ (None where ``c`` is not identifiable)."""

    value: Optional[float]
    interval: Optional[list[float]]  # [lo, hi]: the point itself when read exactly from the weights
    gamma: float
    source: str  # "weights" (exact) or "fit" (bootstrap over tasks)
    verdict: str  # "within γ ± 0.1", "above γ", "below γ", "undecided", "not identifiable"


@dataclass(kw_only=True)
class Iterated:
    """MSVE at the trained depth and at ``PAST`` times it, and the per-task change's interval and verdict."""

    depths: list[int]
    msve: list[float]
    change: Interval  # per task: MSVE(deep) - MSVE(trained)
    verdict: str  # falls | flat | rises | undecided


@dataclass(kw_only=True)
class InContext:
    """The function-space verdict of one model (this module's docstring has every rule)."""

    learns_in_context: bool
    verdict: str  # one sentence, the answer first
    beats: list[str]  # baselines with significantly higher MSVE than the model
    loses_to: list[str]
    undecided: list[str]
    best_baseline: str
    best_baseline_msve: float
    msve: Interval
    discount: Discount
    iterated: Iterated
    level: Optional[str] = None  # the verdict ladder's level (``ladder.LEVELS``); None in summaries before it
    ladder: Optional[Ladder] = None
    over_training: Optional[OverTraining] = None  # a run folder's last 20% of checkpoints (``stability``)
    cos_A: Optional[float] = None  # the lowest layer's weight cosines with θ* (stylised models) ...
    cos_V: Optional[float] = None
    cosine_nulls: Optional[list[NullRow]] = None  # ... beside the same cosines of models that run no TD
    rule: str = (
        f"learns in context iff the paired 95% t interval over tasks of the per-task MSVE difference lies "
        f"below 0 against both {' and '.join(REQUIRED)}"
    )


def discount_reading(value: Optional[float], interval: Optional[list[float]], gamma: float, source: str) -> Discount:
    """``Discount`` with its verdict (``interval`` None: the exact value is its own interval)."""
    if value is None or not math.isfinite(value):
        return Discount(value=value, interval=None, gamma=gamma, source=source, verdict="not identifiable")
    lo, hi = interval if interval is not None else (value, value)
    if lo >= gamma - DISCOUNT_BAND and hi <= gamma + DISCOUNT_BAND:
        verdict = f"within γ ± {DISCOUNT_BAND:g}"
    elif lo > gamma + DISCOUNT_BAND:
        verdict = "above γ"
    elif hi < gamma - DISCOUNT_BAND:
        verdict = "below γ"
    else:
        verdict = "undecided"
    return Discount(value=value, interval=[lo, hi], gamma=gamma, source=source, verdict=verdict)


def iterated(trained_values: Tensor, deep_values: Tensor, tasks: TaskBatch, depths: list[int]) -> Iterated:
    """``Iterated`` from the value rows ``[batch, pos]`` at the trained depth and at ``depths[1]``."""
    at_trained, deep = error_parts(trained_values, tasks)["msve"], error_parts(deep_values, tasks)["msve"]
    change = t_interval(deep - at_trained)
    verdict = depth_verdict(change, FLAT * float(at_trained.mean())) if np.isfinite(deep).all() else "rises"
    return Iterated(
        depths=depths, msve=[float(at_trained.mean()), float(np.mean(deep))], change=change, verdict=verdict
    )


def verdict(
    base: Baselines, discount: Discount, iterated_: Iterated, ladder_: Optional[Callable[[bool], Ladder]] = None
) -> InContext:
    """The function-space verdict from the model's baselines table (``baselines.compare``), its last layer's
    effective discount, its error iterated past the trained depth and (``ladder_``, given the first level) its
    verdict ladder."""
    groups: dict[str, list[str]] = {"lower": [], "higher": [], "undecided": []}
    for name, row in base.estimators.items():
        if name != MODEL_ROW:
            groups[row.model_minus_baseline.verdict].append(name)
    first = first_level({name: base.estimators[name].model_minus_baseline for name in REQUIRED})
    learns, decided = bool(first), first is not None
    others = {n: r.msve.mean for n, r in base.estimators.items() if n != MODEL_ROW and math.isfinite(r.msve.mean)}
    best = min(others, key=others.get)
    model = base.estimators[MODEL_ROW].msve
    lad = None if ladder_ is None else ladder_(learns if decided else None)
    return InContext(
        learns_in_context=learns,
        verdict=sentence(learns, base, decided),
        beats=groups["lower"],
        loses_to=groups["higher"],
        undecided=groups["undecided"],
        best_baseline=best,
        best_baseline_msve=others[best],
        msve=model,
        discount=discount,
        iterated=iterated_,
        level=None if lad is None else lad.level,
        ladder=lad,
    )


def sentence(learns: bool, base: Baselines, decided: bool = True) -> str:
    """``Learns in context: MSVE 0.41 against the constant's 0.58 (−0.17 [−0.22, −0.11]) and ...``; where no interval
    lies above 0 and one straddles it (``decided`` False), ``Undecided``, with the sample that would decide."""
    parts = []
    for name in REQUIRED:
        row = base.estimators[name]
        diff = row.model_minus_baseline.difference
        parts.append(f"{LABELS[name]} {row.msve.mean:.3f} (difference {diff.text('+.3f')})")
    head = "Learns in context" if learns else "Does not learn in context" if decided else "Undecided"
    text = (
        f"{head}: MSVE {base.estimators[MODEL_ROW].msve.mean:.3f} on {base.n_tasks} held-out tasks against "
        + " and ".join(parts)
        + " (paired 95% t intervals over tasks; it learns in context iff both lie below 0"
    )
    if decided:
        return text + ")."
    return text + f"; an interval that straddles 0 decides nothing: {needed_tasks(base)}."


def needed_tasks(base: Baselines) -> str:
    """The sample that would decide the undecided comparisons if their mean differences held: the interval's
    half-width shrinks as 1/√n, so ``n (half-width / |mean|)²`` tasks."""
    need = []
    for name in REQUIRED:
        diff = base.estimators[name].model_minus_baseline.difference
        if diff.lo <= 0 <= diff.hi:
            half = (diff.hi - diff.lo) / 2
            need.append(math.inf if diff.mean == 0 else base.n_tasks * (half / abs(diff.mean)) ** 2)
    most = max(need)
    if not math.isfinite(most):
        return "a mean difference of 0 is decided by no sample"
    return f"about {math.ceil(most):,} tasks would decide it if the mean differences held (--n-tasks)"


def discount_of(last: Optional[Union[LayerReading, FamilyReading]], gamma: float) -> Discount:
    """``Discount`` of a last layer's reading: a TD-family reading (``algorithm_id``: read from the weights, or
    fitted with its bootstrap interval), a linear model's family member (read from its weights), or None."""
    if last is None:
        return discount_reading(None, None, gamma, "none")
    source = getattr(last, "source", "weights")
    interval = getattr(last, "interval", None)
    return discount_reading(
        last.effective_discount, interval.effective_discount if source == "fit" and interval else None, gamma, source
    )


@torch.no_grad()
def assess(
    model: HookedModel,
    tasks: TaskBatch,
    base: Baselines,
    last: Optional[Union[LayerReading, FamilyReading]],
    dist: TaskDistribution,
    eval_seed: int,
) -> InContext:
    """The verdict of ``model`` on ``tasks`` (drawn from ``dist``): ``base`` its baselines table on them, ``last`` its
    last layer's reading (``discount_of``); the ladder's tasks are the named draw ``ladder`` (``draws``)."""
    check_tasks(model, tasks)
    depth, gamma = model.cfg.n_layers, dist.gamma
    trained, deep = values_at_depth(model, tasks, depth), values_at_depth(model, tasks, PAST * depth)
    return verdict(
        base,
        discount_of(last, gamma),
        iterated(trained, deep, tasks, [depth, PAST * depth]),
        lambda learns: ladder(model, dist, draw_seed(eval_seed, "ladder"), learns),
    )
