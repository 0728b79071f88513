"""The methods benchmark's report: a table method × case with intervals over seeds, a verdict per cell by
the rules written in it, and figures (ROC curves against the true edges, AUROC with intervals, the probes'
directions against the true basis)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np

from ictd_interp.analyses.figures.style import text_outside
from ictd_interp.analyses.methods_benchmark import leaderboard
from ictd_interp.analyses.methods_benchmark.case_specs import CASES
from ictd_interp.analyses.methods_benchmark.evaluate import CellResult, FeatureScores
from ictd_interp.analyses.methods_benchmark.faithfulness import EPSILON
from ictd_interp.analyses.methods_benchmark.methods import TRUTH
from ictd_interp.analyses.methods_benchmark.report_figures import auroc_figure, direction_figure, roc_figure
from ictd_interp.analyses.methods_benchmark.selection import (
    CHANCE,
    bounded,
    cases_of,
    direction_cells,
    direction_methods,
    edge_methods,
    interval,
    variable_interval,
    variables_of,
)
from ictd_interp.analyses.metrics.intervals import METHOD as INTERVAL_METHOD
from ictd_interp.analyses.metrics.intervals import Interval, t_interval
from ictd_interp.io.run_folder import REQUEST

if TYPE_CHECKING:
    from ictd_interp.analyses.methods_benchmark.run import BenchmarkBudget

RECOVERS = 0.95
EXACT_ANGLE, CLOSE_ANGLE = 1e-3, 5.0
FEATURES_RECOVERED = 0.9  # a feature method recovers the superposed features when its MCC interval lies above
FEATURE_CHANCE = "random-dictionary"  # the feature methods' chance baseline (methods.py), compared seed by seed
RULES = (
    f"An edge method **recovers** the circuit of a case when its AUROC's interval lies above {RECOVERS}; it "
    f"is **not above chance** when the interval contains {CHANCE}, **below chance** when it lies below; "
    f"otherwise **partial**. A direction method is "
    f"**exact** when its worst angle on every seed is below {EXACT_ANGLE}°, **close** when the interval of its "
    f"mean angle lies below {CLOSE_ANGLE}°, **misses** when it lies above, else **undecided** (the seeds "
    f"whose angle is {CLOSE_ANGLE}° or more are counted beside it). A feature method **recovers** the planted "
    f"units when its MCC interval lies above {FEATURES_RECOVERED}, else it is **partial**; it is **above "
    f"chance** when its MCC less the `{FEATURE_CHANCE}` baseline's (as many latents), seed by seed, has an "
    "interval above 0 (**not above chance** when it contains 0, **below chance** when it lies below)."
)


ONE_SEED = "one seed: no verdict"


def edge_verdict(auroc: Interval) -> str:
    """By the interval over seeds; one seed has none, so no verdict."""
    if auroc.n < 2:
        return ONE_SEED
    if auroc.lo > RECOVERS:
        return "recovers"
    if auroc.lo <= CHANCE <= auroc.hi:
        return "not above chance"
    if auroc.hi < CHANCE:
        return "below chance"
    return "partial"


def direction_verdict(cells: Sequence[CellResult], case: str, method: str, variable: str) -> str:
    rows = [c.scores[method].variables[variable] for c in cells if c.case == case]
    angle = bounded([r.angle for r in rows], "angle")
    if np.max([r.max_angle for r in rows]) < EXACT_ANGLE:  # a NaN angle is never exact
        return "exact"
    low, high = (angle.lo, angle.hi) if angle.n >= 2 else (angle.mean, angle.mean)
    return "close" if high < CLOSE_ANGLE else "misses" if low > CLOSE_ANGLE else "undecided"


def seeds_off(cells: Sequence[CellResult], case: str, method: str, variable: str) -> str:
    """How many seeds' mean angle is ``CLOSE_ANGLE`` or more (or not a number), of how many."""
    angles = [c.scores[method].variables[variable].angle for c in cells if c.case == case]
    return f"{sum(not a < CLOSE_ANGLE for a in angles)}/{len(angles)}"


