"""Where a study's models learn in context: each condition's fraction of seeds with the function-space verdict
(``ictd_interp.analyses.metrics.in_context``), as a table with Wilson intervals and as a phase diagram over the grid.

The diagram's columns are the grid's ``n_layers`` values (else its first setting), its rows every combination of the
other settings; each square is coloured by the fraction of seeds that learn in context and says ``k/n``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import pandas as pd

from ictd_interp.analyses.figures.style import Figure
from ictd_interp.analyses.metrics.intervals import proportion_interval, t_interval
from ictd_interp.analyses.metrics.ladder import DEPTHS, DRAWN, TOP
from ictd_interp.analyses.studies.cells import DONE
from ictd_interp.analyses.studies.results import CELL, STATUS
from ictd_interp.analyses.studies.spec import StudySpec, condition_label
from ictd_interp.analyses.summary.tables import summary_column

LEARNS = summary_column("in_context.learns_in_context")
DISCOUNT = summary_column("in_context.discount.value")
MSVE = summary_column("in_context.msve.mean")
CONSTANT = summary_column("baselines.estimators.constant.msve.mean")
FIRST_VISIT = summary_column("baselines.estimators.first_visit_mc.msve.mean")
EVERY_VISIT = summary_column("baselines.estimators.tabular_mc.msve.mean")
CE = summary_column("baselines.estimators.tabular_td.msve.mean")
LEVEL = summary_column("in_context.level")
DEEP = summary_column("in_context.ladder.msve_with_depth.16x")  # MSVE at 16x the trained depth, trained n
BAYES = summary_column("in_context.ladder.top.bayes")  # the ladder's top rung at the trained n
GAP = summary_column("in_context.ladder.top.gap_closed")  # share of the constant-to-Bayes gap closed, trained depth
GAP_DEEP = summary_column("in_context.ladder.top.gap_closed_16x")
# the ladder at the trained n, on its own tasks: the model at each depth multiple, the estimators beside it (absent
# before the ladder kept its baselines: CE and Bayes then come from its top rung)
LADDER_DEPTHS = {m: summary_column(f"in_context.ladder.msve_with_depth.{m}x") for m in DEPTHS}
LADDER_LINES = {name: summary_column(f"in_context.ladder.baselines.{name}") for name in DRAWN}
LADDER_TOP = {"tabular_td": summary_column("in_context.ladder.top.ce"), TOP: BAYES}
GAMMA = "task_gamma"  # each cell's discount, from its config (a grid value or the preset's)
RUNS_TD = "runs TD"


def by_cell(results: pd.DataFrame, spec: StudySpec) -> pd.DataFrame:
    """One row per finished cell with a verdict: its grid values, the verdict, discount and MSVEs."""
    done = results[(results[STATUS] == DONE)].drop_duplicates(CELL)
    if LEARNS not in done or not done[LEARNS].notna().any():
        return pd.DataFrame()
    grid = {
        cell.name: {**{k: v for k, v in cell.overrides.items() if k != "seed"}, GAMMA: cell.config.tasks.gamma}
        for cell in spec.cells()
    }
    keyed = pd.DataFrame([{**grid.get(cell, {}), CELL: cell} for cell in done[CELL]])
    values = done[[CELL, LEARNS, DISCOUNT, MSVE, CONSTANT, FIRST_VISIT]]
    later = (EVERY_VISIT, CE, LEVEL, DEEP, BAYES, GAP, GAP_DEEP, *LADDER_DEPTHS.values(), *LADDER_LINES.values())
    later += (LADDER_TOP["tabular_td"],)
    for column in later:  # absent from summaries before the ladder
        values = values.assign(**{column: done[column] if column in done else None})
    return keyed.merge(values, on=CELL)


def axes_of(spec: StudySpec) -> tuple[Optional[str], list[str]]:
    """The diagram's column setting and its row settings."""
    keys = list(spec.grid)
    if not keys:
        return None, []
    x = "n_layers" if "n_layers" in keys else keys[0]
    return x, [k for k in keys if k != x]


def fractions(cells: pd.DataFrame, spec: StudySpec) -> list[dict[str, Any]]:
    """Per condition (the grid's order): seeds learning in context with its Wilson interval, the effective
    discount and MSVE (t intervals over seeds) beside the two baselines the verdict needs."""
    out = []
    if cells.empty:
        return out
    for condition in spec.conditions():
        part = cells
        for key, value in condition.items():
            part = part[part[key] == value]
        if part.empty:
            continue
        learned = part[LEARNS].astype(bool)
        deep = part[DEEP].dropna().astype(float)
        runs_td = int((part[LEVEL] == RUNS_TD).sum()) if part[LEVEL].notna().any() else None
        out.append(
            {
                "condition": condition,
                "label": condition_label(condition),
                "learned": int(learned.sum()),
                "n": len(part),
                "share": proportion_interval(int(learned.sum()), len(part)),
                "discount": _interval(part[DISCOUNT]),
                "msve": t_interval(part[MSVE].astype(float).to_numpy(), bounds=(0.0, float("inf"))),
                "constant": float(part[CONSTANT].astype(float).mean()),
                "first_visit": float(part[FIRST_VISIT].astype(float).mean()),
                "every_visit": _mean(part[EVERY_VISIT]),
                "ce": _mean(part[CE]),
                "runs_td": runs_td,
                "td_share": None if runs_td is None else proportion_interval(runs_td, len(part)),
                "deep": t_interval(deep.to_numpy(), bounds=(0.0, float("inf"))) if len(deep) else None,
                "gamma": float(part[GAMMA].iloc[0]),
                "bayes": _mean(part[BAYES]),
                "gap": _interval(part[GAP]),
                "gap_deep": _interval(part[GAP_DEEP]),
                "ladder": {m: _interval(part[column]) for m, column in LADDER_DEPTHS.items()},
                "ladder_lines": {name: _ladder_line(part, name) for name in DRAWN},
            }
        )
    return out


