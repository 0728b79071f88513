"""``summary.md`` from a typed ``Summary``: the answers first, in words, then the numbers behind them and
the figures. Every number is printed with what it means for this model (``docs/theory.md`` defines them)."""

from __future__ import annotations

import math

from pathlib import Path
from typing import Any, Optional

from analyses.metrics.algorithm_id import MAX_CONDITION
from analyses.metrics.baselines import LABELS
from analyses.metrics.intervals import Interval
from analyses.metrics.neu import population_table
from analyses.metrics.linear_family import IN_FAMILY
from analyses.reports.linear import their_lines
from analyses.reports.schema import Algorithm, Baselines, Circuit, Diagonality, Summary
from ictd_interp.models.construction import SIGNATURE_INPUTS, SIGNATURE_TEXT

TD_LIKE_CORRELATION = 0.5  # a head whose pattern correlates at least this much with the TD kernel
PRESENT_R2 = 0.5  # a quantity is "linearly present" at a site when its held-out R² reaches this
MAX_CONDITION_TEXT = f"{MAX_CONDITION:.0f}"


def _fmt(values) -> str:
    return ", ".join("n/a" if v is None else f"{v:+.2f}" for v in values)


def _num(value: Optional[float], spec: str = ".3f") -> str:
    if value is None:
        return "n/a"
    return format(value, spec) if math.isfinite(value) else "not finite"


def algorithm_sentences(alg: Algorithm, base: Baselines, gamma: float) -> list[str]:
    """What the model computes, said in words: against the baselines, iterated, per layer."""
    ext = alg.extrapolation
    lines = [f"- **At its trained depth ({ext.trained_depth} layers).** " + base.sentence]
    if alg.exact_read_unavailable:
        lines.append(f"- Its layers are not a fixed linear map of the values ({alg.exact_read_unavailable}): "
                     "the TD coefficients below are a least-squares fit in function space.")
    lines.append(f"- **Iterated beyond its trained depth** the learned layer {ext.verdict} (decided from the "
                 f"{ext.verdict_from}; the rule: it converges when iterated iff the map's radius is below 1 on every "
                 f"task, diverges iff above 1 on every task). MSVE {ext.model[-1]:.3g} at depth {ext.depths[-1]}, "
                 f"the depth the spectrum needs to show (θ* {ext.reference[-1]:.3g}).")
    if not ext.converges:
        lines.append("  The learned update is a finite-depth estimator, not a convergent TD algorithm: running it "
                     "longer makes it worse, whatever its weight cosine with θ* says.")
    star = alg.theta_star_map
    if star:
        neutral = star.get("neutral_tasks")
        lines.append(f"- θ*'s map on the same tasks {star['verdict']} (radius {star['spectral_radius_mean']:.3f} on "
                     "average" + (f"; on {neutral} tasks a state that is never a source adds the neutral eigenvalue "
                                  "1, a direction the layer never moves" if neutral else "") + ")"
                     + (f"; its depth limit is {_limit_text(star)} from v_π (sup norm, mean over the evaluation "
                        f"tasks whose map contracts ({_share(star)}), 95% t interval)."
                        if star["fixed_point_error"] is not None else "."))
    for first, last, row in distinct_layers(alg.layers):
        sentence = layer_sentence(row, gamma)
        if last > first:
            sentence = sentence.replace(f"Layer {first}: ", f"Layers {first}–{last} (one tied layer, the same "
                                        "weights at every depth): ", 1)
        lines.append("- " + sentence)
    return lines


def distinct_layers(rows: list[dict[str, Any]]) -> list[tuple[int, int, dict[str, Any]]]:
    """Runs of consecutive layers whose readings are the same apart from their index (a tied model's
    layers, read from the one set of weights), as (first, last, reading): said once, not once per layer."""
    runs: list[tuple[int, int, dict[str, Any]]] = []
    for row in rows:
        same = runs and {k: v for k, v in runs[-1][2].items() if k != "layer"} == {
            k: v for k, v in row.items() if k != "layer"}
        runs[-1:] = (
            [(runs[-1][0], row["layer"], runs[-1][2])] if same else [*runs[-1:], (row["layer"], row["layer"], row)]
        )
    return runs


