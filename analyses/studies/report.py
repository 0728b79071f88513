"""A study's report from its CSVs alone: ``study.md`` and ``figures/`` (PNG + SVG).

Every figure shows each condition with its spread over seeds: lines are the mean over seeds and bands
the Student-t 95% interval of that mean (``ictd_interp.analyses.metrics.intervals``); with fewer than ``SEED_LINES``
seeds every seed's own line is drawn too (thin). A seed whose value is not finite is counted and named in the
table, never dropped from a mean.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from ictd_interp.analyses.figures.style import Figure, condition_colours, legend_outside, log_axis, zoom
from ictd_interp.analyses.metrics.intervals import COSINE, METHOD, describe_nonfinite, t_interval
from ictd_interp.analyses.studies import phase, td_map
from ictd_interp.analyses.studies.cells import DONE, FAILED
from ictd_interp.analyses.studies.results import (
    CELL,
    CONDITION,
    DEPTH,
    REFERENCE_NAME,
    STATUS,
    curve_column,
    read_tables,
)
from ictd_interp.analyses.studies.spec import StudySpec, stored_spec
from ictd_interp.analyses.summary.tables import SIGNATURE_COLUMNS, STUDY_COLUMNS, Column, summary_column
from ictd_interp.models.stylised.theta_star import SIGNATURE_INPUTS, SIGNATURE_TEXT

DISCOUNT = summary_column("algorithm.layers.effective_discount")
IN_FAMILY = summary_column("algorithm.layers.in_family")
STAR_DIAGONALITY = summary_column("diagonality.theta_star")

SEED_LINES = 5  # below this many seeds, every seed's own line is drawn beside the mean
FEW_POINTS = 6  # a curve with this many points or fewer gets markers (two evaluations are not a trend)
CAPTION = (
    "Lines: mean over seeds; bands: Student-t 95% interval of that mean (n = number of seeds per condition, "
    "in the table; a cosine's cut to [−1, 1]); on log axes (MSVE) the geometric mean and the interval of "
    "log10 values; thin lines: each seed, when a condition has fewer than 5."
)
COS_A, STAR_MSVE = curve_column("cos_A"), curve_column("theta_star_msve")
INPUT = "input"  # the signature table's long form: which input a weight is on
PALETTE = "colorblind"
# every figure a study's report may draw: one not drawn this time is removed, never left from an earlier report
FIGURES = ("cosines_over_training", "diagonality_over_training", "msve_over_training", "signature", "error_vs_depth")
FIGURES += ("depth_extrapolation", "phase_diagram", "runs_td", "ladder", "discount_vs_gamma")


def band_lines(
    ax,
    data: pd.DataFrame,
    x: str,
    y: str,
    marker: Optional[str] = None,
    log: bool = False,
    bounds: Optional[tuple[float, float]] = None,
) -> dict[str, tuple]:
    """One line per condition (mean over its cells) with its t band, and each seed's own line when the
    condition has fewer than ``SEED_LINES`` cells; returns the colours. A non-finite value makes that
    point's mean non-finite (drawn as a gap), it is never averaged away. ``log``: for errors spanning
    decades (log axes), the mean and interval of ``log10`` values, drawn back (a geometric mean; a
    t band over a few seeds would otherwise reach below 0); ``bounds``: the range of ``y`` (``t_interval``)."""
    colors = condition_colours(list(data[CONDITION].unique()))
    for condition, part in data.groupby("condition", sort=False):
        rows = [
            (
                xv,
                t_interval(_log10(group[y]) if log else group[y].to_numpy(dtype=float), bounds=None if log else bounds),
            )
            for xv, group in part.groupby(x)
        ]
        xs = np.array([r[0] for r in rows])
        mean, lo, hi = (np.array([getattr(r[1], k) for r in rows]) for k in ("mean", "lo", "hi"))
        if log:
            mean, lo, hi = 10.0**mean, 10.0**lo, 10.0**hi
        shown = marker or ("o" if len(xs) <= FEW_POINTS else None)  # a sparse curve shows where it was measured
        ax.plot(xs, mean, color=colors[condition], marker=shown, ms=4, label=condition)
        ax.fill_between(xs, lo, hi, color=colors[condition], alpha=0.2, lw=0)
        if "cell" in part and part[CELL].nunique() < SEED_LINES:
            for _, seed in part.groupby("cell"):
                seed = seed.sort_values(x)
                ax.plot(seed[x], seed[y], color=colors[condition], lw=0.7, alpha=0.5)
    return colors


def _log10(values: pd.Series) -> np.ndarray:
    v = values.to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(v > 0, np.log10(np.where(v > 0, v, 1.0)), np.nan)


def write_report(out_dir: Union[str, Path]) -> Path:
    """Redraw ``figures/`` and ``study.md`` of a study folder from its CSVs."""
    out_dir = Path(out_dir)
    spec = stored_spec(out_dir)
    results, curves, depth, extrapolation = read_tables(out_dir)
    _check_cells(out_dir / "results.csv", results, spec)
    where = phase.fractions(phase.by_cell(results, spec), spec)
    figs = {**_cell_figures(results, curves, depth, extrapolation, spec.name), **_grid_figures(where, spec)}
    (out_dir / "figures").mkdir(exist_ok=True)
    for name, fig in figs.items():
        for ext in ("png", "svg"):
            fig.savefig(out_dir / "figures" / f"{name}.{ext}", dpi=120)
    drop_stale_figures(out_dir / "figures", set(figs))
    path = out_dir / "study.md"
    path.write_text(markdown(spec, results, sorted(figs), phase.markdown(where) + td_map.markdown(where)))
    return path


def drop_stale_figures(folder: Path, drawn: set[str]) -> None:
    """Remove the report's figures (``FIGURES``) that this report did not draw: an earlier report's (a study redrawn
    with more conditions than the ladder figure takes, say) would otherwise sit beside the new ones. Other files in
    the folder are left alone."""
    for name in set(FIGURES) - drawn:
        for ext in ("png", "svg"):
            (folder / f"{name}.{ext}").unlink(missing_ok=True)


def _cell_figures(
    results: pd.DataFrame, curves: pd.DataFrame, depth: pd.DataFrame, extrapolation: pd.DataFrame, title: str
) -> dict[str, Any]:
    """The figures drawn from the cells' own rows: training curves, signature, error against depth."""
    figs = {}
    # weight probes against θ* exist for stylised cells only: their figures show only the cells that have them
    weighted = curves[curves[COS_A].notna()] if COS_A in curves else curves.iloc[:0]
    if not weighted.empty:
        figs["cosines_over_training"] = cells_cosine_curves(weighted, title)
    if not curves.empty:
        figs["diagonality_over_training"] = curve(
            curves,
            "kernel_diagonality_mean",
            "kernel diagonality (fraction)",
            title,
            {"$\\theta^*$ on these tasks (mean over cells)": results[STAR_DIAGONALITY].mean()}
            if STAR_DIAGONALITY in results
            else None,
        )
        figs["msve_over_training"] = msve_curves(curves, title)
    done = results[results[STATUS] == DONE]
    first = SIGNATURE_COLUMNS[0]
    signed = done[done[first].notna()] if first in done else done.iloc[:0]
    if not signed.empty:
        figs["signature"] = signature(signed, title)
    if not depth.empty:
        figs["error_vs_depth"] = cells_error_vs_depth(depth, title)
    if not extrapolation.empty:
        figs["depth_extrapolation"] = cells_depth_extrapolation(extrapolation, title)
    return figs


