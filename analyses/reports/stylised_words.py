"""The words of a stylised model's summary.md that need more than a line: what its layers compute, iterated and
per layer, θ*'s depth limit, Assumption 5.1's margin and kernel diagonality (``reports.stylised.lines`` puts them
in order)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from ictd_interp.analyses.metrics.algorithm_id import IterationMap, LayerReading
from ictd_interp.analyses.metrics.baselines import Baselines
from ictd_interp.analyses.metrics.convergence import GeometricFit
from ictd_interp.analyses.metrics.theta_star_limit import DepthLimit
from ictd_interp.analyses.reports.summary_md import interval_text, layer_sentence
from ictd_interp.analyses.summary.sections import Algorithm, Diagonality, Margin
from ictd_interp.io.text import shown


def algorithm_sentences(alg: Algorithm, base: Baselines, gamma: float) -> list[str]:
    """What the model computes, said in words: against the baselines, iterated, per layer."""
    ext = alg.extrapolation
    lines = [f"- **At its trained depth ({ext.trained_depth} layers).** " + base.sentence]
    if alg.exact_read_unavailable:
        lines.append(
            f"- Its layers are not a fixed linear map of the values ({alg.exact_read_unavailable}): "
            "the TD coefficients below are a least-squares fit in function space."
        )
    lines.append(
        f"- **Iterated beyond its trained depth** the learned layer {ext.verdict} (decided from the "
        f"{ext.verdict_from}; the rule: the map contracts when iterated iff its radius is below 1 on every "
        f"task, diverges iff above 1 on every task, and the layer converges only if its error run deeper also stays "
        f"within 1.5x of its best). MSVE {ext.model[-1]:.3g} at depth {ext.depths[-1]}, "
        f"the depth the spectrum needs to show (θ* {ext.reference[-1]:.3g})." + _neutral_note(alg.layers[-1].iteration)
    )
    if not ext.converges:
        lines.append(
            "  The learned update is a finite-depth estimator, not a convergent TD algorithm: running it "
            "longer makes it worse, whatever its weight cosine with θ* says."
        )
    star = alg.theta_star_map
    if star:
        lines.append(
            f"- θ*'s map on the same tasks {star.verdict} (radius {star.spectral_radius_mean:.3f} on "
            "average"
            + _neutral_note(star, "; ")
            + ")"
            + (
                f"; its depth limit is {_limit_text(star)} from v_π (sup norm, mean over the evaluation "
                f"tasks whose map contracts ({_share(star)}), 95% t interval)."
                if star.fixed_point_error is not None
                else "."
            )
        )
    for first, last, row in distinct_layers(alg.layers):
        sentence = layer_sentence(row, gamma)
        if last > first:
            sentence = sentence.replace(
                f"Layer {first}: ", f"Layers {first}–{last} (one tied layer, the same weights at every depth): ", 1
            )
        lines.append("- " + sentence)
    return lines


def _neutral_note(iteration: Optional[IterationMap], lead: str = " ") -> str:
    neutral = iteration.neutral_tasks if iteration else None
    if not neutral:
        return ""
    text = (
        f"on {neutral} tasks the map has the eigenvalue 1 exactly (a state that is never a source adds it), a "
        "direction the layer never moves, left out of the radius"
    )
    return lead + (text[0].upper() + text[1:] + "." if lead == " " else text)


def distinct_layers(rows: list[LayerReading]) -> list[tuple[int, int, LayerReading]]:
    """Runs of consecutive layers whose readings are the same apart from their index (a tied model's
    layers, read from the one set of weights), as (first, last, reading): said once, not once per layer."""
    runs: list[tuple[int, int, LayerReading]] = []
    for row in rows:
        if runs and replace(runs[-1][2], layer=row.layer) == row:
            runs[-1] = (runs[-1][0], row.layer, runs[-1][2])
        else:
            runs.append((row.layer, row.layer, row))
    return runs


def per_layer_text(values: list, tied: bool) -> str:
    """A per-layer list of numbers, said once for a tied model (its layers share one set of weights)."""
    if tied and values and all(v == values[0] for v in values):
        return f"{values[0]} (tied: one layer's weights at all {len(values)} depths)"
    return ", ".join(str(v) for v in values)


def _limit_text(result: Any) -> str:
    """A fixed point's error (an ``IterationMap`` or a ``LimitRow``) with its interval where it has one."""
    interval = result.fixed_point_error_interval
    return interval_text(interval) if interval else shown(result.fixed_point_error)


