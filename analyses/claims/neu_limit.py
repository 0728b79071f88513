"""Theorem 3's row: θ* minimises the norm of the expected TD update (NEU) in the limit n → ∞, then L → ∞. The
population NEU grid (``ictd_interp.analyses.metrics.neu.neu_grid``) of θ*, the zero predictor and a trained model, read
by a rule written for a limit: the upper end of θ*'s calibrated interval falls at every step of n to a small share of
the zero predictor's, and each step says whether the NEU itself is shown to fall."""

from __future__ import annotations

import math
from typing import Optional

from ictd_interp.analyses.claims.budget import Budget
from ictd_interp.analyses.claims.claim import Claim
from ictd_interp.analyses.claims.figure_data import Theorem3Data
from ictd_interp.analyses.claims.theory import GAMMA
from ictd_interp.analyses.metrics.neu import NeuCell, NeuGrid, neu_grid
from ictd_interp.analyses.metrics.neu_intervals import DETECT, FLIPS, NeuDifference
from ictd_interp.analyses.summary.store import to_json
from ictd_interp.config import ICTDConfig, TaskDistribution
from ictd_interp.models import HookedICTDTransformer

LIMIT_SHARE = 1e-3  # at the largest (n, L), θ*'s |NEU| must be below this share of the zero predictor's


def _limit_rule(grid: NeuGrid) -> tuple[bool, list[str]]:
    """Theorem 3 as stated, a limit in n then L: at the largest depth the upper end of θ*'s calibrated
    interval falls at every step of n (a diverged estimate counting as infinite) to below ``LIMIT_SHARE`` of
    the zero predictor's NEU at the largest n, and at the largest (n, L) θ* is below the zero predictor and the
    trained model (paired intervals)."""
    rows = grid.rows
    L, lengths = max(r.depth for r in rows), sorted({r.context_len for r in rows})
    cell = {(r.context_len, r.depth): r for r in rows}
    far = cell[(lengths[-1], L)]
    ladder = [_bound(cell[(n, L)].theta_star) for n in lengths]
    relative = ladder[-1] / far.zero.estimate if far.zero.estimate > 0 else math.inf  # a zero NEU of 0: no share
    falls = all(b < a for a, b in zip(ladder, ladder[1:])) and relative < LIMIT_SHARE
    below_zero = far.theta_star_minus_zero.verdict == "lower"
    versus_model = far.theta_star_minus_model
    below_model = versus_model is None or versus_model.verdict == "lower"
    lines = [
        f"n = {lengths[-1]}, L = {L} (the cell nearest the theorem's regime): θ* {_calibrated(far.theta_star)}"
        f", zero predictor {far.zero.text()}; θ* − zero {far.theta_star_minus_zero.text()}"
        + (f"; θ* − trained model {versus_model.text()}" if versus_model is not None else ""),
        f"at L = {L}, the upper end of θ*'s calibrated 95% interval from n = {lengths[0]} to n = {lengths[-1]}: "
        + ", ".join(f"{b:.1e} (n = {n})" for b, n in zip(ladder, lengths))
        + (
            f" — it falls at every step of n, to {relative:.1e} of the zero predictor's NEU"
            if falls
            else f" — it does not fall at every step of n to below {LIMIT_SHARE:g} of the zero predictor's NEU"
        ),
        _step_power([cell[(n, L)].theta_star for n in lengths], lengths),
    ]
    below = [f"(n = {r.context_len}, L = {r.depth})" for r in rows if r.theta_star.hi < 0]
    if below:
        lines.append(
            f"θ*'s jackknife interval lies below 0 at {', '.join(below)}, although NEU ≥ 0: near θ* the "
            "expected update is about 0, where the U-statistic is degenerate and the jackknife under-covers; "
            "the rule reads the calibrated interval, which never goes below 0"
        )
    return falls and below_zero and below_model, lines


def _tested(rows: list[NeuCell]) -> list[str]:
    """θ*'s NEU at each cell by the test with power beside the calibrated interval: the U-statistic against its own
    null (sign flips: is E u = 0?), whether θ* is a stationary point (the mean update's largest |z|), and the tasks
    the test needs to tell NEU = 0.01 from 0 with 80% power (``neu_intervals``); empty for a grid saved before."""
    cells = [r for r in rows if math.isfinite(r.theta_star.null_p)]
    if not cells:
        return []
    parts = [
        f"(n = {r.context_len}, L = {r.depth}) p {r.theta_star.null_p:.3g}, max |z| {r.theta_star.max_z:.1f}, "
        f"{r.theta_star.tasks_to_detect:,} tasks to detect {DETECT:g}"
        for r in cells
    ]
    stationary = [f"(n = {r.context_len}, L = {r.depth})" for r in cells if r.theta_star.null_p >= 0.05]
    return [
        f"θ*'s expected update tested against 0 (U-statistic against its own null by {FLIPS:,} sign flips; "
        f"{cells[0].theta_star.n_tasks:,} tasks per cell): " + "; ".join(parts),
        "θ* is not rejected as a stationary point (p ≥ 0.05) at "
        + (", ".join(stationary) if stationary else "no cell")
        + "; where the tasks needed exceed the cell's, a non-rejection cannot tell NEU = 0.01 from 0",
    ]


