"""The methods benchmark's figures, drawn from its saved cells: ROC curves per case, AUROC per method and case,
and a direction method's |cos| with every unrotated basis axis."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import seaborn as sns

from ictd_interp.analyses.figures.style import Figure, legend_outside, new_figure, series_colours, wrapped
from ictd_interp.analyses.methods_benchmark.evaluate import CellResult
from ictd_interp.analyses.methods_benchmark.selection import CHANCE, cases_of, edge_methods, interval

ROC_COLUMNS = 4  # ROC panels per row
LINE_STYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)))  # overlapping curves stay visible


def roc_figure(cells: Sequence[CellResult], seed: int = 0) -> Figure:
    """ROC curves of every edge method against the true edges, one panel per case, four to a row (benchmark seed
    ``seed``)."""
    cases, methods = cases_of(cells), edge_methods(cells)
    ncols = min(ROC_COLUMNS, len(cases))
    width = max(3.6, 7.2 / len(cases))  # one case: room for the legend
    fig, axes = new_figure(ncols, width=width, height=3.6, panels=len(cases))
    colours = series_colours(methods)
    for i, (ax, c) in enumerate(zip(axes, cases)):
        cell = next(x for x in cells if x.case == c and x.seed == seed)
        for k, (colour, m) in enumerate(zip(colours, methods)):
            roc = cell.scores[m].roc
            ax.plot(roc.fpr, roc.tpr, color=colour, ls=LINE_STYLES[k % len(LINE_STYLES)], lw=1.8, label=m)
        ax.plot([0, 1], [0, 1], color="grey", ls=":", lw=1)
        ax.set(
            title=c,
            xlabel="false-positive rate (edges)",
            ylabel="true-positive rate" if i % ncols == 0 else "",
            xlim=(-0.02, 1.02),
            ylim=(-0.02, 1.02),
        )
    legend_outside(axes[ncols - 1], title=f"seed {seed}; dotted: chance")
    return fig


def auroc_figure(cells: Sequence[CellResult]) -> Figure:
    """Mean AUROC per method and case with its interval over seeds."""
    cases, methods = cases_of(cells), edge_methods(cells)
    fig, (ax,) = new_figure(width=max(7.5, 1.3 * len(cases) + 1.5), height=3.6)  # a case name per group, unclipped
    width = 0.8 / len(methods)
    for k, (colour, m) in enumerate(zip(series_colours(methods), methods)):
        iv = [interval(cells, c, m, "auroc") for c in cases]
        x = np.arange(len(cases)) + (k - (len(methods) - 1) / 2) * width
        err = np.nan_to_num([[i.mean - i.lo for i in iv], [i.hi - i.mean for i in iv]])
        ax.bar(x, [i.mean for i in iv], width, yerr=err, color=colour, capsize=2, label=m)
    ax.axhline(CHANCE, color="grey", ls=":", lw=1, label="chance")
    ax.set(
        xticks=range(len(cases)),
        xticklabels=cases,
        ylim=(0, 1.05),
        ylabel="AUROC against the true edges",
        title=f"Edge rankings against the planted circuit ({len({x.seed for x in cells})} seeds)",
    )
    legend_outside(ax, title="95% interval over seeds")
    return fig


def direction_figure(cells: Sequence[CellResult], method: str, case: str, seed: int = 0) -> Figure:
    """|cos| between each direction found and every axis of the unrotated basis (the truth: one bright cell per
    row, on the variable's own axis)."""
    cell = next(x for x in cells if x.case == case and x.seed == seed)
    cos = cell.scores[method].cosines
    fig, (ax,) = new_figure(width=max(0.45 * len(cos.axes) + 4.2, 6.0), height=max(0.32 * len(cos.labels) + 1.8, 3.0))
    sns.heatmap(
        np.asarray(cos.matrix),
        ax=ax,
        vmin=0,
        vmax=1,
        cmap="mako",
        annot=len(cos.axes) <= 12,
        fmt=".2f",
        xticklabels=cos.axes,
        yticklabels=cos.labels,
        cbar_kws={"label": "|cos|"},
    )
    if len(cos.axes) > 10:  # names such as "reward" and "target" would run into each other
        labels = ax.get_xticklabels()
        ax.set_xticklabels(labels, rotation=45, ha="right", rotation_mode="anchor")
    ax.set(
        title=wrapped(f"{method} on {case} (seed {seed}): each direction found against the true axes", 50),
        xlabel="axis of the unrotated residual stream",
        ylabel="variable @ site",
    )
    return fig
