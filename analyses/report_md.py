"""``summary.md``: the answers first, in words, then the numbers behind them and the figures.

Every number is printed with what it means for this model (see ``docs/theory.md`` for definitions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from analyses.algorithm_id import MAX_CONDITION
from analyses.baselines import LABELS
from analyses.intervals import Interval
from analyses.neu import population_table



MAX_CONDITION_TEXT = f"{MAX_CONDITION:.0f}"


def _fmt(values) -> str:
    return ", ".join("n/a" if v is None else f"{v:+.2f}" for v in values)


def _num(value: Optional[float], spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def algorithm_sentences(alg: dict[str, Any], base: dict[str, Any], gamma: float) -> list[str]:
    """What the model computes, said in words: against the baselines, iterated, per layer."""
    ext = alg["extrapolation"]
    depth = ext["trained_depth"]
    lines = [f"- **At its trained depth ({depth} layers).** " + base["sentence"]]
    if alg.get("exact_read_unavailable"):
        lines.append(f"- Its layers are not a fixed linear map of the values ({alg['exact_read_unavailable']}): "
                     "the TD coefficients below are a least-squares fit in function space.")
    deepest = ext["depths"][-1]
    lines.append(f"- **Iterated beyond its trained depth** the learned layer {ext['verdict']} (rule: from the "
                 f"{ext['verdict_from']}; ρ(T) < 1 on every task). MSVE {ext['model'][-1]:.3g} at depth {deepest}, "
                 f"the depth the spectrum needs to show (θ* {ext['theta_star'][-1]:.3g}).")
    if not ext["converges"]:
        lines.append("  The learned update is a finite-depth estimator, not a convergent TD algorithm: running it "
                     "longer makes it worse, whatever its weight cosine with θ* says.")
    star = alg.get("theta_star_map")
    if star:
        lines.append(f"- θ*'s map on the same tasks {star['verdict']} (ρ(T) {star['spectral_radius_mean']:.3f} on average)"
                     + (f"; its fixed point is {star['fixed_point_error']:.3f} from v_π (sup norm, mean over tasks)."
                        if star["fixed_point_error"] is not None else "."))
    for row in alg["layers"]:
        lines.append("- " + layer_sentence(row, gamma))
    return lines


def layer_sentence(row: dict[str, Any], gamma: float) -> str:
    head = f"Layer {row['layer']}: "
    if row["source"] == "fit":
        if not row["identifiable"]:
            return (head + f"not identifiable (condition number {row['condition_number']:.0f} of the regression, "
                    f"above {MAX_CONDITION_TEXT}): the TD coefficients of its update cannot be told apart on these tasks.")
        if not row["in_family"]:
            return (head + f"the TD family explains only {row['fve']:.0%} of its update (RMS residual "
                    f"{row['rms_residual']:.3g}): the layer does something this family does not describe.")
    beta = "β = n/a (same-state kernel)" if row["beta"] is None else f"β = {row['beta']:+.3f}"
    text = head + (f"read from its weights: step a = {row['step']:.3f}, kernel {beta} "
                   f"(isotropy cos(A_ff, I) = {row['kernel_isotropy']:+.2f})" if row["source"] == "weights"
                   else f"fitted: step a = {row['step']:.3f}{_ci(row, 'step')}, {beta}")
    if row["b"] is None:
        return text + " (its input values are zero, so its discount cannot be identified)."
    discount = row["effective_discount"]
    text += (f", effective discount b/(−c) = {_num(discount)}{_ci(row, 'effective_discount')} (task γ = {gamma}), "
             f"current-value weight c/a = {_num(row['current_weight'])}{_ci(row, 'current_weight')} (θ*: −1)")
    if row["source"] == "fit":
        text += f"; {row['fve']:.0%} of the update explained (condition number {row['condition_number']:.0f})"
    it = row.get("iteration")
    if it is not None:
        text += (f". Its map on state values {it['verdict']}: spectral radius ρ(T) {it['spectral_radius_mean']:.3f} on "
                 f"average (min {it['spectral_radius_min']:.3f}, max {it['spectral_radius_max']:.3f}), "
                 f"{it['fraction_contracting']:.0%} of tasks below 1")
        if it["fixed_point_error"] is not None:
            text += f"; fixed point {it['fixed_point_error']:.3f} from v_π (sup norm)"
    if discount is not None and not 0 <= discount < 1:
        text += ". An effective discount outside [0, 1) is no discount: the update is not a TD contraction"
    return text + "."


def _ci(row: dict[str, Any], key: str) -> str:
    bounds = (row.get("interval") or {}).get(key)
    return f" [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else ""


def baseline_table(base: dict[str, Any]) -> list[str]:
    """The model beside every no-training estimator on the same tasks, with paired intervals."""
    rows = base["estimators"]
    lines = [f"Baselines on the same {base['n_tasks']} tasks (no training; docs/theory.md §7). MSVE = level "
             "(squared mean error: a wrong value level) + shape (the rest); 95% Student-t intervals over tasks; the "
             "last column is the paired interval of the per-task MSVE difference model − estimator.", "",
             "| estimator | MSVE | level | shape | model − estimator | the model is |", "|---|---|---|---|---|---|",
             f"| trained model | {_iv(rows['model']['msve'])} | {_iv(rows['model']['level'])} | "
             f"{_iv(rows['model']['shape'])} | – | – |"]
    words = {"lower": "better", "higher": "worse", "undecided": "not distinguishable"}
    for name, row in rows.items():
        if name == "model":
            continue
        diff = row["model_minus_baseline"]
        lines.append(f"| {LABELS.get(name, name)} | {_iv(row['msve'])} | {_iv(row['level'])} | {_iv(row['shape'])} | "
                     f"{_iv(diff['difference'])} | {words[diff['verdict']]} |")
    best = base["best_softmax_td"]
    lines += ["", f"The best softmax TD of depth {base['depth']} uses step α = {best['alpha']:.2f} and kernel "
              f"sharpness β = {best['beta']:.2f}, chosen on these tasks (an oracle choice: a lower bound for the family)."]
    return lines


def _iv(d: dict[str, Any]) -> str:
    return Interval(**d).text(".3f")


def neu_lines(neu: Optional[dict[str, Any]]) -> list[str]:
    if not neu:
        return []
    return ["## NEU at the training setting and beyond (Theorem 3)", "",
            f"Population NEU (unbiased: it can come out below 0 where the true value is near 0; mean over "
            f"{neu['repeats']} batches of {neu['tasks_per_batch']} tasks × {neu['windows_per_task']} windows, with its "
            "95% t interval over those batches) and, in parentheses, the batch NEU that training sees (biased upward "
            "by the batch variance).", "", *population_table(neu), "", neu["sentence"], ""]


def limit_sentence(limit: dict[str, Any], fit: dict[str, float]) -> str:
    """θ*'s limit computed (fixed point of its map) beside the geometric fit over a few depths."""
    rows = limit["rows"]
    floors = ", ".join(f"{_iv(r['fixed_point_error_interval']) if r.get('fixed_point_error_interval') else _num(r['fixed_point_error'])}"
                       f" (n = {r['context_len']}, ρ {r['spectral_radius_mean']:.3f})" for r in rows)
    asymptotic = rows[0]["spectral_radius_mean"]
    rate = fit["rate"]
    same = abs(rate - asymptotic) < 0.02
    return (f"θ*'s limit as depth grows, computed as the fixed point of its map on {limit['n_tasks']} tasks (sup error, "
            f"mean over the contracting tasks with its 95% t interval): {floors}. The geometric fit over the report's depths gives rate {rate:.3f} and "
            f"floor {fit['floor']:.3f}; " + ("that rate is the asymptotic one (ρ of the map)." if same else
            f"that rate is not the asymptotic one (ρ of θ*'s map ≈ {asymptotic:.3f}): the fit describes only the "
            "depths it saw, and its floor is not the limit."))