def _calibrated(estimate) -> str:
    """``-1.3e-03 (calibrated 95% [0, 2.1e-03])``: the U-statistic and the interval the rule reads."""
    if estimate.n_nonfinite or not math.isfinite(estimate.calibrated_hi):
        return estimate.text()
    return f"{estimate.estimate:.2e} (calibrated 95% [{estimate.calibrated_lo:.1e}, {estimate.calibrated_hi:.1e}])"


def _step_power(ladder: list, lengths: list[int]) -> str:
    """Which steps of n show θ*'s NEU itself falling (the longer context's calibrated interval wholly below the
    shorter's) and, for the rest, the smallest NEU at the shorter context a fall from it to 0 must exceed to be
    shown with this many tasks (its interval's upper end: below it the sample cannot tell the NEU from 0)."""
    shown, blind = [], []
    for (a, n), (b, m) in zip(zip(ladder, lengths), zip(ladder[1:], lengths[1:])):
        if b.calibrated_hi < a.calibrated_lo:
            shown.append(f"{n} → {m}")
        else:
            where = (
                f"within [{a.calibrated_lo:.1e}, {a.calibrated_hi:.1e}]"
                if math.isfinite(a.calibrated_hi)
                else "not finite: θ* diverges there"
            )
            blind.append(f"{n} → {m} (NEU at n = {n} {where})")
    return (
        "the NEU itself is shown to fall at "
        + (", ".join(shown) or "no step")
        + (
            f"; at {', '.join(blind)} the tasks cannot tell a fall from none: only the bound falls there, and a "
            "fall smaller than the interval's upper end is invisible to this sample"
            if blind
            else ""
        )
    )


def _bound(estimate) -> float:
    """The upper end of an estimate's calibrated interval (infinite when not finite): the scale the rule
    compares, never a noise draw's sign."""
    value = estimate.calibrated_hi
    return value if not estimate.n_nonfinite and math.isfinite(value) else math.inf


def _not_minimiser(rows: list[NeuCell], beaten: list[NeuCell]) -> str:
    """Where θ* is beaten: ``; not a minimiser at L ≤ L*`` for the largest L* up to which it is beaten at every n
    measured, and the other depths where it is beaten at most n."""
    lengths, depths = sorted({r.context_len for r in rows}), sorted({r.depth for r in rows})
    cells = {(r.context_len, r.depth) for r in beaten}
    lost = {L: sum((n, L) in cells for n in lengths) for L in depths}
    shallow = None
    for L in depths:
        if lost[L] < len(lengths):
            break
        shallow = L
    most = [L for L in depths if (shallow is None or L > shallow) and lost[L] > len(lengths) / 2]
    parts = [f"not a minimiser at L ≤ {shallow} (at every n measured)"] if shallow is not None else []
    parts += [
        f"beaten at {'every n' if lost[L] == len(lengths) else f'{lost[L]} of {len(lengths)} n'} at L = {L}"
        for L in most
    ]
    return "".join(f"; {p}" for p in parts)


def _versus(cell: NeuCell) -> dict[str, NeuDifference]:
    """θ*'s paired differences in a cell, by what θ* is compared with."""
    return {
        "zero": cell.theta_star_minus_zero,
        **({"model": cell.theta_star_minus_model} if cell.theta_star_minus_model is not None else {}),
    }