def _grid_figures(where: list[dict[str, Any]], spec: StudySpec) -> dict[str, Any]:
    """The figures drawn over the grid: where in-context learning and TD emerge, the ladder, the discount."""
    title, figs = spec.name, {}
    if (diagram := phase.phase_diagram(where, spec, title)) is not None:
        figs["phase_diagram"] = diagram
    if (diagram := td_map.td_panels(where, spec, title) or td_map.td_diagram(where, spec, title)) is not None:
        figs["runs_td"] = diagram
    if (panels := td_map.ladder_panels(where, title)) is not None:
        figs["ladder"] = panels
    if (discounts := td_map.discount_figure(where, spec, title)) is not None:
        figs["discount_vs_gamma"] = discounts
    return figs


def _check_cells(path: Path, results: pd.DataFrame, spec: StudySpec) -> None:
    """``results.csv`` lists every cell of the spec (a row even for a cell not started): a table that does not
    is damaged, and a report drawn from it would replace the saved one with a wrong one."""
    expected = {cell.name for cell in spec.cells()}
    found = set(results[CELL].dropna()) if {CELL, STATUS} <= set(results.columns) else set()
    text = path.read_bytes()
    if not text.endswith(b"\n") or (found and results[STATUS].isna().any()):
        raise ValueError(
            f"{path}: cut short (its last row is incomplete); the report is left as it was: run the "
            "study command again to rebuild the tables from its cells"
        )
    if found != expected:
        missing, foreign = sorted(expected - found), sorted(found - expected)
        raise ValueError(
            f"{path}: does not list the study's {len(expected)} cells (missing {len(missing)}"
            + (f", e.g. {missing[0]}" if missing else "")
            + (f"; unknown {foreign[:3]}" if foreign else "")
            + "); the report is left as it was: run the study command again to rebuild the tables "
            "from its cells"
        )


