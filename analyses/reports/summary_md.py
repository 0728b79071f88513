"""``summary.md`` from a typed ``Summary``: the answers first, in words, then the numbers behind them and
the figures. Every number is printed with what it means for this model (``docs/theory.md`` defines them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ictd_interp.analyses.metrics.algorithm_id import MAX_CONDITION, LayerReading
from ictd_interp.analyses.metrics.baselines import LABELS, MODEL_ROW, Baselines
from ictd_interp.analyses.metrics.in_context import PAST, InContext
from ictd_interp.analyses.metrics.intervals import Interval
from ictd_interp.analyses.metrics.ladder import ladder_sentence, ladder_table
from ictd_interp.analyses.metrics.neu import NeuGrid, population_table
from ictd_interp.analyses.metrics.readings import LONG, MEASURED_ON, WeightReading
from ictd_interp.analyses.metrics.stability import over_training_sentence
from ictd_interp.config.registry import FAMILIES, OBJECTIVES
from ictd_interp.io.text import shown

MAX_CONDITION_TEXT = f"{MAX_CONDITION:.0f}"


def signs_text(values) -> str:
    return ", ".join("n/a" if v is None else f"{v:+.2f}" for v in values)


def layer_sentence(row: LayerReading, gamma: float) -> str:
    head = f"Layer {row.layer}: "
    if row.source == "fit":
        if not row.identifiable:
            return (
                head + f"not identifiable (condition number {row.condition_number:.0f} of the regression, "
                f"above {MAX_CONDITION_TEXT}): the TD coefficients "
                "of its update cannot be told apart on these tasks."
            )
        if not row.in_family:
            return (
                head + f"the TD family explains only {row.fve:.0%} of its update (RMS residual "
                f"{row.rms_residual:.3g}): the layer does something this family does not describe."
            )
    ci = row.interval
    beta = "β = n/a (same-state kernel)" if row.beta is None else f"β = {row.beta:+.3f}"
    text = head + (
        f"read from its weights: step a = {row.step:.3f}, kernel {beta} "
        f"(isotropy cos(A_ff, I) = {row.kernel_isotropy:+.2f})"
        if row.source == "weights"
        else f"fitted: step a = {row.step:.3f}{_ci(ci and ci.step)}, {beta}"
    )
    if row.b is None:
        return text + " (its input values are zero, so its discount cannot be identified)."
    discount = row.effective_discount
    text += (
        f", effective discount b/(−c) = {shown(discount)}{_ci(ci and ci.effective_discount)} (task γ = "
        f"{gamma}), current-value weight c/a = {shown(row.current_weight)}{_ci(ci and ci.current_weight)} "
        "(θ*: −1)"
    )
    if row.source == "fit":
        text += f"; {row.fve:.0%} of the update explained (condition number {row.condition_number:.0f})"
    it = row.iteration
    if it is not None:
        text += (
            f". Its map on state values {it.verdict}: spectral radius ρ {it.spectral_radius_mean:.3f} on "
            f"average (min {it.spectral_radius_min:.3f}, max {it.spectral_radius_max:.3f}), "
            f"{it.fraction_contracting:.0%} of tasks below 1"
        )
        if it.fixed_point_error is not None:
            text += f"; fixed point {it.fixed_point_error:.3f} from v_π (sup norm)"
    if discount is not None and not 0 <= discount < 1:
        text += ". An effective discount outside [0, 1) is no discount: the update is not a TD contraction"
    return text + "."


def _ci(bounds: Optional[list[float]]) -> str:
    return f" [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else ""


def baseline_table(base: Baselines) -> list[str]:
    """The model beside every no-training estimator on the same tasks, with paired intervals."""
    rows, model = base.estimators, base.estimators[MODEL_ROW]
    lines = [
        f"Baselines on the same {base.n_tasks} tasks (no training; docs/theory.md §7). MSVE = level "
        "(squared mean error: a wrong value level) + shape (the rest), over the context's positions 0..n, the "
        "query included; 95% Student-t intervals over tasks; the "
        "last column is the paired interval of the per-task MSVE difference model − estimator.",
        "",
        "| estimator | MSVE | level | shape | model − estimator | the model is |",
        "|---|---|---|---|---|---|",
        f"| trained model | {interval_text(model.msve)} | {interval_text(model.level)} | "
        f"{interval_text(model.shape)} | – | – |",
    ]
    words = {"lower": "better", "higher": "worse", "undecided": "not distinguishable"}
    for name, row in rows.items():
        if name == MODEL_ROW:
            continue
        diff = row.model_minus_baseline
        cells = [interval_text(x) for x in (row.msve, row.level, row.shape, diff.difference)]
        lines.append(f"| {LABELS.get(name, name)} | {' | '.join(cells)} | {words[diff.verdict]} |")
    best = base.best_softmax_td
    lines += [
        "",
        f"The best softmax TD of depth {base.depth} uses step α = {best.alpha:.2f} and kernel "
        f"inverse temperature β = {best.beta:.2f} (the features scaled by √β), chosen on these tasks "
        "(an oracle choice: the best of the family on a grid, an optimistic baseline). Each row is its own "
        f"95% comparison; no correction is made across these {len(rows) - 1} rows.",
    ]
    return lines


def interval_text(interval: Any) -> str:
    return (interval if isinstance(interval, Interval) else Interval(**interval)).text(".3f")


def neu_lines(neu: Optional[NeuGrid]) -> list[str]:
    if not neu:
        return []
    return [
        "## NEU at the training setting and beyond (Theorem 3)",
        "",
        f"Population NEU ‖E u‖² (the unbiased U-statistic over all pairs of {neu.n_tasks:,} tasks × "
        f"{neu.windows_per_task} windows, the same tasks for "
        "every model; it can come out below 0 where the true "
        "value is near 0), with its 95% jackknife interval over "
        f"{neu.groups} groups of tasks; the zero predictor "
        "also in closed form; differences paired by task.",
        "",
        *population_table(neu),
        "",
        neu.sentence,
        "",
    ]


def write_with_figures(lines: list[str], out_dir: Path, drawn: bool = True) -> Path:
    """``summary.md``: the given lines, then every figure in ``out_dir/figures`` (``drawn=False``: a line
    saying how to draw them)."""
    lines = [*lines, "## Figures", ""]
    if not drawn:
        lines += [
            "Not drawn here (a study cell: its study draws across cells); `ictd-interp analyze RUN --out DIR` "
            "draws this run's figures.",
            "",
        ]
    for name in sorted(p.stem for p in (out_dir / "figures").glob("*.png")):
        lines += [f"### {name.replace('_', ' ')}", "", f"![{name}](figures/{name}.png)", ""]
    path = out_dir / "summary.md"
    path.write_text("\n".join(lines))
    return path


def control_algorithm_sentence(config: Any) -> list[str]:
    """Which control algorithm a stylised model's layers can run, for a model trained on a control family (none
    otherwise; docs/theory.md §14): a TD reading on the state-action chain is a SARSA reading."""
    if config.tasks.n_actions is None:
        return []
    toward = (
        f" It was trained toward q* (objective {config.objective}); that moves the weights its layers reach, "
        "not the form of their update."
        if OBJECTIVES[config.objective].control
        else ""
    )
    return [
        "- **Which control algorithm.** On the state-action chain each layer's bootstrap (the shift) reads the "
        "value the context holds at the next pair (S_{k+1}, A_{k+1}), the action the behaviour took: a layer read "
        "above as a TD step is a **SARSA** step, which estimates q of the behaviour. Expected SARSA and "
        "Q-learning bootstrap on q(S_{k+1}, a') for every action a', which needs a column per action that this "
        "prompt does not have (action columns: θ* runs both exactly with them, docs/theory.md §14), so no layer "
        "of this model runs them." + toward
    ]


def summary_header(source: str, config: Any, model: Any, n_tasks: int, curves: Any) -> dict[str, Any]:
    """The fields every architecture's ``Summary`` opens with: where the model came from, its settings, the
    evaluation tasks and the training curves."""
    return {
        "source": source,
        "config": config.to_dict(),
        "model_config": model.cfg.to_dict(),
        "architecture": model.cfg.architecture,
        "n_eval_tasks": n_tasks,
        "eval_tasks": eval_tasks_label(config, n_tasks),
        "curves": curves,
    }


def eval_tasks_label(config: Any, n_tasks: int) -> str:
    """Which tasks every number of a report is computed on (one set for the whole report)."""
    t = config.tasks
    label = (
        f"{n_tasks} held-out {t.family} tasks (evaluation seed {config.eval_seed}; s = {t.n_states}, "
        f"d = {t.d_features}, n = {t.context_len}, γ = {t.gamma}, {t.feature_kind} features × {t.feature_scale})"
    )
    if t.family in FAMILIES and FAMILIES[t.family].control:
        label += (
            f" — control tasks: the state-action chain of two-action MDPs of {t.n_states} states under the "
            'uniform behaviour policy, so a "state" below is a state-action pair, v_π is q of that policy and '
            "TD is SARSA (docs/theory.md §14)"
        )
        if OBJECTIVES[config.objective].control:
            label += (
                f"; this model was trained toward q* (objective {config.objective}), and every error below is "
                "still against q of the behaviour policy (docs/theory.md §6)"
            )
    return label


def answer_lines(ic: Optional[InContext], readings: Optional[list[WeightReading]] = None) -> list[str]:
    """summary.md's opening answer block (at most seven lines): does the model learn in context, how close its update
    and weights are to θ*'s, what iterating it does, its best baseline (docs/theory.md §7a) and what its weights say
    (``readings_sentence``)."""
    if ic is None:
        return []
    d, it = ic.discount, ic.iterated
    discount = (
        "not identifiable"
        if d.value is None
        else (
            f"{d.value:.3f} (task γ = {d.gamma:g}): {d.verdict}"
            + (
                f", bootstrap 95% [{d.interval[0]:.3f}, {d.interval[1]:.3f}]"
                if d.source == "fit"
                else ", read exactly from the weights"
            )
        )
    )
    lines = [
        "## Answer",
        "",
        f"- **{ic.verdict}**",
        *([f"- {ladder_sentence(ic.ladder)}"] if ic.ladder is not None else []),
        *([f"- {over_training_sentence(ic.over_training)}"] if ic.over_training is not None else []),
        f"- Best baseline: {LABELS.get(ic.best_baseline, ic.best_baseline)}, MSVE {ic.best_baseline_msve:.3g} "
        f"(the model's {ic.msve.mean:.3g}).",
        f"- Update: effective discount of the last layer {discount}.",
        f"- Iterated to {it.depths[1]} layers ({PAST}× its depth) its MSVE goes {it.msve[0]:.3g} → "
        f"{it.msve[1]:.3g}: **{it.verdict}** (per-task change {it.change.text('+.3g')}; the rule: flat when "
        "the interval lies within ±5% of the trained depth's MSVE).",
    ]
    if ic.cos_A is not None and ic.cosine_nulls:
        null = "; ".join(_null_text(r) for r in ic.cosine_nulls)
        lines.append(
            f"- Weights: lowest-layer cos(A, A*) {ic.cos_A:.3f}, cos(V, V*) {shown(ic.cos_V)}; the same "
            f"cosines of models that run no TD: {null}."
        )
    return lines + ([f"- {readings_sentence(readings)}"] if readings else []) + [""]


READ_AS = {
    "discount": lambda s: f"effective discount {-s:.3f} from γ",
    # |MSVE(limit) / MSVE(CE) − 1| = −s; past 1 the ratio itself is 1 − s (an error is never negative)
    "depth_limit": lambda s: (
        f"the layer's limit {-s:.0%} from CE's error at n = {LONG}"
        if s > -1
        else f"the layer's limit at {1 - s:.3g}× CE's error at n = {LONG}"
    ),
    "cos_V": lambda s: f"cos(V, V*) {s:.4f}",
    "cos_A": lambda s: f"cos(A, A*) {s:.4f}",
    "signature": lambda s: "signature (+, +, −)" + ("" if s else " not") + " held",
}


def readings_sentence(readings: list[WeightReading]) -> str:
    """What the weights say: each reading's value and its rule's call, then which readings the checkpoint track found
    able to tell a model that runs TD from a stopped-early one (AUROC, docs/methods_benchmark.md)."""

    def auroc(r: WeightReading) -> str:
        return "AUROC unmeasured" if r.auroc is None else f"AUROC {r.auroc[0]:.2f} [{r.auroc[1]:.2f}, {r.auroc[2]:.2f}]"

    def one(r: WeightReading) -> str:
        value = "not made" if r.score is None else READ_AS[r.name](r.score)
        return f"{value}: **{'reads as TD' if r.reads_as_td else 'does not read as TD'}** ({auroc(r)})"

    tell = [r for r in readings if r.tells is not False]
    cannot = [r for r in readings if r.tells is False]
    text = (
        "What the weights say (each reading's rule, and its AUROC for runs TD against stopped early on the checkpoint "
        f"track's {MEASURED_ON}, docs/methods_benchmark.md): " + ("; ".join(one(r) for r in tell) or "no reading") + "."
    )
    if cannot:
        text += " Cannot tell the two apart: " + ", ".join(f"{r.name} ({auroc(r)})" for r in cannot) + "."
    return text


def ladder_lines(ic: Optional[InContext]) -> list[str]:
    """summary.md's verdict ladder: the model across context lengths and depths beside the in-context estimators."""
    if ic is None or ic.ladder is None:
        return []
    return [
        "## Across context and depth: the verdict ladder",
        "",
        *ladder_table(ic.ladder),
        "",
        f"Rule: {ic.ladder.rule}.",
        "",
        "Drawn in `figures/ladder.png`: the model's MSVE against depth at each n, the estimators as lines.",
        "",
    ]