def _share(result: IterationMap) -> str:
    radii_below = result.fraction_contracting
    return "all of them" if radii_below is None or radii_below == 1 else f"{radii_below:.0%} of them"


def limit_sentence(limit: DepthLimit, fit: GeometricFit) -> str:
    """θ*'s limit computed (fixed point of its map) beside the geometric fit over a few depths."""
    rows = limit.rows
    floors = ", ".join(
        f"{_limit_text(r)} (n = {r.context_len}, ρ {r.spectral_radius_mean:.3f}"
        + (", the evaluation tasks" if r.tasks == "evaluation" else "")
        + ")"
        for r in rows
    )
    asymptotic = rows[0].spectral_radius_mean
    rate = fit.rate
    same = abs(rate - asymptotic) < 0.02
    longer = [r.context_len for r in rows if r.tasks != "evaluation"]
    where = (
        f"at the training length on the evaluation tasks (the number quoted above), at n = "
        f"{', '.join(map(str, longer))} on {limit.n_tasks} other tasks with longer trajectories"
        if longer and len(longer) < len(rows)
        else f"on {limit.n_tasks} tasks"
    )
    return (
        f"θ*'s limit as depth grows, computed as the fixed point of its map {where} (sup error, mean over the "
        f"contracting tasks with its 95% t interval): {floors}. The "
        f"geometric fit over the report's depths gives rate {rate:.3f} and "
        f"floor {fit.floor:.3f}; "
        + (
            "that rate is the asymptotic one (ρ of the map)."
            if same
            else f"that rate is not the asymptotic one (ρ of θ*'s map ≈ {asymptotic:.3f}): the fit describes only the "
            "depths it saw, and its floor is not the limit."
        )
    )


def margin_sentence(margin: Margin, one_minus_c: float, rate: float, gamma: float) -> str:
    C = margin.theta_star_mean
    if C <= 0:
        return (
            f"The Assumption 5.1 margin of θ*'s kernel, C = {C:+.3f} (mean over the tasks; the worst "
            f"{margin.theta_star_min:+.3f}), is not positive: the population kernel's diagonal is below "
            f"(1+γ)/2 = {(1 + gamma) / 2:.3f}, so Theorem 2's contraction bound (rate 1 − C = {one_minus_c:.3f} "
            f"> 1) does not apply here, and says nothing about θ*'s error, which the fit shows falling with depth "
            f"at rate {rate:.3f} over the depths it saw. On Boyan chains of 10 states with d = 10, one-hot "
            "features (they need d ≥ the number of states) at scale 3 give C > 0 on 95% of tasks and at "
            "scale 5 on all (docs/theory.md §5)."
        )
    return (
        f"The Assumption 5.1 margin of θ*'s kernel, C = {C:+.3f} (mean over the tasks; the worst "
        f"{margin.theta_star_min:+.3f}), is positive: where C > 0, Theorem 2 bounds θ*'s error by a geometric "
        f"rate 1 − C = {one_minus_c:.3f}; the fitted rate is {rate:.3f}."
    )


def diagonality_sentence(diag: Diagonality, model_mean: float) -> str:
    return (
        f"Kernel diagonality (attention mass a query puts on its own state): model {model_mean:.3f}, θ* "
        f"{diag.theta_star:.3f} on the same tasks, against the level (1+γ)/2 = {diag.threshold:.3f} that "
        "Assumption 5.1 asks of the population kernel. θ*'s value is set by the features alone; a model's value "
        "near it says its kernel is as diagonal, not that it is θ*'s kernel. Sharper features raise both."
    )