def per_layer(values: list, tied: bool) -> str:
    """A per-layer list of numbers, said once for a tied model (its layers share one set of weights)."""
    if tied and values and all(v == values[0] for v in values):
        return f"{values[0]} (tied: one layer's weights at all {len(values)} depths)"
    return ", ".join(str(v) for v in values)


def _limit_text(result: dict[str, Any]) -> str:
    interval = result.get("fixed_point_error_interval")
    return _iv(interval) if interval else _num(result["fixed_point_error"])


def _share(result: dict[str, Any]) -> str:
    radii_below = result.get("fraction_contracting")
    return "all of them" if radii_below is None or radii_below == 1 else f"{radii_below:.0%} of them"


def layer_sentence(row: dict[str, Any], gamma: float) -> str:
    head = f"Layer {row['layer']}: "
    if row["source"] == "fit":
        if not row["identifiable"]:
            return (head + f"not identifiable (condition number {row['condition_number']:.0f} of the regression, "
                    f"above {MAX_CONDITION_TEXT}): the TD coefficients "
                    "of its update cannot be told apart on these tasks.")
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


def baseline_table(base: Baselines) -> list[str]:
    """The model beside every no-training estimator on the same tasks, with paired intervals."""
    rows = base.estimators
    lines = [f"Baselines on the same {base.n_tasks} tasks (no training; docs/theory.md §7). MSVE = level "
             "(squared mean error: a wrong value level) + shape (the rest); 95% Student-t intervals over tasks; the "
             "last column is the paired interval of the per-task MSVE difference model − estimator.", "",
             "| estimator | MSVE | level | shape | model − estimator | the model is |", "|---|---|---|---|---|---|",
             f"| trained model | {_iv(rows['model'].msve)} | {_iv(rows['model'].level)} | "
             f"{_iv(rows['model'].shape)} | – | – |"]
    words = {"lower": "better", "higher": "worse", "undecided": "not distinguishable"}
    for name, row in rows.items():
        if name == "model":
            continue
        diff = row.model_minus_baseline
        lines.append(f"| {LABELS.get(name, name)} | {_iv(row.msve)} | {_iv(row.level)} | {_iv(row.shape)} | "
                     f"{_iv(diff.difference)} | {words[diff.verdict]} |")
    best = base.best_softmax_td
    lines += ["", f"The best softmax TD of depth {base.depth} uses step α = {best['alpha']:.2f} and kernel "
              f"sharpness β = {best['beta']:.2f}, chosen on these tasks "
              "(an oracle choice: a lower bound for the family)."]
    return lines


def _iv(interval: Any) -> str:
    return (interval if isinstance(interval, Interval) else Interval(**interval)).text(".3f")


def neu_lines(neu: Optional[dict[str, Any]]) -> list[str]:
    if not neu:
        return []
    return ["## NEU at the training setting and beyond (Theorem 3)", "",
            f"Population NEU ‖E u‖² (the unbiased U-statistic over all pairs of {neu['n_tasks']:,} tasks × "
            f"{neu['windows_per_task']} windows, the same tasks for "
            "every model; it can come out below 0 where the true "
            "value is near 0), with its 95% jackknife interval over "
            f"{neu['groups']} groups of tasks; the zero predictor "
            "also in closed form; differences paired by task.", "", *population_table(neu), "", neu["sentence"], ""]


def limit_sentence(limit: dict[str, Any], fit: dict[str, float]) -> str:
    """θ*'s limit computed (fixed point of its map) beside the geometric fit over a few depths."""
    rows = limit["rows"]
    floors = ", ".join(f"{_limit_text(r)} (n = {r['context_len']}, ρ {r['spectral_radius_mean']:.3f}"
                       + (", the evaluation tasks" if r.get("tasks") == "evaluation" else "") + ")" for r in rows)
    asymptotic = rows[0]["spectral_radius_mean"]
    rate = fit["rate"]
    same = abs(rate - asymptotic) < 0.02
    longer = [r["context_len"] for r in rows if r.get("tasks") != "evaluation"]
    where = (f"at the training length on the evaluation tasks (the number quoted above), at n = "
             f"{', '.join(map(str, longer))} on {limit['n_tasks']} other tasks with longer trajectories"
             if longer and len(longer) < len(rows) else f"on {limit['n_tasks']} tasks")
    return (f"θ*'s limit as depth grows, computed as the fixed point of its map {where} (sup error, mean over the "
            f"contracting tasks with its 95% t interval): {floors}. The "
            f"geometric fit over the report's depths gives rate {rate:.3f} and "
            f"floor {fit['floor']:.3f}; " + ("that rate is the asymptotic one (ρ of the map)." if same else
            f"that rate is not the asymptotic one (ρ of θ*'s map ≈ {asymptotic:.3f}): the fit describes only the "
            "depths it saw, and its floor is not the limit."))


