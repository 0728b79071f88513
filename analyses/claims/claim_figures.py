"""The claims report's figures, each drawn from its row's saved ``data`` (so a re-run redraws them without
recomputing anything)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from matplotlib.ticker import FuncFormatter

from ictd_interp.analyses.claims.claim import Claim
from ictd_interp.analyses.claims.figure_data import (
    ActingData,
    DiagonalityData,
    FloorData,
    MarginData,
    Theorem3Data,
    WeightsData,
)
from ictd_interp.analyses.figures.style import Figure, legend_outside, log_axis, wrapped
from ictd_interp.analyses.metrics.intervals import Interval
from ictd_interp.analyses.summary.store import build


def _axes(size: tuple[float, float] = (7.5, 3.8)):
    fig = Figure(figsize=size, layout="constrained")
    return fig, fig.add_subplot()


def _errorbars(ax, x, intervals: list[Interval], **kwargs) -> None:
    means = np.asarray([i.mean for i in intervals], dtype=float)
    lo, hi = np.asarray([i.lo for i in intervals], dtype=float), np.asarray([i.hi for i in intervals], dtype=float)
    below, above = np.clip(np.nan_to_num(means - lo), 0, None), np.clip(np.nan_to_num(hi - means), 0, None)
    ax.errorbar(x, means, yerr=[below, above], capsize=3, **kwargs)


def _assumption51(data: dict[str, Any]) -> Figure:
    margin = build(MarginData, data)
    fig, ax = _axes((7, 3.8))
    for kind, marker in (("uniform", "o"), ("onehot", "s")):
        rows = [r for r in margin.settings if r.kind == kind]
        _errorbars(
            ax, [r.scale for r in rows], [r.fraction_positive for r in rows], marker=marker, label=f"{kind} features"
        )
    ax.set(
        title="Assumption 5.1: how often the margin C is positive",
        xlabel="feature scale β (kernel inverse temperature β²)",
        ylabel=f"fraction of {margin.tasks} tasks with C > 0",
        ylim=(-0.05, 1.05),
        xscale="log",
    )
    log_axis(ax.xaxis)
    legend_outside(ax, title="95% Wilson interval")
    return fig


def _theorem2_floor(data: dict[str, Any]) -> Figure:
    floor = build(FloorData, data)
    fig, ax = _axes((7.5, 4.0))
    lengths = np.asarray(floor.lengths, dtype=float)
    styles = [("o", "-"), ("s", "--"), ("^", "-."), ("x", ":")]
    for row, (marker, ls) in zip(floor.settings, styles * len(floor.settings)):
        ax.plot(lengths, row.floor_mean, marker=marker, ls=ls, mfc="none", label=f"{row.kind} ×{row.scale:g}")
    first = floor.settings[0].floor_mean[0]
    ax.plot(lengths, first * np.sqrt(lengths[0] / lengths), color="grey", ls=":", label="∝ 1/√n")
    ax.set(
        title="Theorem 2: θ*'s depth limit against context length",
        xlabel="context length n",
        ylabel="sup error of θ*'s depth limit",
        xscale="log",
        yscale="log",
    )
    log_axis(ax.xaxis)
    log_axis(ax.yaxis)
    legend_outside(
        ax, title="features (mean over tasks);\none kind's scales coincide:\nthe limit is the tabular\nTD fixed point"
    )
    return fig


def _theorem3(data: dict[str, Any]) -> Figure:
    """θ*'s NEU relative to the zero predictor's per (n, L): below 1, θ* is lower; a limit at 0 is Theorem 3.
    Cells beyond the axis (θ*'s map still diverging at short contexts) are drawn as triangles on its top edge."""
    fig, ax = _axes((8, 4.2))
    grid, top = build(Theorem3Data, data).grid, 1e3
    depths = sorted({r.depth for r in grid.rows})
    for k, L in enumerate(depths):
        cells = sorted((r for r in grid.rows if r.depth == L), key=lambda r: r.context_len)
        x = np.asarray([r.context_len for r in cells], dtype=float) * (1 + 0.05 * (k - len(depths) / 2))
        zero = np.asarray([r.zero_closed_form.estimate for r in cells])
        calibrated = all(np.isfinite(r.theta_star.calibrated_hi) for r in cells)  # grids saved before: jackknife
        keys = ("estimate", "calibrated_lo", "calibrated_hi") if calibrated else ("estimate", "lo", "hi")
        est, lo, hi = (np.asarray([getattr(r.theta_star, key) for r in cells], dtype=float) / zero for key in keys)
        inside = np.isfinite(est) & (np.abs(est) < top)
        line = ax.errorbar(
            x[inside],
            est[inside],
            yerr=[np.clip(est - lo, 0, None)[inside], np.clip(hi - est, 0, None)[inside]],
            marker="o",
            capsize=3,
            label=f"L = {L}",
        )
        if (~inside).any():
            ax.plot(x[~inside], np.full((~inside).sum(), top), "^", color=line[0].get_color(), clip_on=False)
    ax.axhline(1, color="grey", ls=":", lw=1)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.set_ylim(-1e-1, top)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set(
        title="Theorem 3: θ*'s population NEU relative to the zero predictor's",
        xlabel="context length n",
        ylabel="NEU(θ*) / NEU(zero predictor)\n(1: as high; 0: θ*'s NEU vanishes; symlog)",
        xscale="log",
    )
    log_axis(ax.xaxis)
    legend_outside(
        ax,
        title=f"depth ({grid.n_tasks:,} tasks per cell;\npoint: the unbiased U-statistic,\n"
        "below 0 only by noise;\nbar: calibrated 95% interval,\nnever below 0;\n"
        "▲ off the axis: θ* diverges there)",
    )
    return fig


def _emergence_weights(data: dict[str, Any]) -> Figure:
    weights = build(WeightsData, data)
    fig, ax = _axes()
    rows = weights.objectives
    x = np.arange(len(rows))
    for offset, name, key in ((-0.12, "cos(A, A*)", "cos_A"), (0.12, "cos(V, V*)", "cos_V")):
        _errorbars(ax, x + offset, [getattr(r, key) for r in rows], fmt="o", label=name)
    if weights.judged:
        ax.axhline(weights.close, color="grey", ls=":", label=f"rule: interval above {weights.close}")
    ax.set_xticks(x, [r.objective.replace("-", "-\n", 1) if len(r.objective) > 10 else r.objective for r in rows])
    ax.set(xlabel="pretraining objective", ylabel="cosine with θ*", ylim=(-1.1, 1.1))
    ax.set_title(wrapped(weights.title, 60))
    legend_outside(ax, title=f"mean over {weights.seeds} seeds, 95% t interval")
    return fig


def _emergence_diagonality(data: dict[str, Any]) -> Figure:
    diagonality = build(DiagonalityData, data)
    fig, ax = _axes()
    for objective, curve in diagonality.curves.items():
        ax.plot(curve.step, curve.mean, label=objective)
    ax.set(
        title=f"Kernel diagonality over training (mean over {diagonality.seeds} seeds)",
        xlabel="training step",
        ylabel="attention mass on the query's own state",
    )
    legend_outside(ax, title="objective")
    return fig


def _control_acting(data: dict[str, Any]) -> Figure:
    """Greedy regret per policy (mean over tasks, t interval): lower is better, 0 is optimal. Where the behaviour
    is the uniform random policy (the same regret on every task), one row shows both."""
    acting = build(ActingData, data)
    same = "behaviour" in acting.regret and acting.regret.get("random") == acting.regret["behaviour"]
    names = [n for n in acting.regret if not (same and n == "random")]
    fig, ax = _axes((8, 0.45 * len(names) + 1.6))
    y = np.arange(len(names))[::-1]
    intervals = [acting.regret[n] for n in names]
    names = ["behaviour = uniform random" if same and n == "behaviour" else n for n in names]
    means = np.asarray([i.mean for i in intervals], dtype=float)
    lo, hi = np.asarray([i.lo for i in intervals], dtype=float), np.asarray([i.hi for i in intervals], dtype=float)
    ax.errorbar(means, y, xerr=[np.nan_to_num(means - lo), np.nan_to_num(hi - means)], fmt="o", capsize=3)
    ax.axvline(0, color="grey", ls=":", lw=1)
    ax.set_yticks(y, names)
    ax.set(
        title=f"Acting on in-context action values ({acting.n_tasks} random MDPs)",
        xlabel="regret J(π*) − J(π) of the greedy policy\n(mean over tasks, 95% t interval; 0 = optimal)",
    )
    return fig


DRAW: dict[str, Callable[[dict[str, Any]], Figure]] = {
    "assumption51": _assumption51,
    "theorem2_floor": _theorem2_floor,
    "theorem3": _theorem3,
    "emergence_weights": _emergence_weights,
    "emergence_diagonality": _emergence_diagonality,
    "control_emergence": _emergence_weights,
    "control_acting": _control_acting,
}


def draw(claim: Claim) -> Figure:
    return DRAW[claim.figure](claim.data)
