"""Figures of in-context control (``ictd_interp.analyses.metrics.acting``, ``ictd_interp.hooks.control_backups``):
from saved numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ictd_interp.analyses.figures.style import Figure, legend_outside, log_axis, new_figure, series_colours


def regret_bars(
    names: Sequence[str], means: Sequence[float], lows: Sequence[float], highs: Sequence[float], title: str
) -> Figure:
    """Regret ``J(π*) − J(π)`` per policy, a mean over tasks with its interval (0: optimal)."""
    fig, (ax,) = new_figure(width=7.2, height=0.45 * len(names) + 1.6)
    y = np.arange(len(names))[::-1]
    err = [np.subtract(means, lows), np.subtract(highs, means)]
    ax.barh(y, means, xerr=err, color=series_colours(list(names)), capsize=3)
    ax.set(yticks=y, yticklabels=names, xlabel="regret J(π*) − J(π) (return units; 0: optimal)", title=title)
    ax.axvline(0.0, color="grey", lw=1)
    return fig


def backup_gap(betas: Sequence[float], gaps: Sequence[float], n_actions: int) -> Figure:
    """The largest ``max q − Σ softmax(β q) q`` observed against ``β``, under its bound ``log(a) / β``."""
    fig, (ax,) = new_figure(width=6.2)
    b = np.asarray(betas, dtype=float)
    ax.plot(b, gaps, marker="o", label="largest gap observed")
    ax.plot(b, math.log(n_actions) / b, color="grey", ls="--", label=f"bound log({n_actions}) / β")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="inverse temperature β of the backup",
        ylabel="max q − softmax backup",
        title="Softmax backup against Q-learning's max",
    )
    log_axis(ax.xaxis)
    legend_outside(ax)
    return fig
