"""``summary.md``: the answers first, in words, then the numbers behind them and the figures.

Every number is printed with what it means for this model (see ``docs/theory.md`` for definitions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

OUT_OF_FAMILY = 0.95  # identification: below this fraction of variance explained the family fails


def _fmt(values) -> str:
    return ", ".join("n/a" if v is None else f"{v:+.2f}" for v in values)


def _num(value: Optional[float], spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def algorithm_sentences(alg: dict[str, Any], gamma: float) -> list[str]:
    """What the model computes, said in words: best in family, iteration, per-layer algorithm."""
    best, ext = alg["best_in_family"], alg["extrapolation"]
    depth = ext["trained_depth"]
    lines = [f"- **At its trained depth ({depth} layers)** the model's MSVE is {best['model_msve']:.3f}, against "
             f"{best['theta_star_msve']:.3f} for θ* and {best['msve']:.3f} for the best softmax TD of the same depth "
             f"(step α = {best['alpha']:.2f}, kernel sharpness β = {best['beta']:.2f})."]
    if best["model_msve"] < 0.95 * best["msve"]:
        lines.append("  It beats every member of that family: pretraining found a better depth-"
                     f"{depth} estimator than any softmax TD, i.e. something outside the family.")
    elif best["model_msve"] <= 1.05 * best["msve"]:
        lines.append("  That is as good as the best member of the family: pretraining found the best depth-"
                     f"{depth} softmax TD, not θ* itself.")
    else:
        lines.append("  The best member of the family does better: training has not reached the family's optimum.")
    deepest = ext["depths"][-1]
    lines.append(f"- **Iterated beyond its trained depth** the learned layer {ext['verdict']}: MSVE "
                 f"{ext['model'][-1]:.3g} at depth {deepest} (θ* {ext['theta_star'][-1]:.3g}).")
    if ext["verdict"] != "converges":
        lines.append("  The learned update is a finite-depth estimator, not a convergent TD algorithm: running it "
                     "longer makes it worse, whatever its weight cosine with θ* says.")
    for row in alg["layers"]:
        lines.append("- " + layer_sentence(row, gamma))
    return lines


def layer_sentence(row: dict[str, Any], gamma: float) -> str:
    head = f"Layer {row['layer']}: "
    if not row["in_family"]:
        return (head + f"the TD family explains only {row['fve']:.0%} of its update (RMS residual "
                f"{row['rms_residual']:.3g}): the layer does something this family does not describe.")
    text = head + f"softmax TD with step a = {row['step']:.3f}, β = {row['beta']:.2f}"
    if row["b"] is None:
        return text + " (its input values are zero, so its discount cannot be identified)."
    discount = row["effective_discount"]
    text += (f", effective discount b/(−c) = {_num(discount)} (task γ = {gamma}), current-value weight "
             f"c/a = {_num(row['current_weight'])} (θ*: −1); {row['fve']:.0%} of the update explained")
    it = row.get("iteration")
    if it is not None:
        state = "contracts" if it["spectral_radius_max"] < 1 else "does not contract"
        text += (f". Its map on state values {state}: spectral radius ρ(T) {it['spectral_radius_mean']:.3f} on "
                 f"average, {it['fraction_contracting']:.0%} of tasks below 1")
        if it["fixed_point_error"] is not None:
            text += f"; fixed point {it['fixed_point_error']:.3f} from v_π (sup norm)"
    if discount is not None and not 0 <= discount < 1:
        text += ". An effective discount outside [0, 1) is no discount: the update is not a TD contraction"
    return text + "."


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
        f"{'tied' if cfg['tied'] else 'per-layer'} weights, {cfg['mask']} mask. Evaluated on {summary['n_eval_tasks']} "
        f"held-out Boyan tasks (n={summary['config']['context_len']}, s={summary['config']['n_states']}).",
        "",
        "## What does this model compute?",
        "",
        *algorithm_sentences(alg, gamma),
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