def margin_sentence(margin: Any, one_minus_c: float, rate: float, gamma: float) -> str:
    C = margin.theta_star_mean if hasattr(margin, "theta_star_mean") else margin["theta_star_mean"]
    if C <= 0:
        return (f"The Assumption 5.1 margin C = {C:+.3f} is not positive: the population kernel's diagonal is below "
                f"(1+γ)/2 = {(1 + gamma) / 2:.3f}, so Theorem 2's contraction bound (rate 1 − C = {one_minus_c:.3f} "
                f"> 1) does not apply here. θ*'s error still falls with depth (fitted rate {rate:.3f}) because the "
                "kernel-weighted update averages over states; sharper features (one-hot, scale ≥ 3) make C > 0.")
    return (f"The Assumption 5.1 margin C = {C:+.3f} is positive: Theorem 2 bounds θ*'s error by a geometric rate "
            f"1 − C = {one_minus_c:.3f}; the fitted rate is {rate:.3f}.")


def diagonality_sentence(diag: Diagonality, model_mean: float) -> str:
    return (f"Kernel diagonality (attention mass a query puts on its own state): model {model_mean:.3f}, θ* "
            f"{diag.theta_star:.3f} on the same tasks, against the level (1+γ)/2 = {diag.threshold:.3f} that "
            "Assumption 5.1 asks of the population kernel. θ* itself sits where the features put it, so a model "
            "near θ*'s value has learned θ*'s kernel; only sharper features raise both toward the level.")


def write_markdown(summary: Summary, out_dir: Path) -> Path:
    """``summary.md`` for any architecture."""
    lines = {"stylised": stylised_lines, "standard": standard_lines, "linear-ictd": linear_lines}[summary.architecture]
    return write_with_figures(lines(summary), out_dir)


def stylised_lines(summary: Summary) -> list[str]:
    m, p, cfg = summary.metrics, summary.probes, summary.model_config
    conv, alg, ext = summary.convergence, summary.algorithm, summary.algorithm.extrapolation
    tied = cfg["tied"]
    signature = ([f"- layers 0–{len(m.signature) - 1} (tied): {_fmt(m.signature[0])}"]
                 if tied and all(s == m.signature[0] for s in m.signature) else
                 [f"- layer {l}: {_fmt(s)}" for l, s in enumerate(m.signature)])
    return [
        f"# ICTD analysis of `{summary.source}`",
        "",
        f"Model: {cfg['form']} form, {cfg['attention']} attention, {cfg['n_layers']} layers, d={cfg['d_features']}, "
        f"{'tied' if cfg['tied'] else 'per-layer'} weights, {cfg['mask']} mask. Every number below is on "
        f"{summary.eval_tasks}.",
        "",
        "## What does this model compute?",
        "",
        *algorithm_sentences(alg, summary.baselines, summary.gamma),
        "",
        *baseline_table(summary.baselines),
        "",
        "| depth | " + " | ".join(str(d) for d in ext.depths) + " |",
        "|---|" + "---|" * len(ext.depths),
        "| trained layers, MSVE | " + " | ".join(f"{e:.3g}" for e in ext.model) + " |",
        "| θ*, MSVE | " + " | ".join(f"{e:.3g}" for e in ext.reference) + " |",
        "",
        "## How close is it to θ*?",
        "",
        "| metric | value |",
        "|---|---|",
        f"| eval MSVE (model / θ* at the same depth) | {m.eval_msve:.4f} / {m.theta_star_msve:.4f} |",
        f"| cos(A, A*) per layer | {per_layer([f'{c:.3f}' for c in m.cos_A], tied)} |",
        f"| cos(V, V*) per layer (identifiable entries) | {per_layer([_num(c) for c in m.cos_V], tied)} |",
        f"| sign match {SIGNATURE_TEXT} per layer | "
        f"{per_layer(['yes' if s else 'no' for s in m.signature_match], tied)} |",
        f"| prediction gap to θ* (RMS) | {p.rms_gap_to_theta_star:.4f} |",
        f"| sensitivity cosine dv/dx(S_n) | {p.sensitivity_cosine:.3f} |",
        "",
        "Weight cosines near 1 say the weights point where θ*'s do; they do not say the update converges "
        "(see above: the effective discount and the iteration decide that).",
        "",
        f"Value-row signature ({', '.join(SIGNATURE_INPUTS)}), normalised; n/a = not identifiable at that layer:",
        "",
        *signature,
        "",
        "## Kernel and convergence theory",
        "",
        diagonality_sentence(summary.diagonality, m.kernel_diagonality_mean),
        "",
        margin_sentence(summary.margin, conv.one_minus_C, conv.theta_star_fit["rate"], summary.gamma),
        "",
        limit_sentence(conv.theta_star_limit, conv.theta_star_fit),
        "",
        *neu_lines(summary.neu),
    ]


