"""Intervals for the population NEU (``metrics.neu``) from per-task updates ``u_i``: the U-statistic

    U = (||sum_i u_i||^2 - sum_i ||u_i||^2) / (N (N - 1)) = 2/(N(N-1)) sum_{i<j} u_i . u_j,

unbiased for ``||E u||^2`` at every ``N``. Its interval: the delete-one-group jackknife over ``groups``
equal groups of tasks (Student t with ``groups - 1`` degrees of freedom); differences of two models on the same
tasks get the jackknife of the difference (paired). Near a fixed point of the expected update (``E u = 0``) the
U-statistic is degenerate (a weighted chi-square, not a normal) and the jackknife under-covers, so every
estimate also carries a **calibrated** interval for ``||E u||^2`` that holds at 0 too: the mean ``u_bar``
lies within ``r = sqrt(q lambda_max(S) / N)`` of ``E u`` with probability 95% (Hotelling's ellipsoid for the
mean, ``q = p (N - 1) / (N - p) F_{p, N-p}(95%)``, ``p`` parameters, ``S`` the sample covariance, inside its
enclosing ball: exact for normal updates, asymptotic otherwise, and ``chi2_p`` in place of ``q`` when ``N <= p``),
hence ``||E u||^2`` lies in ``[max(0, ||u_bar|| - r)^2, (||u_bar|| + r)^2]``: never below 0, conservative.
A cell whose interval is too wide says how many tasks would make it narrow enough (``tasks_needed``: the
half-width scales at least as fast as ``1/sqrt(N)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
from scipy import stats

GROUPS = 32  # jackknife groups of the interval


@dataclass(frozen=True, kw_only=True)  # fields in summary.json's order
class NeuEstimate:
    """A population NEU (the U-statistic) with its delete-one-group jackknife interval over ``groups`` groups
    of ``n_tasks`` tasks, and the calibrated interval ``[calibrated_lo, calibrated_hi]`` (module docstring;
    NaN in grids saved before it existed); ``n_nonfinite`` tasks diverged (then every number is NaN and
    ``groups`` is None)."""

    estimate: float
    lo: float
    hi: float
    half_width: float
    n_tasks: int
    groups: Optional[int] = None
    n_nonfinite: int = 0
    calibrated_lo: float = math.nan
    calibrated_hi: float = math.nan
    null_p: float = math.nan  # the U-statistic against its own null E u = 0 (``u_test``): sign-flip p-value
    max_z: float = math.nan  # the mean update's largest |z| over parameters: ≲ 3 at a stationary point
    tasks_to_detect: Optional[int] = None  # tasks for 80% power to tell NEU = DETECT from 0 (``tasks_to_detect``)

    def text(self) -> str:
        """``1.52e-03 [1.41e-03, 1.63e-03]``, or why there is no number."""
        if self.n_nonfinite:
            return f"not finite ({self.n_nonfinite} of {self.n_tasks} tasks diverge)"
        return f"{self.estimate:.2e} [{self.lo:.2e}, {self.hi:.2e}]"


@dataclass(frozen=True, kw_only=True)
class NeuDifference:
    """``NEU(a) - NEU(b)`` on the same tasks with its paired jackknife interval. ``verdict``: ``lower`` or
    ``higher`` when the interval excludes 0, else ``undecided`` with the ``tasks_needed`` to decide; ``note``
    says why there is no number (one side's values diverge)."""

    estimate: float
    lo: float
    hi: float
    half_width: float
    verdict: str
    tasks_needed: Optional[int]
    note: Optional[str] = None

    def text(self) -> str:
        if self.note is not None:
            return f"{self.verdict} ({self.note})"
        need = (
            f"; {self.tasks_needed:,} tasks would decide were this estimate the true value" if self.tasks_needed else ""
        )
        return f"{self.estimate:+.1e} [{self.lo:+.1e}, {self.hi:+.1e}]: {self.verdict}{need}"


def _u_stat(u: np.ndarray) -> float:
    total = u.sum(0)
    n = len(u)
    return float((total @ total - (u * u).sum()) / (n * (n - 1)))


def jackknife(per_group: list[np.ndarray], stat, level: float = 0.95) -> tuple[float, float]:
    """``stat`` over all tasks and the half-width of its delete-one-group jackknife t interval."""
    full = stat(np.concatenate(per_group))
    g = len(per_group)
    leave = np.array([stat(np.concatenate(per_group[:k] + per_group[k + 1 :])) for k in range(g)])
    se = math.sqrt((g - 1) / g * ((leave - leave.mean()) ** 2).sum())
    half = float(stats.t.ppf(0.5 + level / 2, g - 1)) * se
    return full, half


# A per-task update this large means the model's values diverge (its NEU is beyond 1e100): sums of squares over
# 16k tasks and the jackknife's squared deviations would pass float64's range, so no interval is attempted.
OVERFLOW = 1e50


def _diverged(u: np.ndarray) -> np.ndarray:
    """Tasks whose update is not finite or too large to square in float64."""
    with np.errstate(invalid="ignore", over="ignore"):
        return ~np.isfinite(u).all(1) | (np.abs(u).max(1) > OVERFLOW)


def calibrated_interval(u: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """``||E u||^2`` lies in ``[max(0, ||u_bar|| - r)^2, (||u_bar|| + r)^2]`` (module docstring: the confidence
    ellipsoid for the mean inside its enclosing ball), whatever ``E u``, 0 included, where the jackknife
    under-covers. ``r^2 = lambda_max(S) q / N`` with ``q`` Hotelling's ``p (N - 1) / (N - p) F_{p, N-p}`` when
    ``N > p`` (exact for normal updates, conservative through the ball) and ``chi2_p`` otherwise (asymptotic)."""
    n, p = u.shape
    if n < 2:
        raise ValueError(f"calibrated_interval: needs at least 2 tasks, got {n}")
    mean = u.mean(0)
    top = float(np.linalg.eigvalsh(np.atleast_2d(np.cov(u, rowvar=False)))[-1])
    q = p * (n - 1) / (n - p) * float(stats.f.ppf(level, p, n - p)) if n > p else float(stats.chi2.ppf(level, p))
    r = math.sqrt(q * max(top, 0.0) / n)
    norm = float(np.linalg.norm(mean))
    return max(0.0, norm - r) ** 2, (norm + r) ** 2


def neu_interval(u: np.ndarray, groups: int = GROUPS) -> NeuEstimate:
    """The U-statistic of per-task updates ``u [task, parameter]`` with its jackknife and calibrated
    intervals; tasks whose update diverges (``_diverged``) make the cell not finite, counted."""
    n_bad = int(_diverged(u).sum())
    if n_bad:
        nan = float("nan")
        return NeuEstimate(estimate=nan, lo=nan, hi=nan, half_width=nan, n_tasks=len(u), n_nonfinite=n_bad)
    full, half = jackknife(np.array_split(u, groups), _u_stat)
    low, high = calibrated_interval(u)
    return NeuEstimate(
        null_p=u_test(u),
        max_z=stationary_z(u),
        tasks_to_detect=tasks_to_detect(u),
        estimate=full,
        lo=full - half,
        hi=full + half,
        half_width=half,
        n_tasks=len(u),
        groups=groups,
        calibrated_lo=low,
        calibrated_hi=high,
    )


FLIPS = 2000  # sign flips of the U-statistic's null
DETECT = 0.01  # the NEU a test should tell from 0 (``tasks_to_detect``)


def u_test(u: np.ndarray, flips: int = FLIPS, seed: int = 0) -> float:
    """The p-value of ``E u = 0`` by the U-statistic against its own null: under the null (updates symmetric about
    0) flipping each task's sign leaves its distribution unchanged, so the share of ``flips`` seeded sign flips whose
    U-statistic reaches the observed one (the observed counted once) is an exact-size test, degenerate null and all.
    """
    eps = np.random.default_rng(seed).choice([-1.0, 1.0], size=(flips, len(u)))
    sums = eps @ u  # [flip, parameter]
    n, squares = len(u), float((u * u).sum())
    null = ((sums * sums).sum(1) - squares) / (n * (n - 1))
    return float((1 + (null >= _u_stat(u)).sum()) / (flips + 1))


def stationary_z(u: np.ndarray) -> float:
    """The largest ``|mean / (sd / sqrt(N))|`` over the parameters of the mean update: a stationary point of the
    expected update (``E u = 0``) gives values of a few at most; θ* at a finite context is not one where it is large."""
    sd = u.std(0, ddof=1)
    z = np.divide(u.mean(0) * math.sqrt(len(u)), sd, out=np.zeros(u.shape[1]), where=sd > 0)
    return float(np.abs(z).max())


def tasks_to_detect(u: np.ndarray, neu: float = DETECT, alpha: float = 0.05, power: float = 0.8) -> int:
    """Tasks for the one-sided U-test at level ``alpha`` to reject ``E u = 0`` with probability ``power`` when
    ``||E u||^2 = neu``, in the normal approximation: the U-statistic's standard deviation is ``sqrt(a) / N`` under
    the null and ``sqrt(a / N^2 + 4 neu lambda / N)`` at ``neu`` (``a = 2 tr(S^2)``, ``S`` the updates' covariance,
    ``lambda`` its largest eigenvalue: the least favourable direction of ``E u``); the smallest ``N`` with
    ``neu >= z_{1-alpha} sqrt(a) / N + z_power sd(N)``."""
    cov = np.atleast_2d(np.cov(u, rowvar=False))
    a, top = 2 * float((cov * cov).sum()), float(np.linalg.eigvalsh(cov)[-1])
    za, zb = float(stats.norm.ppf(1 - alpha)), float(stats.norm.ppf(power))

    def enough(n: int) -> bool:
        return neu >= za * math.sqrt(a) / n + zb * math.sqrt(a / n**2 + 4 * neu * max(top, 0.0) / n)

    hi = 2
    while not enough(hi):
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi


def difference_interval(u: np.ndarray, u_other: np.ndarray, groups: int = GROUPS) -> NeuDifference:
    """``NEU(u) - NEU(u_other)`` on the same tasks, paired by task, with its jackknife interval and verdict
    (``lower`` / ``higher`` when the interval excludes 0, else ``undecided`` with ``tasks_needed``)."""
    a_bad, b_bad = bool(_diverged(u).any()), bool(_diverged(u_other).any())
    if a_bad or b_bad:
        verdict = "lower" if b_bad and not a_bad else "higher" if a_bad and not b_bad else "undecided"
        nan = float("nan")
        return NeuDifference(
            estimate=nan,
            lo=nan,
            hi=nan,
            half_width=nan,
            verdict=verdict,
            tasks_needed=None,
            note="not finite: " + ("the other model's values diverge" if b_bad else "this model's values diverge"),
        )
    k, both = u.shape[1], np.concatenate([u, u_other], axis=1)
    full, half = jackknife(np.array_split(both, groups), lambda x: _u_stat(x[:, :k]) - _u_stat(x[:, k:]))
    lo, hi = full - half, full + half
    verdict = "lower" if hi < 0 else "higher" if lo > 0 else "undecided"
    need = tasks_needed(len(u), half, abs(full)) if verdict == "undecided" else None
    return NeuDifference(estimate=full, lo=lo, hi=hi, half_width=half, verdict=verdict, tasks_needed=need)


def tasks_needed(n_tasks: int, half_width: float, target: float) -> int | None:
    """Tasks for a half-width below ``target`` if it shrinks as ``1/sqrt(N)`` (it shrinks at least that fast:
    the U-statistic's variance is ``4 mu^T S mu / N + 2 tr(S^2) / N^2``); None when ``target`` is 0."""
    if not target > 0 or not math.isfinite(half_width):
        return None
    return int(math.ceil(n_tasks * max(1.0, (half_width / target) ** 2)))