def _null_text(row) -> str:
    if row.cos_A_range is not None:
        v = "" if row.cos_V_range is None else f", cos V in [{row.cos_V_range[0]:.2f}, {row.cos_V_range[1]:.2f}]"
        return f"{row.name} ({row.n} seeds) cos A in [{row.cos_A_range[0]:.2f}, {row.cos_A_range[1]:.2f}]{v}"
    return f"{row.name} {row.cos_A:.3f} / {shown(row.cos_V)}"


def acting_lines(acting) -> list[str]:
    """A control model acting on its in-context q (``ictd_interp.analyses.metrics.acting.model_acting``), in words."""
    if acting is None:
        return []
    r, v = acting.regret, acting.versus
    text = [
        f"- **Acting** on {acting.n_tasks} fresh MDPs of its family (one context each under the uniform behaviour "
        f"policy; regret J(π*) − J(π) computed exactly, 95% t intervals over the MDPs, the optimal return "
        f"{acting.optimal_return.text('.3f')}):"
    ]
    words = {"lower": "better", "higher": "worse", "undecided": "not told apart"}
    for name, label in (("greedy", "its greedy policy"), ("softmax", "its softmax policy (temperature 1)")):
        text.append(
            f"  {label}: regret {r[name].text('.3f')}; minus the behaviour's, task by task "
            f"{v[name].difference.text('+.3f')} ({words[v[name].verdict]})."
        )
    text.append(f"  The behaviour policy, uniform over actions, has regret {r['behaviour'].text('.3f')}.")
    return text