def write_with_figures(lines: list[str], out_dir: Path) -> Path:
    """``summary.md``: the given lines, then every figure in ``out_dir/figures``."""
    lines = [*lines, "## Figures", ""]
    for name in sorted(p.stem for p in (out_dir / "figures").glob("*.png")):
        lines += [f"### {name.replace('_', ' ')}", "", f"![{name}](figures/{name}.png)", ""]
    path = out_dir / "summary.md"
    path.write_text("\n".join(lines))
    return path


def td_heads(circuit: Circuit) -> list[dict[str, Any]]:
    """Heads whose pattern correlates with the TD kernel at least ``TD_LIKE_CORRELATION``, with their
    signature and whether it is TD's (+, +, −)."""
    signatures = {(r["layer"], r["head"]): r for r in circuit.signatures}
    return [{**h, "signature": signatures[(h["layer"], h["head"])]["normalised"],
             "matches_td": signatures[(h["layer"], h["head"])]["matches_td"]}
            for h in circuit.heads if h["td_kernel_correlation"] >= TD_LIKE_CORRELATION]


def verdict(circuit: Circuit, algorithm: Algorithm) -> str:
    """One sentence: does this model implement in-context TD, where, how close to θ*'s algorithm? A
    TD-like head counts as signed when its own output or its layer's whole update (through the MLP)
    moves the probed value with TD's (+, +, −) signs."""
    heads = td_heads(circuit)
    layer_td = {r["layer"] for r in circuit.layer_signatures or [] if r["matches_td"]}
    signed = [h for h in heads if h["matches_td"] or h["layer"] in layer_td]
    in_family = [r for r in algorithm.layers if r["in_family"]]
    where = ", ".join(f"layer {h['layer']} head {h['head']}" for h in signed)
    if signed and in_family:
        return (f"Yes, in part: {where} attend{'s' if len(signed) == 1 else ''} like the softmax-TD kernel and "
                f"move{'s' if len(signed) == 1 else ''} the value with TD's {SIGNATURE_TEXT} signs, and "
                f"{len(in_family)} of {len(algorithm.layers)} layers' probed updates are "
                "explained by the TD family.")
    if heads:
        best = max(heads, key=lambda h: max(h["td_kernel_correlation"], h.get("tabular_kernel_correlation", 0.0)))
        kernel = (f"layer {best['layer']} head {best['head']} attends like the softmax-TD kernel (correlation "
                  f"{best['td_kernel_correlation']:.2f})")
        if best.get("tabular_kernel_correlation", 0.0) > best["td_kernel_correlation"]:
            kernel = (f"layer {best['layer']} head {best['head']} attends to the sources in the target's own state "
                      f"(correlation {best['tabular_kernel_correlation']:.2f} with the tabular kernel, "
                      f"{best['td_kernel_correlation']:.2f} with θ*'s softmax kernel): tabular TD's kernel")
        fits = algorithm.layers + (algorithm.layers_tabular or [])
        fve = max((r["fve"] for r in fits), default=float("nan"))
        return (f"Partly: {kernel}, but " + (f"no head or layer moves the value with TD's {SIGNATURE_TEXT} signs"
                                             if not signed else "no layer's probed update is in the TD family")
                + "; the TD family (softmax or tabular kernel) explains "
                  f"at most {fve:.0%} of any layer's probed update.")
    return ("No TD circuit found: no head's pattern correlates with the softmax-TD kernel at "
            f"≥ {TD_LIKE_CORRELATION}; the model predicts values some other way.")


