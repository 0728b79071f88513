"""The checkpoint track's report: ``checkpoints.md`` (the population, then every reading's scores with their rule),
``checkpoints.json`` (the same numbers) and ``figures/checkpoint_auroc.png`` (each reading's AUROC with its
interval, for TD against stopped early and against other objectives)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ictd_interp.analyses.figures.style import PALETTE, new_figure, wrapped
from ictd_interp.analyses.methods_benchmark.checkpoints.population import LABELS
from ictd_interp.analyses.methods_benchmark.checkpoints.scores import (
    COMPARISONS,
    N_BOOT,
    Estimate,
    counts,
    score_reading,
)
from ictd_interp.analyses.metrics.readings import READINGS, SEPARATES

SHOWN = ("TD vs stopped early", "TD vs other objectives")


def taken(records: Sequence[dict[str, Any]]) -> list:
    """The readings every record carries (a track run with ``--readings`` scores some), in ``READINGS``'s order."""
    return [r for r in READINGS if all(r.name in x["readings"] for x in records)]


def scored(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Estimate]]:
    return {r.name: score_reading(records, r.name, r.threshold) for r in taken(records)}


def table(scores: dict[str, dict[str, Estimate]], records: Sequence[dict[str, Any]]) -> list[str]:
    missing = {r.name: sum(x["readings"][r.name] is None for x in records) for r in taken(records)}
    lines = [
        "| reading | family | rule: reads as TD iff | AUROC, TD vs stopped early | AUROC, TD vs other objectives "
        "| balanced accuracy, TD vs stopped early | false discoveries | not made |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in taken(records):
        s = scores[r.name]
        lines.append(
            f"| `{r.name}` | {r.family} | {r.rule} | {s['auroc:' + SHOWN[0]].text()} | {s['auroc:' + SHOWN[1]].text()} "
            f"| {s['balanced:' + SHOWN[0]].text()} | {s['fdr'].text()} | {missing[r.name]} |"
        )
    return lines


def verdicts(scores: dict[str, dict[str, Estimate]]) -> list[str]:
    """Which readings tell TD from stopped early by the rule written here: the interval's lower end at least
    ``SEPARATES``; which cannot: the upper end below it."""
    key = "auroc:" + SHOWN[0]
    tell = [n for n, s in scores.items() if s[key].lo is not None and s[key].lo >= SEPARATES]
    cannot = [n for n, s in scores.items() if s[key].hi is not None and s[key].hi < SEPARATES]
    rest = [n for n in scores if n not in tell + cannot]
    named = lambda names: ", ".join(f"`{n}`" for n in names) or "none"  # noqa: E731
    return [
        f"*Rule*: a reading **tells TD from stopped early** when its AUROC's 95% interval lies at or above "
        f"{SEPARATES}, **cannot** when it lies below, and the sample does not decide otherwise. Tells: "
        f"{named(tell)}. Cannot: {named(cannot)}. Undecided: {named(rest)}.",
    ]


def write_report(records: Sequence[dict[str, Any]], out_dir: Path, title: str = "public") -> Path:
    scores = scored(records)
    n = counts(records)
    lines = [
        f"# Readings as classifiers of trained checkpoints ({title})",
        "",
        f"{n['checkpoints']} checkpoints of {n['runs']} runs. Labels (function space, the verdict ladder): "
        + ", ".join(f"{k} {v}" for k, v in n["label"].items())
        + ". Objectives: "
        + ", ".join(f"{k} {v}" for k, v in n["objective"].items())
        + ". *Undecided* checkpoints trained on TD are left out of every score (those trained otherwise are "
        "negatives whatever their sample says).",
        "",
        "AUROC: the chance that a checkpoint that runs TD scores above one that does not (0.5: a coin). Balanced "
        "accuracy: of the rule. False discoveries: of the checkpoints the rule calls TD, the share that do not run "
        f"TD. Intervals: 95% percentile, {N_BOOT} resamples of runs (a run's checkpoints move together). *Not made*: "
        "checkpoints where the reading could not be taken (it then ranks lowest and does not call TD).",
        "",
        *table(scores, records),
        *(
            [f"Scored: {len(scores)} of the {len(READINGS)} readings (`--readings`); the others were not asked."]
            if len(scores) < len(READINGS)
            else []
        ),
        "",
        *verdicts(scores),
        "",
        "Comparisons: " + "; ".join(f"*{name}*" for name in COMPARISONS) + " (positives: *runs TD*).",
        "",
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "checkpoints.md").write_text("\n".join(lines))
    data = {"counts": n, "scores": {r: {k: vars(e) for k, e in s.items()} for r, s in scores.items()}}
    (out_dir / "checkpoints.json").write_text(json.dumps(data, indent=1))
    (out_dir / "figures").mkdir(exist_ok=True)
    figure(scores, title, n).savefig(out_dir / "figures" / "checkpoint_auroc.png", dpi=150, bbox_inches="tight")
    return out_dir / "checkpoints.md"


def figure(scores: dict[str, dict[str, Estimate]], title: str, n: dict[str, Any]):
    """Each reading's AUROC with its interval, one marker per comparison; the line at 0.5 is a coin; ``n``: the
    population's ``counts``, named in the title."""
    names = list(scores)
    fig, (ax,) = new_figure(width=6.4, height=0.45 * len(names) + 1.4)
    for k, comparison in enumerate(SHOWN):
        for y, name in enumerate(names):
            e = scores[name]["auroc:" + comparison]
            if e.value is None:
                continue
            offset = y + (k - 0.5) * 0.25
            ax.errorbar(
                e.value,
                offset,
                xerr=[[e.value - e.lo], [e.hi - e.value]],
                fmt="o",
                color=PALETTE[k],
                capsize=3,
                label=comparison if y == 0 else None,
            )
    ax.axvline(0.5, color="grey", lw=0.8, ls=":")
    ax.axvline(SEPARATES, color="grey", lw=0.8, ls="--")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("AUROC (95% interval over runs; dotted: a coin, dashed: 0.95)")
    sample = f"{n['checkpoints']} checkpoints of {n['runs']} runs, {n['label'].get(LABELS[0], 0)} run TD"
    ax.set_title(wrapped(f"Which reading tells a checkpoint that runs TD? {title} population: {sample}", 64))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=len(SHOWN), fontsize=8)  # off the data
    return fig
