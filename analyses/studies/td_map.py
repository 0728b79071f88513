"""Where a study's models run TD: each condition's share of seeds at the verdict ladder's top level with its Wilson
interval, the learned effective discount beside the task's γ, and the ladder's top rung (Bayes, and the share of the
gap from the constant to it that the models close), as a table and two figures (docs/theory.md §7b, §7c).

* ``td_diagram``: squares coloured by the share of seeds that run TD, ``k/n`` and the Wilson interval written in
  each; columns are ``n_layers`` (else the grid's first setting), rows every combination of the others.
* ``discount_figure``: the learned discount (the last layer's ``b/(−c)``, mean over seeds with its t interval)
  against γ, one line per combination of the other settings, beside the line discount = γ (TD's mark: it tracks γ);
  drawn when γ is a grid setting.

* ``td_panels``: over a grid of depth, γ and one or two other settings (the atlas: the spectral penalty and trained
  n), one panel per combination of the others, each a square per depth (columns) and γ (rows) coloured by the share
  that runs TD, ``k/n`` written in it; the discount figure then draws one panel per such combination too, a line per
  depth.

* ``ladder_panels``: the verdict ladder at the trained n, one panel per condition: the models' MSVE at 1, 2, 4 and
  16 times their depth (mean over seeds, Student-t 95%), beside the constant, every-visit MC, CE and Bayes on the
  same tasks (each the mean over the seeds' task draws).

All read the rows of ``phase.fractions``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Optional

import numpy as np

from ictd_interp.analyses.figures.ladder_plot import ladder_panel
from ictd_interp.analyses.figures.style import Figure, series_colours
from ictd_interp.analyses.metrics.ladder import DRAWN, SHORT
from ictd_interp.analyses.studies.phase import squares
from ictd_interp.analyses.studies.spec import StudySpec, condition_label

TRACKS = 0.01  # the target: the learned discount within ±0.01 of γ
FACETED = ("n_layers", "gamma")  # the settings a panel of ``td_panels`` spans
LADDER_PANELS = 24  # the most conditions the ladder figure draws (six rows of four panels)


def markdown(rows: list[dict[str, Any]]) -> list[str]:
    """The table of where the models run TD; empty when no summary carries the ladder."""
    rows = [r for r in rows if r.get("td_share") is not None]
    if not rows:
        return []
    lines = [
        "## Where it runs TD",
        "",
        "*Runs TD*: the verdict ladder's top level (docs/theory.md §7b); share, Wilson 95% over seeds. "
        "*Discount − γ*: the learned effective discount minus the task's γ, Student-t 95% over seeds (TD's mark: "
        f"within ±{TRACKS} of 0). *Bayes*: the posterior mean's MSVE on the ladder's tasks at the trained n (the best "
        "any estimator can do in expectation, §7c); *gap closed*: (constant − MSVE) / (constant − Bayes) at the "
        "trained depth and at 16×, Student-t 95% over seeds (– where the family has no derived posterior).",
        "",
        "| condition | γ | runs TD | share [95%] | discount − γ | CE | Bayes | gap closed ×1 | gap closed ×16 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        share, disc = r["td_share"], r["discount"]
        shift = (
            "–"
            if disc is None
            else f"{disc.mean - r['gamma']:+.3f} [{disc.lo - r['gamma']:+.3f}, " + (f"{disc.hi - r['gamma']:+.3f}]")
        )
        gaps = [g.text(".2f") if g is not None else "–" for g in (r["gap"], r["gap_deep"])]
        lines.append(
            f"| {r['label']} | {r['gamma']:g} | {r['runs_td']}/{r['n']} | {share.mean:.2f} [{share.lo:.2f}, "
            f"{share.hi:.2f}] | {shift} | {_number(r['ce'])} | {_number(r['bayes'])} | {gaps[0]} | {gaps[1]} |"
        )
    return lines + [""]


def seed_counts(rows: list[dict[str, Any]]) -> str:
    """The numbers of seeds the conditions have, ``2/3`` (a study stopped part way has some of each)."""
    return "/".join(str(n) for n in sorted({r["n"] for r in rows}))


def _number(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.3g}"


def share_text(r: dict[str, Any]) -> str:
    """A condition's ``k/n`` that run TD over its Wilson 95% interval, as its square shows it."""
    return f"{r['runs_td']}/{r['n']}\n[{r['td_share'].lo:.2f}, {r['td_share'].hi:.2f}]"