def _cell_mean_over_layers(curves: pd.DataFrame, column: str) -> pd.DataFrame:
    return curves.groupby(["condition", "cell", "step"], sort=False)[column].mean().reset_index()


def cells_cosine_curves(curves: pd.DataFrame, title: str) -> Figure:
    fig = Figure(figsize=(11, 4), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, column, name in zip(axes, ("cos_A", "cos_V"), (r"$\cos(A, A^*)$", r"$\cos(V, V^*)$")):
        data = _cell_mean_over_layers(curves, column)
        band_lines(ax, data, "step", column, bounds=COSINE)
        ax.set(title=f"{name}, mean over layers", xlabel="training step", ylabel="cosine with $\\theta^*$")
        ax.set_ylim(*zoom(curves[["cos_A", "cos_V"]].to_numpy()))
        legend_outside(ax, keep=ax is axes[-1])
    fig.suptitle(f"{title}: weights approach $\\theta^*$ over training")
    return fig


def curve(
    curves: pd.DataFrame, column: str, label: str, title: str, references: Optional[dict[str, float]] = None
) -> Figure:
    """One training curve per condition; ``references`` adds labelled horizontal lines."""
    fig = Figure(figsize=(7.5, 4), layout="constrained")
    ax = fig.add_subplot()
    band_lines(ax, _cell_mean_over_layers(curves, column), "step", column)
    for (name, value), style in zip((references or {}).items(), ("--", ":")):
        ax.axhline(value, color="grey", ls=style, label=name)
    ax.set(title=f"{title}: {label} over training", xlabel="training step", ylabel=label)
    legend_outside(ax)
    return fig


def msve_curves(curves: pd.DataFrame, title: str) -> Figure:
    fig = Figure(figsize=(7.5, 4), layout="constrained")
    ax = fig.add_subplot()
    data = _cell_mean_over_layers(curves, "eval_msve")
    colors = band_lines(ax, data, "step", "eval_msve", log=True)
    for condition, star in curves.groupby(CONDITION, sort=False)[STAR_MSVE].mean().items():
        ax.axhline(star, color=colors[condition], ls="--", lw=1)
    ax.plot([], [], color="grey", ls="--", label="$\\theta^*$ at the same depth")
    ax.set(
        title=f"{title}: evaluation MSVE (dashed: $\\theta^*$)",
        xlabel="training step",
        ylabel="MSVE against $v_\\pi$",
        yscale="log",
    )
    log_axis(ax.yaxis)
    legend_outside(ax)
    return fig


PANELS_PER_ROW = 5  # the signature's panels, one per condition


def signature(done: pd.DataFrame, title: str) -> Figure:
    """Final normalised (reward, next value, current value) weights per layer: bars = mean, dots = seeds."""
    long = done.melt(
        id_vars=["condition", "cell", "layer"], value_vars=list(SIGNATURE_COLUMNS), var_name=INPUT, value_name="weight"
    )
    long[INPUT] = long[INPUT].str.rsplit(".", n=1).str[-1]
    conditions = list(done[CONDITION].unique())
    ncols = min(len(conditions), PANELS_PER_ROW)  # many conditions wrap onto rows of panels
    nrows = -(-len(conditions) // ncols)
    fig = Figure(figsize=(max(7.0, 3.6 * ncols), 4 * nrows), layout="constrained")
    grid = np.atleast_1d(fig.subplots(nrows, ncols, sharey=True, squeeze=False)).ravel()
    for ax in grid[len(conditions) :]:
        ax.set_visible(False)
    axes = grid[: len(conditions)]
    for ax, condition in zip(axes, conditions):
        part = long[long[CONDITION] == condition]
        sns.barplot(
            data=part,
            x="layer",
            y="weight",
            hue="input",
            hue_order=SIGNATURE_INPUTS,
            ax=ax,
            palette=PALETTE,
            errorbar=None,
            alpha=0.6,
        )
        sns.stripplot(
            data=part,
            x="layer",
            y="weight",
            hue="input",
            hue_order=SIGNATURE_INPUTS,
            dodge=True,
            ax=ax,
            palette=PALETTE,
            size=3,
            legend=False,
        )
        ax.axhline(0, color="black", lw=0.6)
        ax.set(title=condition, xlabel="layer", ylabel=f"normalised weight ($\\theta^*$: {SIGNATURE_TEXT[1:-1]})")
        if ax not in axes[::ncols]:
            ax.set_ylabel("")  # the row's first panel names the axis
        legend_outside(ax, keep=ax is axes[-1])
    fig.suptitle(f"{title}: value-row signature (bars: mean; dots: seeds)")
    return fig


def cells_error_vs_depth(depth: pd.DataFrame, title: str) -> Figure:
    """The error after each trained layer, beside theta*'s."""
    return _versus_depth(
        depth.dropna(subset=["model"]),
        f"{title}: error after each layer",
        "$\\|v_L - v_\\pi\\|_\\infty$ (mean over tasks)",
        log_depth=False,
    )


def cells_depth_extrapolation(table: pd.DataFrame, title: str) -> Figure:
    """The learned layers run to other depths (tied: the same layer; per-layer: the last one repeated), beside
    each construction the cells compare with (θ*; a linear model's TD(0) construction), never averaged together."""
    if "reference" not in table:  # a study folder of schema 2: its construction curve was always named theta_star
        table = table.rename(columns={"theta_star": "reference"}).assign(reference_name="theta*")
    return _versus_depth(
        table,
        f"{title}: learned layers run beyond their trained depth",
        "MSVE against $v_\\pi$",
        log_depth=True,
        reference="reference",
    )


def _versus_depth(
    table: pd.DataFrame, title: str, ylabel: str, log_depth: bool, reference: str = "theta_star"
) -> Figure:
    fig = Figure(figsize=(7.5, 4), layout="constrained")
    ax = fig.add_subplot()
    band_lines(ax, table, "depth", "model", marker="o", log=True)
    names = table[REFERENCE_NAME] if "reference_name" in table else pd.Series("theta*", index=table.index)
    for (name, rows), ls in zip(table.groupby(names), ("--", ":", "-.")):
        mean = rows.groupby("depth")[reference].mean().reset_index()
        label = ("$\\theta^*$" if name == "theta*" else name) + " (mean over cells)"
        ax.plot(mean[DEPTH], mean[reference], color="grey", ls=ls, label=label)
    ax.set(
        title=title,
        xlabel="depth (layers applied)",
        ylabel=ylabel,
        yscale="log",
        xscale="log" if log_depth else "linear",
    )
    if log_depth:
        log_axis(ax.xaxis)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    log_axis(ax.yaxis)
    legend_outside(ax)
    return fig


def markdown(spec: StudySpec, results: pd.DataFrame, figures: list[str], where: Optional[list[str]] = None) -> str:
    """study.md: the settings, ``where`` (``phase.markdown``: where the models learn in context), every column per
    condition, the cells that did not finish and the figures."""
    cells = results.drop_duplicates("cell")
    lines = [
        f"# Study `{spec.name}`",
        "",
        spec.description,
        "",
        f"Preset `{spec.preset}`, fixed {spec.fixed or 'nothing'}, grid {spec.grid or 'none'}, "
        f"seeds {spec.seeds}: {len(cells)} cells, {int((cells[STATUS] == 'done').sum())} done.",
        "",
        *(where or []),
        "## Final metrics per condition",
        "",
        f"Each cell: mean over the seeds that finished with its {METHOD} over seeds (n in the second column; "
        "with one seed, no interval; cut to the range the quantity can take: [−1, 1] for cosines and "
        "correlations, ≥ 0 for errors); a seed whose value is not finite is named below the table. Cosines are "
        "the lowest layer's (a model is only as close to θ* as its worst layer); MSVE is against v_π on held-out "
        "tasks. The constant baseline mean(R)/(1−γ) is computed on each cell's own evaluation tasks.",
        "",
        "The last columns say what the learned update is: its effective discount b/(−c) at the last layer "
        "(read from the weights where the layer is a fixed linear map, fitted otherwise; θ*: the task's γ; "
        "outside [0, 1) the update is no TD contraction), how many seeds' last layer converges when iterated "
        "(ρ(T) < 1 on every evaluation task; for a model with no linear map, from its error curve), the MSVE "
        "of the best softmax TD of the same depth and that of the constant in-context predictor.",
        "",
        "The most TD-like head's correlation with the softmax-TD kernel (θ*: 1) and the most same-state "
        "head's with the tabular kernel are measured from attention patterns, so they compare architectures; "
        "a discount is shown only for a last layer the TD family "
        "describes (a fit explaining ≥ 95% of its update, or "
        "weights whose kernel is one temperature of ⟨x, x'⟩); weight "
        "cosines and the value-row signature exist only for the "
        "stylised model (–: not applicable).",
        "",
        "| condition | seeds done | failed | " + " | ".join(c.label for c in STUDY_COLUMNS) + " |",
        "|---|---|---|" + "---|" * len(STUDY_COLUMNS),
    ]
    notes = []
    for condition, part in results.groupby("condition", sort=False):
        row, note = _table_row(condition, part)
        lines.append(row)
        notes += [f"- `{condition}`: {n}" for n in note]
    if notes:
        lines += ["", *notes]
    failed = cells[cells[STATUS] != DONE]
    if not failed.empty:
        lines += ["", "## Cells that did not finish", ""]
        lines += [
            f"- `{r.cell}`: {r.status}" + (f" — {r.error}" if isinstance(r.error, str) else "")
            for r in failed.itertuples()
        ]
    lines += ["", "## Figures", "", CAPTION, ""]
    lines += [f"### {name.replace('_', ' ')}\n\n![{name}](figures/{name}.png)\n" for name in figures]
    return "\n".join(lines) + "\n"


def _table_row(condition: str, part: pd.DataFrame) -> tuple[str, list[str]]:
    """One condition's row: every column of ``STUDY_COLUMNS`` summarised over the seeds that finished."""
    cells = part.drop_duplicates("cell")
    done = part[part[STATUS] == DONE]
    n_done, n_failed = int((cells[STATUS] == DONE).sum()), int((cells[STATUS] == FAILED).sum())
    if done.empty:
        return f"| {condition} | 0 | {n_failed} |" + " – |" * len(STUDY_COLUMNS), []
    if IN_FAMILY in done:  # a discount is only read off a layer the TD family explains
        discount = done[DISCOUNT].where(done[IN_FAMILY].astype(bool))
        done = done.assign(**{DISCOUNT: discount})
    notes: list[str] = []
    # a condition's cells may lack a column (a standard model has no weight cosines, an untied one no
    # extrapolation): shown as "–", never as a made-up value
    cells_text = [_summarise(column, done, notes) for column in STUDY_COLUMNS]
    return f"| {condition} | {n_done} | {n_failed} | " + " | ".join(cells_text) + " |", notes


def _summarise(column: Column, done: pd.DataFrame, notes: list[str]) -> str:
    if column.key not in done or not done[column.key].notna().any():
        return "–"
    per_cell = done.groupby("cell")[column.key].agg(column.over_layers)
    if column.over_seeds == "count":
        return f"{int(per_cell.astype(bool).sum())}/{len(per_cell)}"
    if column.over_seeds == "tally":
        return ", ".join(f"{count} {word}" for word, count in per_cell.value_counts().items())
    if column.over_seeds == "verdicts":  # seeds whose paired per-task interval puts the model below / above
        return f"{int((per_cell == 'lower').sum())}/{len(per_cell)} better, {int((per_cell == 'higher').sum())} worse"
    values = per_cell.astype(float)
    diverged = describe_nonfinite(list(values.index), list(values))
    if diverged:
        notes.append(f"{column.key}: {diverged}")
    return t_interval(values.to_numpy(), bounds=column.bounds).text(".3f")
