"""The verdict ladder drawn: the model's MSVE against depth at each context length of the ladder, beside the
estimators that answer from the same contexts (the constant, every-visit Monte Carlo, CE, and Bayes where the prior
has one). What the level rests on, in one figure: a model that runs TD settles on CE's line as it runs deeper; a
stopped-early one leaves it. Drawn from the ladder's saved rungs (``metrics.ladder.Rung``: ``n``, ``depths``,
``msve`` intervals, ``estimators``' intervals), which the caller passes with the estimators to draw."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.ticker import NullLocator

from ictd_interp.analyses.figures.style import PALETTE, Figure, log_axis, new_figure, wrapped

# the estimators' lines, in the order the caller names them: the levels' baselines (the constant, Monte Carlo),
# softmax TD's own limit (CE), the best any estimator can do under the training prior (Bayes)
LINE_STYLES = (
    {"color": "grey", "ls": ":"},
    {"color": PALETTE[1], "ls": "--"},
    {"color": "black"},
    {"color": PALETTE[4], "ls": "-."},
)
OFF_SCALE = 20.0  # the y axis stops at this many times the largest estimator's MSVE: a diverging model is marked


def ladder_figure(rungs: Sequence[Any], lines: Mapping[str, str], title: str) -> Figure:
    """One panel per context length: the model at each depth of its rung (95% t intervals over tasks) and the
    estimators ``lines`` names (key in ``rung.estimators`` -> label) as horizontal lines; a point past
    ``OFF_SCALE`` is drawn on the top edge as a triangle."""
    fig, axes = new_figure(ncols=len(rungs), width=3.2, height=3.2)
    for ax, rung in zip(axes, rungs):
        ladder_panel(ax, rung, lines)
    axes[0].set_ylabel(r"MSVE against $v_\pi$")
    handles, labels = axes[0].get_legend_handles_labels()
    columns = min(len(labels), 2 * len(axes))  # one row under three panels; two columns under one
    fig.legend(handles, labels, loc="outside lower center", ncols=columns, frameon=False, fontsize=8)
    fig.suptitle(wrapped(title, 40 * len(axes)), fontsize=10)
    return fig


def ladder_panel(ax, rung: Any, lines: Mapping[str, str]) -> None:
    """One rung on ``ax``: the model's MSVE at each of ``rung.depths`` with its interval, the estimators as lines;
    titled by ``rung.n`` where it has one."""
    depths = np.asarray(rung.depths)
    means = np.array([i.mean for i in rung.msve], dtype=float)
    lo = np.array([i.lo for i in rung.msve], dtype=float)
    hi = np.array([i.hi for i in rung.msve], dtype=float)
    levels = {name: rung.estimators[name].mean for name in lines if name in rung.estimators}
    top = OFF_SCALE * max(levels.values())
    bottom = 0.5 * min([*levels.values(), *means[np.isfinite(means) & (means > 0)]])
    shown = np.isfinite(means) & (means <= top)
    ax.errorbar(
        depths[shown],
        means[shown],
        yerr=[np.clip(means - lo, 0, None)[shown], np.clip(hi - means, 0, None)[shown]],
        color=PALETTE[0],
        marker="o",
        ms=4,
        capsize=2,
        label="trained model (95% t)",
    )
    if not shown.all():
        ax.plot(depths[~shown], [top] * int((~shown).sum()), "^", color=PALETTE[0], ms=7, clip_on=False)
        ax.annotate("off the scale (▲)", (0.02, 0.97), xycoords="axes fraction", va="top", fontsize=7)
    for style, name in zip(LINE_STYLES, lines):  # each estimator keeps its style where another is absent
        if name in levels:
            ax.axhline(levels[name], lw=1.2, label=lines[name], **style)
    ax.set(xscale="log", yscale="log", xlabel=f"depth (layers; trained: {depths[0]})")
    if rung.n is not None:
        ax.set_title(f"n = {rung.n}")
    ax.set_xticks(list(depths), [str(d) for d in depths])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_ylim(bottom, top * 1.05 if not shown.all() else None)
    log_axis(ax.yaxis)