def td_diagram(rows: list[dict[str, Any]], spec: StudySpec, title: str) -> Optional[Figure]:
    """Squares coloured by the share of seeds that run TD, with ``k/n`` and its Wilson interval."""
    rows = [r for r in rows if r.get("td_share") is not None]
    return squares(
        rows,
        spec,
        f"{title}: seeds that run TD (verdict ladder's top level)\nk/n and Wilson 95% interval",
        "fraction of seeds that run TD",
        lambda r: r["td_share"].mean,
        share_text,
        fontsize=8,
    )


def facets(spec: StudySpec) -> Optional[list[str]]:
    """The settings whose combinations get a panel each (at most two: panel columns, then rows), when the grid has
    depth, γ and one or two more; else None (one figure holds the grid)."""
    others = [k for k in spec.grid if k not in FACETED]
    return others if all(k in spec.grid for k in FACETED) and 1 <= len(others) <= 2 else None


def _panel_axes(fig: Figure, spec: StudySpec, keys: list[str]) -> dict[tuple, Any]:
    """One axes per combination of ``keys``' values (first key: columns, second: rows), by that combination."""
    cols, rows = spec.grid[keys[0]], spec.grid[keys[1]] if len(keys) > 1 else [None]
    grid = fig.subplots(len(rows), len(cols), squeeze=False, sharex=True, sharey=True)
    return {(c,) if len(keys) == 1 else (c, r): grid[i][j] for i, r in enumerate(rows) for j, c in enumerate(cols)}


def td_panels(rows: list[dict[str, Any]], spec: StudySpec, title: str) -> Optional[Figure]:
    """The share of seeds that run TD over depth (columns) and γ (rows), a panel per combination of the other
    settings (``facets``); None when the grid is not of that shape or no summary carries the ladder."""
    keys, rows = facets(spec), [r for r in rows if r.get("td_share") is not None]
    if keys is None or not rows:
        return None
    depths, gammas = list(spec.grid["n_layers"]), list(spec.grid["gamma"])
    fig = Figure(figsize=_panel_size(spec, keys, 1.2), layout="constrained")
    panels, image = _panel_axes(fig, spec, keys), None
    for values, ax in panels.items():
        share = np.full((len(gammas), len(depths)), np.nan)
        for r in (r for r in rows if tuple(r["condition"][k] for k in keys) == values):
            i, j = gammas.index(r["condition"]["gamma"]), depths.index(r["condition"]["n_layers"])
            share[i, j] = r["td_share"].mean
            colour = "white" if share[i, j] < 0.5 else "black"
            ax.text(j, i, share_text(r), ha="center", va="center", fontsize=8, color=colour)
        image = ax.imshow(share, cmap="viridis", vmin=0, vmax=1, aspect="auto", origin="lower")
        ax.set_xticks(range(len(depths)), [str(d) for d in depths])
        ax.set_yticks(range(len(gammas)), [f"{g:g}" for g in gammas])
        ax.set_title(condition_label(dict(zip(keys, values))), fontsize=9)
    _outer_labels(panels.values(), "tied layers", "task discount γ")
    fig.colorbar(image, ax=list(panels.values()), label="fraction of seeds that run TD")
    seeds = seed_counts(rows)
    fig.suptitle(
        f"{title}: seeds that run TD (verdict ladder's top level)\nk/n of {seeds} seeds and Wilson 95% interval; "
        "blank: no seed done",
        fontsize=10,
    )
    return fig


def discount_figure(rows: list[dict[str, Any]], spec: StudySpec, title: str) -> Optional[Figure]:
    """The learned discount against γ, one line per combination of the other settings, beside discount = γ; over a
    grid that ``facets`` splits, a panel per combination of the facets and a line per depth (one colour per line
    across the panels)."""
    rows = [r for r in rows if r["discount"] is not None]
    if "gamma" not in spec.grid or not rows:
        return None
    keys = facets(spec) or []
    others = ["n_layers"] if keys else [k for k in spec.grid if k != "gamma"]
    line_of = lambda r: condition_label({k: r["condition"][k] for k in others})  # noqa: E731
    names = list(dict.fromkeys(line_of(r) for r in rows))  # the rows come in the grid's order (phase.fractions)
    colours = dict(zip(names, series_colours(names)))
    fig = Figure(figsize=_panel_size(spec, keys, 0.6) if keys else (6.4, 4.6), layout="constrained")
    panels = _panel_axes(fig, spec, keys) if keys else {(): fig.add_subplot()}
    for values, ax in panels.items():
        groups: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            if tuple(r["condition"][k] for k in keys) == values:
                groups.setdefault(line_of(r), []).append(r)
        _discount_lines(ax, groups, colours, spec, others)
        if keys:
            ax.set_title(condition_label(dict(zip(keys, values))), fontsize=9)
    _outer_labels(panels.values(), "task discount γ", "learned effective discount b/(−c)")
    seeds = seed_counts(rows)
    heading = (
        f"{title}: does the learned discount track γ?\nmean over {seeds} seeds, Student-t 95% interval\n"
        "(a bar the marker hides is narrower than the marker)"
    )
    if not keys:
        panels[()].set_title(heading, fontsize=10)
        panels[()].legend(fontsize=8)
        return fig
    fig.suptitle(heading, fontsize=10)
    legend = {l: h for ax in panels.values() for h, l in zip(*ax.get_legend_handles_labels())}  # every panel's
    fig.legend(legend.values(), legend.keys(), loc="outside lower center", ncols=len(legend), frameon=False, fontsize=8)
    return fig


