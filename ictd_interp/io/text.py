"""How a number is written for a reader, the same in every table and report (torch-free)."""

from __future__ import annotations

import math
from typing import Optional

LARGE = 1e6  # from here a number is written in scientific notation: 7.5e+25, not 26 digits


def shown(value: Optional[float], spec: str = ".3f") -> str:
    """``value`` in ``spec``; past ``LARGE`` in magnitude with three significant digits in scientific notation;
    "n/a" for None and "not finite" for a NaN or an infinity."""
    if value is None:
        return "n/a"
    if not math.isfinite(value):
        return "not finite"
    return f"{value:.3g}" if abs(value) >= LARGE else format(value, spec)
