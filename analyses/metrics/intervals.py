"""Intervals a researcher can quote: of a mean over seeds or tasks, and of a paired difference.

Every interval of a mean here is a two-sided Student-t interval, ``mean ± t_{n-1, 0.975} s / sqrt(n)``,
cut to the range the quantity can take where one is given (cosines and correlations ``[-1, 1]``)
(a fraction gets a Wilson score interval, ``proportion_interval``: sound at 0 and 1).
On normal data it covers the true mean with probability 0.95 at every sample size (a percentile
bootstrap over 2-5 seeds covers it only about 50-85 % of the time: ``tests/unit/test_baselines.py``
simulates both). Over hundreds of tasks the t interval is the usual large-sample interval.

Non-finite values (a diverged seed, an ``inf`` error) are never dropped silently: the mean of a sample
holding one is not finite, and the count is reported (``n_nonfinite``) so a report can say
"1 of 5 seeds diverged".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Optional

import numpy as np
from scipy import stats

LEVEL = 0.95
METHOD = "Student-t 95% interval of the mean"
COSINE = (-1.0, 1.0)  # the range of a cosine or a correlation: ``t_interval(..., bounds=COSINE)``
NONNEGATIVE = (0.0, math.inf)  # an error, a distance


LARGE = 1e6  # from here on a fixed-point number is written in scientific form (a diverged model's error)


@dataclass(frozen=True)
class Interval:
    """A mean with its two-sided Student-t interval over ``n`` values (``n_nonfinite`` of them not finite:
    then ``mean``, ``lo`` and ``hi`` are NaN)."""

    mean: float
    lo: float
    hi: float
    n: int
    n_nonfinite: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self, spec: str = ".3g") -> str:
        """``0.630 [0.601, 0.659]``; with non-finite values ``not finite (1 of 5 diverged)``."""
        if self.n_nonfinite:
            return f"not finite ({self.n_nonfinite} of {self.n} diverged)"
        fixed = spec.endswith("f") and max(abs(self.mean), abs(self.lo), abs(self.hi)) >= LARGE  # never 40 digits
        show = lambda x: format(x, ".3g" if fixed else spec)  # noqa: E731
        if self.n < 2:
            return show(self.mean) + " (one value: no interval)"
        return f"{show(self.mean)} [{show(self.lo)}, {show(self.hi)}]"


def t_interval(
    values: Sequence[float] | np.ndarray, level: float = LEVEL, bounds: Optional[tuple[float, float]] = None
) -> Interval:
    """The mean and its Student-t interval; NaN bounds for fewer than two values. ``bounds``: the range the
    quantity can take (a cosine's ``(-1, 1)``, an error's ``(0, inf)``): the interval is cut to it, which keeps
    its coverage (the true mean lies in the range), so a cosine near 1 never reads ``[0.97, 1.01]``."""
    x = np.asarray(values, dtype=float).ravel()
    n, bad = len(x), int((~np.isfinite(x)).sum())
    if n == 0:
        raise ValueError("values: an interval needs at least one value")
    if bad:
        return Interval(float("nan"), float("nan"), float("nan"), n, bad)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, float("nan"), float("nan"), 1)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * float(x.std(ddof=1)) / math.sqrt(n)
    low, high = (-math.inf, math.inf) if bounds is None else bounds  # (a mean past a bound by rounding stays in)
    return Interval(mean, min(max(mean - half, low), mean), max(min(mean + half, high), mean), n)


@dataclass(frozen=True)
class Paired:
    """``a - b`` per unit (task or seed): the mean difference with its interval, and which side wins."""

    difference: Interval
    verdict: str  # "lower" | "higher" | "undecided": where a's mean lies against b's, by the interval

    def to_dict(self) -> dict[str, Any]:
        return {"difference": self.difference.to_dict(), "verdict": self.verdict}


def paired(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, level: float = LEVEL) -> Paired:
    """The paired comparison of two estimators on the same units. Rule: ``a`` is ``lower`` than ``b``
    when the whole interval of the mean difference lies below 0, ``higher`` when it lies above 0, else
    the sample cannot decide (``undecided``)."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired: both samples need the same units, got {a.shape} and {b.shape}")
    diff = t_interval(a - b, level)
    if diff.n_nonfinite or diff.n < 2:
        verdict = "undecided"
    else:
        verdict = "lower" if diff.hi < 0 else "higher" if diff.lo > 0 else "undecided"
    return Paired(diff, verdict)


def welch(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, level: float = LEVEL) -> Interval:
    """``mean(a) − mean(b)`` of two independent samples with its Welch interval (unequal variances; ``n`` is the
    two samples' sizes together)."""
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"welch: each sample needs at least two values, got {len(a)} and {len(b)}")
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if va + vb > 0 else len(a) + len(b) - 2
    half = float(stats.t.ppf(0.5 + level / 2, df)) * math.sqrt(va + vb)
    diff = float(a.mean() - b.mean())
    return Interval(diff, diff - half, diff + half, len(a) + len(b))


def ratio_interval(num: np.ndarray, den: np.ndarray, level: float = LEVEL) -> Interval:
    """``mean(num) / mean(den)`` over paired values with its delta-method t interval (the standard error of
    ``mean(num − R den) / mean(den)``); NaN bounds where ``mean(den)`` is 0, non-finite values counted."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    bad = int((~np.isfinite(num) | ~np.isfinite(den)).sum())
    n = len(num)
    if bad or n < 2 or den.mean() == 0:
        ratio = math.nan if bad or den.mean() == 0 else float(num.mean() / den.mean())
        return Interval(ratio, math.nan, math.nan, n, bad)
    ratio = float(num.mean() / den.mean())
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * np.std(num - ratio * den, ddof=1) / math.sqrt(n) / den.mean())
    return Interval(ratio, ratio - abs(half), ratio + abs(half), n)


def describe_nonfinite(names: Sequence[str], values: Sequence[Optional[float]]) -> Optional[str]:
    """``"1 of 5 seeds diverged (cell-s3)"`` or None when every value is finite."""
    bad = [n for n, v in zip(names, values) if v is None or not math.isfinite(v)]
    return f"{len(bad)} of {len(names)} seeds diverged ({', '.join(bad)})" if bad else None


def proportion_interval(successes: int, n: int, level: float = LEVEL) -> Interval:
    """A fraction ``successes / n`` with its Wilson score interval (sound at 0 and n, unlike mean ± t s/√n)."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"proportion: need 0 <= successes <= n and n >= 1, got {successes} of {n}")
    z = float(stats.norm.ppf(0.5 + level / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(p, min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half)), n)  # p inside, rounding aside