def _discount_lines(ax, groups: dict[str, list], colours: dict[str, Any], spec: StudySpec, others: list[str]) -> None:
    """The line discount = γ and one line per group (the learned discount's mean and interval against γ)."""
    gammas = np.array(sorted(spec.grid["gamma"]), dtype=float)
    ax.plot(gammas, gammas, color="0.4", linestyle="--", linewidth=1, label="discount = γ (TD)")
    for label, part in groups.items():
        part = sorted(part, key=lambda r: r["gamma"])
        mean = np.array([r["discount"].mean for r in part])
        err = np.array([[m - r["discount"].lo, r["discount"].hi - m] for m, r in zip(mean, part)]).T
        shown = label if others else f"the {spec.preset} preset"
        ax.errorbar(
            [r["gamma"] for r in part], mean, yerr=err, marker="o", capsize=3, color=colours[label], label=shown
        )


def _outer_labels(axes, xlabel: str, ylabel: str) -> None:
    """Axis labels on the outer panels only."""
    for ax in axes:
        spot = ax.get_subplotspec()
        ax.set(xlabel=xlabel if spot.is_last_row() else "", ylabel=ylabel if spot.is_first_col() else "")


def _panel_size(spec: StudySpec, keys: list[str], extra: float) -> tuple[float, float]:
    """A faceted figure's size: 4.2 by 3.4 inches a panel, ``extra`` inches for a colour bar."""
    rows = len(spec.grid[keys[1]]) if len(keys) > 1 else 1
    return 4.2 * len(spec.grid[keys[0]]) + extra, 3.4 * rows + 1.2


def ladder_panels(rows: list[dict[str, Any]], title: str) -> Optional[Figure]:
    """The ladder at the trained n per condition (module docstring); None when no summary carries the ladder or the
    conditions are more than ``LADDER_PANELS`` (the atlas's 64: its depth.csv has every condition's ladder)."""
    rows = [r for r in rows if r["ladder"].get(1) is not None]
    if not rows or len(rows) > LADDER_PANELS:
        return None
    lines = {name: SHORT[name] for name in DRAWN}
    columns = min(4, len(rows))
    fig = Figure(figsize=(max(6.0, 3.0 * columns), 2.9 * -(-len(rows) // columns) + 0.8), layout="constrained")
    for k, r in enumerate(rows):
        ax = fig.add_subplot(-(-len(rows) // columns), columns, k + 1)
        multiples = [m for m, i in r["ladder"].items() if i is not None]
        rung = SimpleNamespace(
            n=None,
            depths=multiples,
            msve=[r["ladder"][m] for m in multiples],
            estimators={name: SimpleNamespace(mean=v) for name, v in r["ladder_lines"].items() if v is not None},
        )
        ladder_panel(ax, rung, lines)
        runs = "" if r["runs_td"] is None else f"; runs TD {r['runs_td']}/{r['n']}"
        ax.set(title=f"{r['label']}{runs}", xlabel="× trained depth")
        ax.title.set_fontsize(8)
    fig.axes[0].set_ylabel(r"MSVE against $v_\pi$")
    handles, labels = fig.axes[0].get_legend_handles_labels()
    wide = min(len(labels), columns + 1)  # five entries take three panels' width in one row
    fig.legend(handles, labels, loc="outside lower center", ncols=wide, frameon=False, fontsize=8)
    seeds = seed_counts(rows)
    fig.suptitle(
        f"{title}: the verdict ladder at the trained n\nmean over {seeds} seeds, Student-t 95%; lines: the "
        "estimators on the same tasks",
        fontsize=10,
    )
    return fig