def margin_sentence(margin: dict[str, float], one_minus_c: float, rate: float, gamma: float) -> str:
    C = margin["theta_star_mean"]
    if C <= 0:
        return (f"The Assumption 5.1 margin C = {C:+.3f} is not positive: the population kernel's diagonal is below "
                f"(1+γ)/2 = {(1 + gamma) / 2:.3f}, so Theorem 2's contraction bound (rate 1 − C = {one_minus_c:.3f} "
                f"> 1) does not apply here. θ*'s error still falls with depth (fitted rate {rate:.3f}) because the "
                "kernel-weighted update averages over states; sharper features (one-hot, scale ≥ 3) make C > 0.")
    return (f"The Assumption 5.1 margin C = {C:+.3f} is positive: Theorem 2 bounds θ*'s error by a geometric rate "
            f"1 − C = {one_minus_c:.3f}; the fitted rate is {rate:.3f}.")


def diagonality_sentence(diag: dict[str, Any], model_mean: float) -> str:
    return (f"Kernel diagonality (attention mass a query puts on its own state): model {model_mean:.3f}, θ* "
            f"{diag['theta_star']:.3f} on the same tasks, against the level (1+γ)/2 = {diag['threshold']:.3f} that "
            "Assumption 5.1 asks of the population kernel. θ* itself sits where the features put it, so a model "
            "near θ*'s value has learned θ*'s kernel; only sharper features raise both toward the level.")