def failure_lines(cells: Sequence[CellResult]) -> list[str]:
    """Every method that failed on some cell (its output held NaN or an infinity), with the first reason."""
    failed: dict[str, list[str]] = {}
    for c in cells:
        for method, reason in getattr(c, "failed", {}).items():
            failed.setdefault(method, []).append(f"{c.case} seed {c.seed}: {reason}")
    if not failed:
        return []
    return [
        "",
        "## Methods that failed",
        "",
        "A method that raises (reading what its problem does not hold included), edits its model or tasks in "
        "place, or returns what cannot be scored (the wrong kind of output, a missing edge or site, a zero or "
        "non-finite vector, a non-finite score) is not scored on that cell; one that failed on any cell is left "
        "out of the tables above.",
        "",
        *[f"- `{m}` failed on {len(r)} cell(s); first: {r[0]}" for m, r in failed.items()],
    ]


def circuit_text(cells: Sequence[CellResult]) -> str:
    """Whether the planted edges are a circuit at ``EPSILON`` on each seed (``faithfulness.circuit_check``)."""
    checks = [c.circuit for c in cells if c.circuit is not None]
    if not checks:
        return ""
    joint, less = [f for f, _ in checks], [g for _, g in checks]
    held = sum(f >= 1 - EPSILON > g for f, g in checks)
    return (
        f"; the planted edges alone (every other edge resampled): faithfulness {min(joint):.3f}–{max(joint):.3f}, "
        f"and at most {max(less):.3f} with any one of them ablated too: a circuit at ε = {EPSILON} on {held} of "
        f"{len(checks)} seeds"
    )


