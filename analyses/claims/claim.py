"""A claim of the paper (or of this project) with what was run, its numbers and a verdict by a stated rule."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

HOLDS, FAILS = "holds", "fails"


@dataclass
class Claim:
    """One row of the claims report.

    Args:
        id: a short stable name (``theorem1``, ``assumption51`` ...).
        claim: the claim in words.
        run: what was run to test it (the command or function and the sample: tasks, seeds, grid).
        rule: the rule the verdict follows (which interval must exclude what).
        verdict: ``holds``, ``fails``, ``holds only when ...`` (the condition found), or ``not measured ...``.
        numbers: the numbers behind the verdict, in words, with their intervals and samples.
        data: the same numbers, machine-readable.
        figure: the file name of its figure under ``figures/`` (none for some rows).
    """

    id: str
    claim: str
    run: str
    rule: str
    verdict: str
    numbers: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    figure: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def conditional(holds: Mapping[Any, bool], describe: Callable[[list], str]) -> str:
    """``holds`` when every setting holds, ``fails`` when none does, else ``holds only when`` the settings
    where it holds, described by ``describe``."""
    good = [k for k, ok in holds.items() if ok]
    if len(good) == len(holds):
        return HOLDS
    return FAILS if not good else f"holds only when {describe(good)}"


def thresholds(good: list[tuple[float, ...]], grid: list[tuple[float, ...]], names: tuple[str, ...]) -> str:
    """The settings of a grid where a claim holds, as lower thresholds (``n ≥ 100 and L ≥ 12``) when they are
    exactly the grid's points above those thresholds, else listed."""
    lows = tuple(min(g[i] for g in good) for i in range(len(names)))
    above = {g for g in grid if all(g[i] >= lows[i] for i in range(len(names)))}
    if above == set(good):
        parts = [f"{name} ≥ {low:g}" for name, low, values in zip(names, lows, zip(*grid)) if low > min(values)]
        return " and ".join(parts) if parts else "always"
    return "at " + ", ".join("(" + ", ".join(f"{n} = {v:g}" for n, v in zip(names, g)) + ")" for g in sorted(good))
