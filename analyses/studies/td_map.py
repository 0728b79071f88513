"""Where a study's models run TD: each condition's share of seeds at the verdict ladder's top level with its Wilson
interval, the learned effective discount beside the task's γ, and the ladder's top rung (Bayes, and the share of the
gap from the constant to it that the models close), as a table and two figures (docs/theory.md §7b, §7c).

* ``td_diagram``: squares coloured by the share of seeds that run TD, ``k/n`` and the Wilson interval written in
  each; columns are ``n_layers`` (else the grid's first setting), rows every combination of the others.
* ``discount_figure``: the learned discount (the last layer's ``b/(−c)``, mean over seeds with its t interval)
  against γ, one line per combination of the other settings, beside the line discount = γ (TD's mark: it tracks γ);
  drawn when γ is a grid setting.

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


def _number(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.3g}"


def td_diagram(rows: list[dict[str, Any]], spec: StudySpec, title: str) -> Optional[Figure]:
    """Squares coloured by the share of seeds that run TD, with ``k/n`` and its Wilson interval."""
    rows = [r for r in rows if r.get("td_share") is not None]
    return squares(
        rows,
        spec,
        f"{title}: seeds that run TD (verdict ladder's top level)\nk/n and Wilson 95% interval",
        "fraction of seeds that run TD",
        lambda r: r["td_share"].mean,
        lambda r: f"{r['runs_td']}/{r['n']}\n[{r['td_share'].lo:.2f}, {r['td_share'].hi:.2f}]",
        fontsize=8,
    )


def discount_figure(rows: list[dict[str, Any]], spec: StudySpec, title: str) -> Optional[Figure]:
    """The learned discount against γ, one line per combination of the other settings, beside discount = γ."""
    if "gamma" not in spec.grid:
        return None
    rows = [r for r in rows if r["discount"] is not None]
    others = [k for k in spec.grid if k != "gamma"]
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(condition_label({k: r["condition"][k] for k in others}), []).append(r)
    if not groups:
        return None
    fig = Figure(figsize=(6.4, 4.6), layout="constrained")
    ax = fig.add_subplot()
    gammas = np.array(sorted(spec.grid["gamma"]), dtype=float)
    ax.plot(gammas, gammas, color="0.4", linestyle="--", linewidth=1, label="discount = γ (TD)")
    for (label, part), colour in zip(groups.items(), series_colours(list(groups))):
        part = sorted(part, key=lambda r: r["gamma"])
        g = np.array([r["gamma"] for r in part])
        mean = np.array([r["discount"].mean for r in part])
        err = np.array([[m - r["discount"].lo, r["discount"].hi - m] for m, r in zip(mean, part)]).T
        ax.errorbar(
            g,
            mean,
            yerr=err,
            marker="o",
            capsize=3,
            color=colour,
            label=label if others else f"the {spec.preset} preset",
        )
    ax.set(xlabel="task discount γ", ylabel="learned effective discount b/(−c)")
    seeds = sorted({r["n"] for r in rows})
    ax.set_title(
        f"{title}: does the learned discount track γ?\nmean over {'/'.join(map(str, seeds))} seeds, Student-t 95% "
        "interval\n(a bar the marker hides is narrower than the marker)",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    return fig


def ladder_panels(rows: list[dict[str, Any]], title: str) -> Optional[Figure]:
    """The ladder at the trained n per condition (module docstring); None when no summary carries the ladder."""
    rows = [r for r in rows if r["ladder"].get(1) is not None]
    if not rows:
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
    seeds = "/".join(str(n) for n in sorted({r["n"] for r in rows}))
    fig.suptitle(
        f"{title}: the verdict ladder at the trained n\nmean over {seeds} seeds, Student-t 95%; lines: the "
        "estimators on the same tasks",
        fontsize=10,
    )
    return fig