def standard_sentences(summary: Summary) -> list[str]:
    """The answers of ``summary.md`` for a standard model, in words."""
    conv, circuit, alg, gamma = summary.convergence, summary.circuit, summary.algorithm, summary.gamma
    depth = summary.model_config["n_layers"]
    lines = [f"- **Verdict.** {verdict(circuit, alg)}",
             f"- **Error (at its {depth} layers).** " + summary.baselines.sentence,
             "- **Where the value lives.** The probed value's MSVE per site (embedding, then after each block): "
             + ", ".join(f"{e:.3f}" for e in conv.depth_msve["model"]) + " (θ*'s stored row: "
             + ", ".join(f"{e:.3f}" for e in conv.depth_msve["theta_star"]) + ")."]
    for name, r2 in circuit.quantity_r2.items():
        present = [i for i, v in enumerate(r2) if v >= PRESENT_R2]
        lines.append(f"- `{name}`: held-out R² per site " + ", ".join(f"{v:.2f}" for v in r2) +
                     (f"; linearly present from site {present[0]} on." if present else "; never linearly present."))
    for h in td_heads(circuit):
        lines.append(f"- Layer {h['layer']} head {h['head']}: correlation {h['td_kernel_correlation']:.2f} with θ*'s "
                     f"softmax-TD kernel and {h['tabular_kernel_correlation']:.2f} with the tabular same-state kernel, "
                     f"diagonality {h['diagonality']:.2f}, signature (reward, next, current) = "
                     + ", ".join(f"{v:+.2f}" for v in h["signature"])
                     + (" — TD's signs." if h["matches_td"] else " — not TD's signs."))
    for r in circuit.layer_signatures:
        lines.append(f"- Layer {r['layer']}'s whole update of the probed value (attention, MLP, residual): "
                     "(reward, next, current) = " + ", ".join(f"{v:+.2f}" for v in r["normalised"])
                     + (" — TD's signs." if r["matches_td"] else " — not TD's signs."))
    lines += ["- " + layer_sentence(row, gamma).replace("Layer", "Probed layer", 1) for row in alg.layers]
    lines.append("- With the tabular (same-state) kernel in place of the softmax family, the TD family explains "
                 + ", ".join(f"{r['fve']:.0%}" for r in alg.layers_tabular) + " of the probed updates of layers "
                 + ", ".join(str(r["layer"]) for r in alg.layers_tabular) + ".")
    ext = alg.extrapolation
    if ext:
        lines.append(f"- **Iterated beyond its trained depth** the tied block {ext.verdict} (MSVE {ext.model[-1]:.3g} "
                     f"at depth {ext.depths[-1]}; θ* {ext.reference[-1]:.3g}).")
    return lines


def standard_lines(summary: Summary) -> list[str]:
    cfg, m = summary.model_config, summary.metrics
    return [
        f"# ICTD analysis of `{summary.source}` (standard architecture)",
        "",
        f"Model: pre-LN transformer, {cfg['n_layers']} layers, d_model={cfg['d_model']}, {cfg['n_heads']} heads, "
        f"MLP width {cfg['d_mlp']}, LayerNorm {'on' if cfg['layer_norm'] else 'off'}, "
        f"{'tied' if cfg['tied'] else 'per-layer'} weights. Every number below is on {summary.eval_tasks}, "
        "except where a line says otherwise: probes are fitted on 256 other tasks, and the head and layer "
        "signatures and the TD-family fits of the probed updates use the first 64 evaluation tasks.",
        "",
        "## Does it implement in-context TD, where, and how close to θ*?",
        "",
        *standard_sentences(summary),
        "",
        *baseline_table(summary.baselines),
        "",
        f"Eval MSVE {m.eval_msve:.4f} (θ* at the same depth {m.theta_star_msve:.4f}); mean kernel diagonality "
        f"{m.kernel_diagonality_mean:.3f}. Probes read linear structure only: a quantity a model keeps "
        "non-linearly shows as absent.",
        "",
    ]