def size_lines(cells: Sequence[CellResult], cases: list[str]) -> list[str]:
    """The table of node AUROC and faithfulness over circuit size (``faithfulness.size_scores``) per method and
    case, each a mean over seeds with its interval; empty for cells saved before these scores existed."""
    methods = [m for m in edge_methods(cells) if cells[0].scores[m].cpr is not None]
    if not methods:
        return []
    lines = [
        "",
        "Faithfulness over circuit size (MIB's measures): the top k edges of the method's ranking kept (false "
        "edges first among ties), every other edge ablated, f = <p − p_none, p_full − p_none> / |p_full − p_none|² "
        "(the share of the full model's effect recovered: 1 all of it, above 1 overshooting) at 21 kept shares from "
        "0 to 1; **CPR** the area under f (higher is better), **CMD** the area under |1 − f| (lower is better; 0 "
        "only when the first edges kept already give the full model's answers). Ablation: resampling (the "
        "sender's output on the corrupted tasks), the sender's mean output, or zero. Node AUROC ranks each node by "
        "the largest score of the edges it sends.",
        "",
        "| method | case | node AUROC | CPR (resample) | CMD (resample) | CMD (mean) | CMD (zero) |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in methods:
        for c in cases:
            keys = ("node_auroc", "cpr", "cmd", "cmd_mean", "cmd_zero")
            found = [interval(cells, c, m, k) for k in keys]  # node AUROC: none where every node is the circuit's
            lines.append(f"| {m} | {c} | " + " | ".join(i.text(".3f") if i else "—" for i in found) + " |")
    return lines


def markdown(cells: Sequence[CellResult], budget: BenchmarkBudget, table: Sequence[dict] = ()) -> str:
    """``report.md``: the cases, the rules, then each kind of method's tables, what failed, and a reading."""
    cases = cases_of(cells)
    lines = _case_lines(cells, budget) + leaderboard.lines(table) + ["", "## Rules", "", RULES]
    lines += _edge_lines(cells, cases) + size_lines(cells, cases) + _circuit_lines(cells, cases)
    for m in direction_methods(cells):
        lines += _direction_lines(cells, m)
    lines += feature_lines(cells)
    lines += failure_lines(cells)
    lines += ["", "## What the numbers mean", "", reading(cells), ""]
    return "\n".join(lines)


def _case_lines(cells: Sequence[CellResult], budget: BenchmarkBudget) -> list[str]:
    """The budget, each case with its size and circuit check, and what the seeds can decide."""
    seeds = budget.seeds
    lines = [
        "# Methods benchmark: interpretability methods against circuits known exactly",
        "",
        f"Budget `{budget.name}`: {seeds} benchmark seeds per case, {budget.n_tasks} clean and as many "
        f"corrupted prompts (independent Boyan-chain tasks) per seed. Every number is a mean over the seeds "
        f"with its {INTERVAL_METHOD} in brackets, cut to the score's range (an angle's at 0°, an AUROC's "
        "at 1).",
        "",
        "## Cases",
        "",
    ]
    for c in cases_of(cells):
        spec, cell = CASES[c], next(x for x in cells if x.case == c)
        lines.append(
            f"- **{c}**: {spec.description} ({spec.n_layers} layers, {spec.n_heads} head"
            f"{'s' if spec.n_heads > 1 else ''} per layer, d_model {spec.d_model}; "
            f"{cell.true_edges} true edges of {cell.edges}). To solve it: {spec.solve}"
            + circuit_text([x for x in cells if x.case == c])
        )
    return lines + [
        "",
        (
            "With one seed there is no interval over seeds and no verdict"
            if seeds < 2
            else f"With {seeds} seeds an interval's half-width is t(0.975, {seeds - 1})·sd/√{seeds}: a wide one "
            "decides little"
        )
        + (", and the `full` budget (20 seeds) narrows it" if budget.name != "full" else "")
        + ". A case with one false edge makes AUROC coarse (each seed's value is a multiple of 1/(true × false "
        "edges)).",
    ]


def _edge_lines(cells: Sequence[CellResult], cases: list[str]) -> list[str]:
    """Each edge method's AUROC and AUPRC per case, with its verdict."""
    methods = edge_methods(cells)
    if not methods:
        return []
    lines = [
        "",
        "## Edge methods: ranking the computation graph's edges against the true circuit",
        "",
        "AUROC: the chance that a true edge outranks a false one (0.5: chance); AUPRC: average precision "
        "(chance: the share of true edges).",
        "",
        "| method | " + " | ".join(cases) + " |",
        "|" + "---|" * (len(cases) + 1),
    ]
    for m in methods:
        row = [m]
        for c in cases:
            auroc, auprc = interval(cells, c, m, "auroc"), interval(cells, c, m, "auprc")
            row.append(f"AUROC {auroc.text('.3f')}, AUPRC {auprc.text('.3f')}: **{edge_verdict(auroc)}**")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _circuit_lines(cells: Sequence[CellResult], cases: list[str]) -> list[str]:
    """The circuits of the methods that return one: precision, recall, size and faithfulness per case."""
    methods = [m for m in edge_methods(cells) if cells[0].scores[m].faithfulness is not None]
    if not methods:
        return []
    lines = [
        "",
        "Methods that return a circuit: its precision and recall against the true edges, its size "
        "and its faithfulness (1: the circuit alone, every other edge patched to the corrupted run, "
        "gives the full model's answers; 0: no better than the corrupted run).",
        "",
        "| method | case | precision | recall | edges | faithfulness |",
        "|---|---|---|---|---|---|",
    ]
    for m in methods:
        for c in cases:
            keys = ("precision", "recall", "circuit_edges", "faithfulness")
            lines.append(f"| {m} | {c} | " + " | ".join(interval(cells, c, m, k).text(".3g") for k in keys) + " |")
    return lines


def _direction_lines(cells: Sequence[CellResult], m: str) -> list[str]:
    """A direction method's angle, worst site, R², IIA and verdict per case and variable."""
    lines = [
        "",
        f"## Direction method `{m}`: the variables' directions in the rotated residual stream",
        "",
        "Angle: the principal angle (degrees) between the direction found and the true one, averaged "
        "over the sites where the variable lies exactly on it; worst site: each seed's largest angle over "
        "those sites, averaged over the seeds; R²: the share of "
        "the true variable's variance on held-out tasks explained by the read-out along the direction "
        "found; IIA: interchange-intervention accuracy, ``1 − MSE / Var`` of the model's predictions "
        "when the component along the direction is swapped from another task's prompt, against the "
        "causal model's counterfactual (held-out pairs): an R² of the counterfactual, 1 when exact, below "
        "0 when worse than predicting its mean; placebo IIA: the same with TransformerLens's norm-matched "
        "placebo (`NormMatchedPlacebo`) in place of the swap, which moves every position exactly as far as the "
        "swap does but along a random direction: what the displacement alone buys (— before TransformerLens 4.3).",
        "",
        f"| case | variable | angle (°) | worst site (°) | seeds ≥ {CLOSE_ANGLE:g}° | R² | IIA | placebo IIA "
        "| verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    asked = direction_cells(cells)
    keys = ("angle", "max_angle", "r2", "iia", "placebo_iia")
    for c in cases_of(asked):
        for var in variables_of(asked, m):
            vals = [_text(variable_interval(cells, c, m, var, k)) for k in keys]
            vals.insert(2, seeds_off(cells, c, m, var))
            lines.append(f"| {c} | {var} | " + " | ".join(vals) + f" | {direction_verdict(cells, c, m, var)} |")
    return lines


def _text(iv: Optional[Interval]) -> str:
    return "—" if iv is None else iv.text(".3g")


def _feature_rows(cells: Sequence[CellResult]) -> dict[tuple[str, str], list[FeatureScores]]:
    """Each feature method's scores on each case it was scored on, by ``(method, case)``, over the seeds."""
    rows: dict[tuple[str, str], list[FeatureScores]] = {}
    for c in cells:
        for m, s in c.scores.items():
            if isinstance(s, FeatureScores):
                rows.setdefault((m, c.case), []).append(s)
    return rows


def feature_lines(cells: Sequence[CellResult]) -> list[str]:
    """The feature methods' table, on the cases with superposed features (none: no lines)."""
    table = _feature_rows(cells)
    if not table:
        return []
    lines = [
        "",
        "## Feature methods: superposed sparse features recovered",
        "",
        "MCC: each planted feature (an MLP unit; in `entangled` a pair of units firing together) matched to a "
        "distinct latent so that the summed |Pearson r| on held-out positions is largest, the mean matched |r| (a "
        "feature without a latent counts 0), averaged over the sites after each block; decoder |cos|: the matched "
        "latents' decoder directions against the features' write directions (a random direction's expected |cos| "
        f"in d dimensions is about √(2/(π d))); the paired columns: the method's score less `{FEATURE_CHANCE}`'s "
        "on the same seeds, for a method with as many latents (a narrower one, such as the principal directions, "
        "can match fewer features). `weight-units` reads the weights alone: a case it solves does not need "
        "activations.",
        "",
        f"| method | case | features / latents (last site) | MCC | MCC − {FEATURE_CHANCE} (paired) | "
        "decoder \\|cos\\| | \\|cos\\| − the same (paired) | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (m, case), rows in table.items():
        mcc, cos = bounded([r.mcc for r in rows], "mcc"), bounded([r.cosine for r in rows], "cosine")
        diff, cos_diff = chance_difference(cells, m, case), chance_difference(cells, m, case, "cosine")
        verdict = feature_verdict(mcc) + ("" if diff is None else f"; {chance_verdict(diff)}")
        lines.append(
            f"| {m} | {case} | {rows[0].features} / {rows[0].latents} | {mcc.text('.3f')} | "
            f"{'—' if diff is None else diff.text('+.3f')} | {cos.text('.3f')} | "
            f"{'—' if cos_diff is None else cos_diff.text('+.3f')} | **{verdict}** |"
        )
    return lines


def feature_verdict(mcc: Interval) -> str:
    return "recovers" if (mcc.lo if mcc.n >= 2 else mcc.mean) > FEATURES_RECOVERED else "partial"


def chance_difference(cells: Sequence[CellResult], method: str, case: str, key: str = "mcc") -> Interval | None:
    """A feature method's score (``FeatureScores`` field ``key``) less the chance baseline's, seed by seed (None:
    it is the baseline, no baseline was run, or the two have different numbers of latents)."""
    pairs = [
        (c.scores[method], c.scores[FEATURE_CHANCE])
        for c in cells
        if c.case == case and method in c.scores and FEATURE_CHANCE in c.scores
    ]
    if method == FEATURE_CHANCE or not pairs or any(a.latents != b.latents for a, b in pairs):
        return None
    return t_interval([getattr(a, key) - getattr(b, key) for a, b in pairs])


def chance_verdict(diff: Interval) -> str:
    if diff.n < 2 or not (np.isfinite(diff.lo) and np.isfinite(diff.hi)):
        return "no interval against chance"
    return "above chance" if diff.lo > 0 else "below chance" if diff.hi < 0 else "not above chance"


def reading(cells: Sequence[CellResult]) -> str:
    """The findings in words, from the verdicts (never from numbers typed here)."""
    parts = []
    for c in cases_of(cells) if edge_methods(cells) else []:
        verdicts = {m: edge_verdict(interval(cells, c, m, "auroc")) for m in edge_methods(cells) if m != TRUTH}
        if all(v == ONE_SEED for v in verdicts.values()):
            parts.append(f"On **{c}**, one seed: no method is judged (a verdict needs an interval over two or more).")
            continue
        good = [m for m, v in verdicts.items() if v == "recovers" and m != "random"]
        bad = [f"{m} ({v})" for m, v in verdicts.items() if v != "recovers" and m != "random"]
        parts.append(
            f"On **{c}**, "
            + (f"{', '.join(good)} recover the circuit" if good else "no edge method recovers the circuit")
            + (f"; not {', '.join(bad)}" if bad and good else f": {', '.join(bad)}" if bad else "")
            + (f"; the random baseline is {verdicts['random']}" if "random" in verdicts else "")
            + "."
        )
    if parts:
        parts.append(
            "Single-edge patching and its gradient estimates score each edge alone: a pair of heads whose "
            "writes cancel has large single-edge effects and none together, so wherever a case has such "
            "pairs these methods rank some of the pairs' edges above true edges (a method that tests "
            "edges jointly might tell them apart; none is benchmarked here)."
        )
    return " ".join(parts + feature_reading(cells))


def feature_reading(cells: Sequence[CellResult]) -> list[str]:
    """The feature methods' findings in words, from their MCC intervals and verdicts."""
    found = {key: bounded([r.mcc for r in rows], "mcc") for key, rows in _feature_rows(cells).items()}
    if not found:
        return []
    words = []
    for (m, case), iv in found.items():
        diff = chance_difference(cells, m, case)
        words.append(
            f"{m} on {case} reaches MCC {iv.text('.3f')}"
            + (" (recovers the superposed features)" if feature_verdict(iv) == "recovers" else "")
            + ("" if diff is None else f", {diff.text('+.3f')} against {FEATURE_CHANCE}: {chance_verdict(diff)}")
        )
    return [
        "Feature methods: " + "; ".join(words) + " (1: every planted feature is one latent; principal "
        "directions can match at most as many features as the residual has dimensions)."
    ]


def write_report(cells: Sequence[CellResult], budget: BenchmarkBudget, out_dir: Path) -> Path:
    figures = Path(out_dir) / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    drawn = {"roc": roc_figure(cells), "auroc": auroc_figure(cells)} if edge_methods(cells) else {}
    for m in direction_methods(cells):  # drawn on the cell where the method's directions are furthest off
        worst = max(direction_cells(cells), key=lambda c: max(s.angle for s in c.scores[m].variables.values()))
        drawn[f"directions_{m}"] = direction_figure(cells, m, worst.case, worst.seed)
    for name, fig in drawn.items():
        clipped = text_outside(fig)
        if clipped:
            raise RuntimeError(f"figure {name}: clipped {clipped}")
        fig.savefig(figures / f"{name}.png", dpi=120)
    request = Path(out_dir) / REQUEST
    table = leaderboard.rows(cells, json.loads(request.read_text()) if request.exists() else {})
    leaderboard.write(table, out_dir)
    path = Path(out_dir) / "report.md"
    path.write_text(
        markdown(cells, budget, table) + "\n" + "\n".join(f"![{name}](figures/{name}.png)" for name in drawn) + "\n"
    )
    return path