def write_markdown(summary: dict[str, Any], out_dir: Path) -> Path:
    m, p, cfg = summary["metrics"], summary["probes"], summary["model_config"]
    diag, margin, conv, alg = summary["diagonality"], summary["margin"], summary["convergence"], summary["algorithm"]
    gamma = summary["config"]["gamma"]
    ext = alg["extrapolation"]
    lines = [
        f"# ICTD analysis of `{summary['source']}`",
        "",
        f"Model: {cfg['form']} form, {cfg['attention']} attention, {cfg['n_layers']} layers, d={cfg['d_features']}, "
        f"{'tied' if cfg['tied'] else 'per-layer'} weights, {cfg['mask']} mask. Every number below is on "
        f"{summary['eval_tasks']}.",
        "",
        "## What does this model compute?",
        "",
        *algorithm_sentences(alg, summary["baselines"], gamma),
        "",
        *baseline_table(summary["baselines"]),
        "",
        "| depth | " + " | ".join(str(d) for d in ext["depths"]) + " |",
        "|---|" + "---|" * len(ext["depths"]),
        "| trained layers, MSVE | " + " | ".join(f"{e:.3g}" for e in ext["model"]) + " |",
        "| θ*, MSVE | " + " | ".join(f"{e:.3g}" for e in ext["theta_star"]) + " |",
        "",
        "## How close is it to θ*?",
        "",
        "| metric | value |",
        "|---|---|",
        f"| eval MSVE (model / θ* at the same depth) | {m['eval_msve']:.4f} / {m['theta_star_msve']:.4f} |",
        f"| cos(A, A*) per layer | {', '.join(f'{c:.3f}' for c in m['cos_A'])} |",
        f"| cos(V, V*) per layer (identifiable entries) | {', '.join(_num(c) for c in m['cos_V'])} |",
        f"| sign match (+, +, −) per layer | {', '.join('yes' if s else 'no' for s in m['signature_match'])} |",
        f"| prediction gap to θ* (RMS) | {p['rms_gap_to_theta_star']:.4f} |",
        f"| sensitivity cosine dv/dx(S_n) | {p['sensitivity_cosine']:.3f} |",
        "",
        "Weight cosines near 1 say the weights point where θ*'s do; they do not say the update converges "
        "(see above: the effective discount and the iteration decide that).",
        "",
        "Value-row signature (reward, target, current), normalised; n/a = not identifiable at that layer:",
        "",
        *[f"- layer {l}: {_fmt(s)}" for l, s in enumerate(m["signature"])],
        "",
        "## Kernel and convergence theory",
        "",
        diagonality_sentence(diag, m["kernel_diagonality_mean"]),
        "",
        margin_sentence(margin, conv["one_minus_C"], conv["theta_star_fit"]["rate"], gamma),
        "",
        limit_sentence(conv["theta_star_limit"], conv["theta_star_fit"]),
        "",
        *neu_lines(summary.get("neu")),
    ]
    return write_with_figures(lines, out_dir)


def write_with_figures(lines: list[str], out_dir: Path) -> Path:
    """``summary.md``: the given lines, then every figure in ``out_dir/figures``."""
    lines = [*lines, "## Figures", ""]
    for name in sorted(p.stem for p in (out_dir / "figures").glob("*.png")):
        lines += [f"### {name.replace('_', ' ')}", "", f"![{name}](figures/{name}.png)", ""]
    path = out_dir / "summary.md"
    path.write_text("\n".join(lines))
    return path


def eval_tasks_label(config, n_tasks: int) -> str:
    """Which tasks every number of a report is computed on (one set for the whole report)."""
    t = config.tasks
    return (f"{n_tasks} held-out {t.family} tasks (evaluation seed {config.eval_seed}; s = {t.n_states}, "
            f"d = {t.d_features}, n = {t.context_len}, γ = {t.gamma}, {t.feature_kind} features × {t.feature_scale})")