def linear_layer_sentence(row: dict[str, Any]) -> str:
    """One layer's place in the predecessor's family, in words (docs/theory.md §13)."""
    kind = ("TD(0)-like" if abs(row["rg_share"]) < 0.25 else "residual-gradient-like" if abs(row["rg_share"] - 1) < 0.25
            else f"between TD and residual gradient (ρ = {row['rg_share']:.2f})")
    family = "in the family" if row["in_family"] else f"not in the family (the rule asks ≥ {IN_FAMILY:.0%} of both)"
    return (f"Layer {row['layer']}: cos(P, P_TD) = {row['cos_P_td0']:.3f}, cos(Q, Q_TD) = {row['cos_Q_td0']:.3f}; the "
            f"fit explains {row['P_explained']:.0%} of P and {row['Q_explained']:.0%} of Q, {family}: a {kind} update "
            f"with step {row['step']:.3g}, effective discount {row['effective_discount']:.3f} and a preconditioner "
            f"{row['preconditioner_off_identity']:.0%} off a multiple of the identity.")


def linear_lines(summary: Summary) -> list[str]:
    cfg, m, alg, lin = summary.model_config, summary.metrics, summary.algorithm, summary.linear
    it, ext = lin.iteration, alg.extrapolation
    share = it["share"]
    lines = [
        f"# ICTD analysis of `{summary.source}` (the predecessor's linear model)",
        "",
        f"Model: Z ← Z + (1/n) P Z M act(ZᵀQZ), {cfg['n_layers']} layers, d={cfg['d_features']}, "
        f"{'tied' if cfg['tied'] else 'per-layer'} weights, {cfg['activation']} activation, λ = {cfg['trace_decay']} "
        f"(docs/theory.md §13). Every number below is on {summary.eval_tasks}.",
        "",
        "## Which algorithm do its weights run?",
        "",
        "Each layer is fitted by the family member P = p e eᵀ, Q's top-left block "
        "[[−Cᵀ, κCᵀ], [ρCᵀ, −ρκCᵀ]] (least squares; TD(0): ρ = 0, κ = 1; residual gradient: ρ = κ = 1); "
        f"a layer is in the family when the fit explains at least {IN_FAMILY:.0%} of both P and Q.",
        "",
        *[f"- {linear_layer_sentence(row)}" for row in alg.layers],
        "- " + function_r2_sentence(lin.function_r2),
        f"- Iterated on each evaluation context, layer {it['layer']}'s identified update converges on "
        f"{it['converging']} of {it['tasks']} tasks ({share['mean']:.0%} [{share['lo']:.0%}, {share['hi']:.0%}], "
        f"Wilson 95%; median spectral radius {it['median_radius']:.3f})" + _neutral_words(it) + ".",
    ]
    if ext:
        lines.append("- Run beyond its trained depth, the tied layer itself "
                     f"{ext.verdict} (MSVE {_num(ext.model[-1], '.3g')} "
                     f"at depth {ext.depths[-1]}; the TD(0) construction {_num(ext.reference[-1], '.3g')}).")
    theirs = their_lines(lin.theirs, alg.layers, cfg["activation"] == "identity") if lin.theirs else []
    return [*lines, "", *theirs, "", "## Error", "", f"- {summary.baselines.sentence}", "",
            *baseline_table(summary.baselines), "",
            f"Eval MSVE {m.eval_msve:.4f} (this project's softmax θ* at the same depth {m.theta_star_msve:.4f}).", ""]


def _neutral_words(it: dict[str, Any]) -> str:
    """The tasks where the identified layer barely acts (radius within the tolerance of 1), said as such."""
    neutral, tol = it.get("neutral", 0), it.get("neutral_tolerance")
    if not neutral:
        return ""
    return (f"; on {neutral} tasks it is neutral (one application moves the implicit weight by at most {tol:.0%} "
            "of its size: it barely acts, so neither converging nor diverging is said)")


def function_r2_sentence(r2: float) -> str:
    """The identified members run as a model, against the model's own values: R² read as a share of
    variance only when it is one (R² < 0: worse than predicting the mean value, no share at all)."""
    where = "(R² over every state of every evaluation task)"
    if r2 < 0:
        return (f"The identified members, run as a model, explain none of the variance of the model's values: "
                f"R² = {r2:.3f} {where}, worse than predicting their mean.")
    return f"The identified members, run as a model, explain {r2:.1%} of the variance of the model's values {where}."
