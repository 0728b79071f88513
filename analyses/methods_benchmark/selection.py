"""Which cells and methods a benchmark table reads, and each score's mean over seeds with its interval cut to the
score's range: what the report's tables and its figures share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Optional

from ictd_interp.analyses.methods_benchmark.evaluate import CellResult, DirectionScores, EdgeScores
from ictd_interp.analyses.metrics.intervals import Interval, t_interval

CHANCE = 0.5  # an edge ranking's AUROC by chance

BOUNDS = {
    "angle": (0.0, 90.0),
    "max_angle": (0.0, 90.0),
    "circuit_edges": (0.0, float("inf")),
    "iia": (-float("inf"), 1.0),
    "placebo_iia": (-float("inf"), 1.0),
    "cpr": (-float("inf"), float("inf")),
    "cmd": (0.0, float("inf")),
    "cmd_mean": (0.0, float("inf")),
    "cmd_zero": (0.0, float("inf")),
}  # by score name; everything else in [0, 1] (faithfulness at most 1)


def bounded(values: list[float], key: str) -> Interval:
    """The mean over seeds with its t-interval, the bounds cut to the score's range (AUROC, AUPRC, precision,
    recall and R² in [0, 1]; faithfulness and IIA at most 1, below 0 when worse than the baseline they compare to;
    angles in [0°, 90°])."""
    iv = t_interval(values)
    low, high = BOUNDS.get(key, (-float("inf") if key == "faithfulness" else 0.0, 1.0))
    return replace(iv, lo=max(iv.lo, low), hi=min(iv.hi, high)) if iv.n >= 2 else iv


def interval(cells: Sequence[CellResult], case: str, method: str, key: str) -> Interval | None:
    """An edge score (``EdgeScores`` field ``key``) over the case's seeds; None where the method has none."""
    values = [getattr(c.scores[method], key) for c in cells if c.case == case and method in c.scores]
    values = [v for v in values if v is not None]
    return bounded(values, key) if values else None


def variable_interval(
    cells: Sequence[CellResult], case: str, method: str, variable: str, key: str
) -> Optional[Interval]:
    """A direction score (``VariableScores`` field ``key``) of one variable over the case's seeds; None where it
    was not computed (the placebo before TransformerLens 4.3)."""
    values = [getattr(c.scores[method].variables[variable], key) for c in cells if c.case == case]
    return None if None in values else bounded(values, key)


def scored_everywhere(cells: Sequence[CellResult], kind: type) -> list[str]:
    """The methods of ``kind`` scored in every cell: one that failed anywhere is listed apart (``failure_lines``)."""
    return [m for m, score in cells[0].scores.items() if isinstance(score, kind) and all(m in c.scores for c in cells)]


def edge_methods(cells: Sequence[CellResult]) -> list[str]:
    return scored_everywhere(cells, EdgeScores)


def direction_cells(cells: Sequence[CellResult]) -> list[CellResult]:
    """The cells whose case asks where variables lie (not ``graded``: its leaks move every variable off its exact
    direction, so no direction is scored there)."""
    return [c for c in cells if any(isinstance(s, DirectionScores) for s in c.scores.values())]


def direction_methods(cells: Sequence[CellResult]) -> list[str]:
    """The direction methods scored on every cell that asks for directions."""
    asked = direction_cells(cells)
    return scored_everywhere(asked, DirectionScores) if asked else []


def variables_of(cells: Sequence[CellResult], method: str) -> list[str]:
    return list(cells[0].scores[method].variables)


def methods_of(cells: Sequence[CellResult]) -> list[str]:
    """Every method scored on some cell, in the order first seen (a feature method only where features are)."""
    return list(dict.fromkeys(m for c in cells for m in c.scores))


def cases_of(cells: Sequence[CellResult]) -> list[str]:
    return list(dict.fromkeys(c.case for c in cells))