def _ladder_line(part: pd.DataFrame, name: str) -> Optional[float]:
    """An estimator's MSVE on the ladder's tasks at the trained n, mean over the seeds (older summaries: CE and Bayes
    from the top rung, the others absent)."""
    found = _mean(part[LADDER_LINES[name]])
    return found if found is not None or name not in LADDER_TOP else _mean(part[LADDER_TOP[name]])


def _mean(column: pd.Series) -> Optional[float]:
    values = column.dropna().astype(float)
    return float(values.mean()) if len(values) else None


def _interval(column: pd.Series) -> Optional[Any]:
    values = column.dropna().astype(float).to_numpy()
    return t_interval(values) if len(values) else None


def _number(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.3f}"


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The table of where the models learn in context."""
    if not rows:
        return []
    lines = [
        "## Where it learns in context",
        "",
        "A seed *learns in context* when its MSVE on held-out tasks is below both the constant mean(R)/(1−γ) "
        "and first-visit Monte Carlo, each by a paired 95% t interval over tasks lying below 0 (docs/theory.md "
        "§7a). Fraction: Wilson 95% interval over seeds; discount (the last layer's b/(−c), task γ beside it) "
        "and MSVE: Student-t 95% intervals over seeds; the baselines' MSVE is their mean over the same cells. "
        "*Runs TD*: the seeds at the verdict ladder's top level (docs/theory.md §7b: run deeper, the error falls "
        "toward the tabular TD fixed point of the context, CE); *MSVE at 16×*: the same model run to 16 times its "
        "depth, on the ladder's tasks at the trained n (– where a summary predates it).",
        "",
        "| condition | learns in context | fraction [95%] | runs TD | effective discount | MSVE | MSVE at 16× | "
        "constant | first-visit MC | every-visit MC | CE |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        share, discount = r["share"], r["discount"]
        runs_td = "–" if r["runs_td"] is None else f"{r['runs_td']}/{r['n']}"
        lines.append(
            f"| {r['label']} | {r['learned']}/{r['n']} | {share.mean:.2f} [{share.lo:.2f}, {share.hi:.2f}] "
            f"| {runs_td} | {discount.text('.3f') if discount else '–'} | {r['msve'].text('.3f')} | "
            f"{r['deep'].text('.3f') if r['deep'] else '–'} | {r['constant']:.3f} | {r['first_visit']:.3f} | "
            f"{_number(r['every_visit'])} | {_number(r['ce'])} |"
        )
    return lines + [""]


def phase_diagram(rows: list[dict[str, Any]], spec: StudySpec, title: str) -> Optional[Figure]:
    """Squares coloured by the fraction of seeds that learn in context, ``k/n`` written in each."""
    ladder = any(r.get("runs_td") is not None for r in rows)
    return squares(
        rows,
        spec,
        f"{title}: seeds that learn in context\n(beat the constant and first-visit MC, paired 95%)"
        + ("; below: seeds that run TD (verdict ladder)" if ladder else ""),
        "fraction of seeds",
        lambda r: r["learned"] / r["n"],
        lambda r: (
            f"{r['learned']}/{r['n']}" + ("" if r.get("runs_td") is None else f"\nruns TD {r['runs_td']}/{r['n']}")
        ),
    )


def squares(
    rows: list[dict[str, Any]],
    spec: StudySpec,
    heading: str,
    colour_label: str,
    share: Callable[[dict[str, Any]], float],
    text: Callable[[dict[str, Any]], str],
    fontsize: int = 10,
) -> Optional[Figure]:
    """One square per condition (``axes_of``: columns and rows), coloured by ``share(row)`` in [0, 1] and labelled
    ``text(row)``."""
    x, others = axes_of(spec)
    if x is None or not rows:
        return None
    columns = list(spec.grid[x])
    labels = list(dict.fromkeys(condition_label({k: r["condition"][k] for k in others}) for r in rows))
    grid = np.full((len(labels), len(columns)), np.nan)
    fig = Figure(
        figsize=(max(1.4 * len(columns) + 3.4, 6.0), max(2.8, 0.7 * len(labels) + 1.6)), layout="constrained"
    )  # the title fits
    ax = fig.add_subplot()
    for r in rows:
        i = labels.index(condition_label({k: r["condition"][k] for k in others}))
        j = columns.index(r["condition"][x])
        grid[i, j] = share(r)
        colour = "white" if grid[i, j] < 0.5 else "black"
        ax.text(j, i, text(r), ha="center", va="center", fontsize=fontsize, color=colour)
    image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(columns)), [str(c) for c in columns])
    ax.set_yticks(range(len(labels)), labels if others else [""] * len(labels))  # one row: nothing to name
    ax.tick_params(axis="y", length=4 if others else 0)
    ax.set(xlabel=x.replace("_", " "))
    ax.set_title(heading, fontsize=10)
    fig.colorbar(image, ax=ax, label=colour_label)
    return fig