def _cell_groups(rows: list[NeuCell]) -> tuple[list[NeuCell], list[NeuCell], list[str]]:
    """The cells where θ* is a finite-(n, L) minimiser among the three, is beaten, or is undecided."""
    verdicts = [{d.verdict for d in _versus(r).values()} for r in rows]
    minimiser = [r for r, v in zip(rows, verdicts) if v == {"lower"}]
    beaten = [r for r, v in zip(rows, verdicts) if "higher" in v]
    undecided = [r for r in rows if r not in minimiser and r not in beaten]
    cells = lambda rs: ", ".join(f"(n = {r.context_len}, L = {r.depth})" for r in rs) or "none"  # noqa: E731
    return (
        minimiser,
        beaten,
        [
            f"θ* below both the zero predictor and the trained model (a finite-(n, L) minimiser among the three) at "
            f"{cells(minimiser)}",
            f"θ* above one of them (not a minimiser) at {cells(beaten)}",
            "undecided at "
            + (
                ", ".join(
                    f"(n = {r.context_len}, L = {r.depth}: "
                    + "; ".join(f"vs {k} {d.text()}" for k, d in _versus(r).items() if d.verdict == "undecided")
                    + ")"
                    for r in undecided
                )
                or "none"
            ),
        ],
    )


def theorem3(budget: Budget, model: Optional[HookedICTDTransformer]) -> Claim:
    cfg = ICTDConfig(d_features=4, n_layers=1, tied=model.cfg.tied if model is not None else True, dtype="float64")
    dist = TaskDistribution(d_features=4, gamma=GAMMA)
    grid = neu_grid(
        cfg,
        dist,
        model,
        lengths=budget.neu_lengths,
        depths=budget.neu_depths,
        n_tasks=budget.neu_tasks,
        seed=3,
        progress=True,
    )
    return theorem3_claim(grid, budget.neu_model if model is not None else "none")


def theorem3_claim(grid: NeuGrid, name: str) -> Claim:
    """The Theorem 3 row from its grid (``name``: the trained model compared, or ``none``): a re-render needs no
    recomputation."""
    holds, numbers = _limit_rule(grid)
    minimiser, beaten, groups = _cell_groups(grid.rows)
    numbers += groups + _tested(grid.rows)
    verdict = (
        "consistent with the limit" + _not_minimiser(grid.rows, beaten)
        if holds
        else "not shown: the limit rule is not met on this grid"
    )
    lengths, depths = sorted({r.context_len for r in grid.rows}), sorted({r.depth for r in grid.rows})
    comparisons = sum(len(_versus(r)) for r in grid.rows)
    tested = sum(d.note is None for r in grid.rows for d in _versus(r).values())  # decided by an interval
    return Claim(
        "theorem3",
        "Theorem 3: θ* minimises the norm of the expected update (NEU) in the limit of long contexts "
        "(n → ∞) and then deep models (L → ∞); nothing is claimed at a finite (n, L).",
        "Population NEU ‖E u‖² (the unbiased U-statistic over all "
        "pairs of tasks, `ictd_interp.analyses.metrics.neu.population_neu`, "
        "exact per-task gradients from the state-space forward) "
        "of θ*, the zero predictor (also in closed form) and the "
        f"trained `{name}` (its tied layer run L times) on n ∈ {lengths} × L ∈ {depths}, "
        f"{grid.n_tasks:,} Boyan tasks (d = 4, γ = {GAMMA}) × {grid.windows_per_task} windows per cell, the same tasks "
        f"for the three models (paired); 95% intervals by the delete-one-group jackknife over {grid.groups} groups, "
        "and "
        "for θ*'s NEU alone an interval calibrated near 0 "
        "(`ictd_interp.analyses.metrics.neu_intervals.calibrated_interval`).",
        "a finite grid can only approach the limit, so the verdict reads **consistent with the limit** when (1) at "
        "the largest depth the upper end of θ*'s calibrated 95% interval for its NEU (Wald's ellipsoid for the mean "
        "update, which covers at 0 too, where the jackknife does not) falls at every step of n "
        f"(a diverging estimate counts as infinite) to below "
        f"{LIMIT_SHARE:g} of the zero predictor's NEU at the largest n (NEU ≥ 0, and 0 only at a fixed point of "
        "the expected update), and (2) at the largest (n, L) θ*'s NEU is below the zero predictor's and the trained "
        "model's (paired intervals of the differences exclude 0). Every other cell says whether θ* is a "
        "finite-(n, L) minimiser among the three, is not, or is undecided — with the tasks a decision would need "
        "(the half-width shrinks at least as 1/√N, where the variance is finite). A cell whose per-task updates "
        f"exceed 1e50 (the model's values diverge) has no interval and ranks above any finite one. Of the "
        f"{comparisons} comparisons, {tested} have an interval; at 95%, about {0.05 * tested:.0f} of those are "
        "expected to exclude 0 by chance: a single cell decides nothing alone.",
        verdict,
        numbers,
        to_json(Theorem3Data(grid, [[r.context_len, r.depth] for r in minimiser])),
        "theorem3",
    )
