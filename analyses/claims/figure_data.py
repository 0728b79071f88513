"""What each claims figure is drawn from, typed: a row's ``data`` is one of these written as JSON (``to_json``),
and ``drawing`` reads it back with ``store.build``, so a redraw from ``rows/<id>.json`` reads every number by
attribute. Fields in the order the rows hold them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ictd_interp.analyses.metrics.intervals import Interval, Paired
from ictd_interp.analyses.metrics.neu import NeuGrid


@dataclass(frozen=True)
class MarginSetting:
    """Assumption 5.1 in one (feature kind, scale): how often ``C > 0`` (Wilson interval) and the mean ``C``."""

    kind: str
    scale: float
    fraction_positive: Interval
    C_mean: Interval


@dataclass(frozen=True)
class MarginData:
    tasks: int
    settings: list[MarginSetting]


@dataclass(frozen=True)
class FloorSetting:
    """Theorem 2's floor in one setting: θ*'s depth-limit error (mean over tasks) per context length, and the
    per-task slope of log error on log n."""

    kind: str
    scale: float
    floor_mean: list[float]
    slope: Optional[Interval] = None


@dataclass(frozen=True)
class FloorData:
    lengths: list[int]
    tabular_gap: float
    settings: list[FloorSetting]


@dataclass(frozen=True)
class Theorem3Data:
    """The population NEU grid and the cells where θ* is a finite-(n, L) minimiser among the three."""

    grid: NeuGrid
    minimiser: list[list[int]]


@dataclass(frozen=True)
class ObjectiveWeights:
    objective: str
    cos_A: Interval
    cos_V: Interval


@dataclass(frozen=True, kw_only=True)
class WeightsData:
    """The emergence rows' weight cosines over seeds, per objective, against the rule's threshold ``close``."""

    seeds: int
    close: float
    title: str = "Emergence: trained weights against θ* (lowest layer)"
    objectives: list[ObjectiveWeights]
    judged: bool = True  # False: the cosines are shown beside each other, not held to ``close``


@dataclass(frozen=True)
class Curve:
    step: list[int]
    mean: list[float]


@dataclass(frozen=True)
class DiagonalityData:
    """Kernel diagonality over training: the paired change per objective and the mean curve over seeds."""

    seeds: int
    change: dict[str, Paired]
    curves: dict[str, Curve]


@dataclass(frozen=True)
class ActingData:
    """Greedy regret per policy over ``n_tasks`` MDPs, and the optimal return it is measured from."""

    n_tasks: int
    optimal: Interval
    regret: dict[str, Interval]
