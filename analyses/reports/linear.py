"""``analyze`` for the predecessor's linear model (docs/theory.md §13): where its weights sit in its own
family (the TD(0) construction's cosines, the identified step, preconditioner, discount and direction),
whether the identified member explains its function and converges when iterated, its error beside the
baselines, its error against context length and depth, and its query rows' kernels — the sections the
other architectures' reports have, computed from what this model is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import torch
from torch import Tensor

from ictd_interp.analyses.figures import plots
from ictd_interp.analyses.figures.style import Figure
from ictd_interp.analyses.metrics import baselines, in_context
from ictd_interp.analyses.metrics.convergence import CONTEXT_LENGTHS, errors_by_context, sup_error
from ictd_interp.analyses.metrics.diagonality import kernel_diagonality_mean
from ictd_interp.analyses.metrics.draws import draw_seed
from ictd_interp.analyses.metrics.extrapolation import depth_extrapolation
from ictd_interp.analyses.metrics.heads import head_kernels, most_like
from ictd_interp.analyses.metrics.linear_family import (
    IN_FAMILY,
    FamilyIteration,
    FamilyReading,
    convergence,
    identified_model,
    identify,
    td0_model,
)
from ictd_interp.analyses.metrics.predecessor_metrics import function_readings, random_layer_iws, weight_readings
from ictd_interp.analyses.metrics.site_probes import residual_stack
from ictd_interp.analyses.reports.summary_md import answer_lines, baseline_table, ladder_lines, summary_header
from ictd_interp.analyses.summary.sections import DepthCurves, LinearWeights, Summary, TheirReadings
from ictd_interp.analyses.summary.store import build
from ictd_interp.config.train import TrainConfig
from ictd_interp.io.incontexttd import LOGGED_STEP
from ictd_interp.io.progress import computed
from ictd_interp.io.text import shown
from ictd_interp.models import HookedICTDTransformer, HookedLinearICTD
from ictd_interp.tasks.sampling import sample_from
from ictd_interp.training.evaluation import EvalSet, evaluate

ARCHITECTURE = "linear-ictd"  # the architecture of this report (found by ictd_interp.analyses.analyze)
LINEAR_EXTRAPOLATION = 8  # a tied layer's error curve runs to 8x its depth


def compute(
    model: HookedLinearICTD,
    config: TrainConfig,
    source: str,
    curves: Optional[dict[str, list]],
    metadata: Optional[dict[str, Any]] = None,
    neu: bool = True,
) -> Summary:
    """Every number of the report of a linear model, as a typed ``Summary``; an imported run's ``metadata``
    holds what the predecessor's trainer logged at its step (``their_logged``), printed beside our computation
    of it (``neu``: the stylised report's option)."""
    their_logged = (metadata or {}).get("their_logged")
    eval_set = EvalSet.build(replace(config, device="cpu"))
    model = model.to("cpu")
    tasks, star = eval_set.tasks, HookedICTDTransformer.from_theta_star(model.cfg.theta_star_config())
    td, member = td0_model(model), identified_model(model)
    layers = identify(model)
    with torch.no_grad():
        values, td_values, member_values = model(tasks.prompt), td(tasks.prompt), member(tasks.prompt)
        star_values = star(tasks.prompt)
    lengths = list(CONTEXT_LENGTHS)
    long_tasks = sample_from(config.tasks, 64, seed=draw_seed(config.eval_seed, "long_context"), length=max(lengths))
    sections = computed(
        {
            "metrics": lambda: evaluate(model, eval_set).to_dict(),
            "baselines": lambda: baselines.compare(
                values,
                tasks,
                config.tasks.gamma,
                model.cfg.n_layers,
                extra={"theta_star": star_values, "td0_construction": td_values, "identified_member": member_values},
            ),
            "diagonality": lambda: {"theta_star": kernel_diagonality_mean(star, tasks)[0, 0].item()},
            "convergence": lambda: {
                "depth": _depth_curves(model, td, star, tasks),
                "context_lengths": lengths,
                "context": {
                    name: errors_by_context(m, long_tasks, lengths).mean(-1).tolist()
                    for name, m in (("trained model", model), ("TD(0) construction (same depth)", td))
                },
            },
            "circuit": lambda: {"heads": (kernels := head_kernels(model, tasks)), **most_like(kernels)},
            "algorithm": lambda: {
                "layers": layers,
                "source": "weights",
                "extrapolation": depth_extrapolation(
                    model, td, tasks, factor=LINEAR_EXTRAPOLATION, reference_name="TD(0) construction"
                )
                if model.cfg.tied
                else None,
            },
            "linear": lambda: {
                "function_r2": _function_r2(values, member_values),
                "iteration": convergence(model, layers, tasks),
                "weights": _weights(model, td),
                "theirs": their_readings(model, tasks, their_logged),
            },
            "in_context": lambda: in_context.assess(
                model, tasks, out["baselines"], layers[-1], config.tasks, config.eval_seed
            ),
        },
        desc="analyze",
        into=(out := {}),
    )
    return build(
        Summary,
        {
            **summary_header(source, config, model, len(tasks), curves),
            **sections,
            "example": {
                "predicted": {"model": values[:, -1].tolist(), "TD(0) construction": td_values[:, -1].tolist()},
                "true": tasks.v_true[:, -1].tolist(),
            },
        },
    )


def _depth_curves(model: HookedLinearICTD, td: HookedLinearICTD, star: HookedICTDTransformer, tasks) -> DepthCurves:
    """Sup error after each layer: the model's and the TD(0) construction's query columns (the last ``n + 1``
    of the residual stream, the value negated), and θ*'s current-value row."""
    positions = tasks.prompt.shape[1]  # depth 0 predicts 0 everywhere
    rows = {
        "model": -residual_stack(model, tasks.prompt)[..., -positions:, -1],
        "td0": -residual_stack(td, tasks.prompt)[..., -positions:, -1],
        "theta_star": residual_stack(star, tasks.prompt)[..., star.layout.current],
    }
    return DepthCurves(**{name: [sup_error(v, tasks).mean().item() for v in site] for name, site in rows.items()})


def _function_r2(values: Tensor, member_values: Tensor) -> float:
    """The share of the model's prediction variance the identified TD-family member explains."""
    residual = (values - member_values).double().pow(2).sum()
    return 1.0 - float(residual / (values - values.mean()).double().pow(2).sum())


def their_readings(model: HookedLinearICTD, tasks, logged: Optional[dict[str, float]]) -> TheirReadings:
    """The predecessor's metrics on the evaluation tasks; VD's step is the one their trainer fitted when the
    run's log says it, else 1 (their initial step)."""
    alpha = (logged or {}).get(LOGGED_STEP)
    alpha_from = "their trainer's fitted step at this logged step" if alpha is not None else "their initial step"
    d = model.cfg.d_features
    readings = function_readings(model, tasks, alpha if alpha is not None else 1.0)
    return TheirReadings(
        IWS=readings.IWS,
        SS=readings.SS,
        VD=readings.VD,
        alpha=readings.alpha,
        alpha_from=alpha_from,
        random_IWS=random_layer_iws(model, tasks),
        logged=logged or None,
        layers=[weight_readings(a.P, a.Q, d) for a in model.unique_attention()],
    )


def _weights(model: HookedLinearICTD, td: HookedLinearICTD) -> LinearWeights:
    """``P`` and ``Q`` of each (unique) layer, on the sign that makes ``P[-1, -1] >= 0`` (the layer is unchanged
    by ``(P, Q) -> (-P, -Q)``), and the TD(0) construction's, for the figure."""
    signs = [1.0 if a.P[-1, -1] >= 0 else -1.0 for a in model.unique_attention()]
    return LinearWeights(
        [(s * a.P.detach().double()).tolist() for s, a in zip(signs, model.unique_attention())],
        [(s * a.Q.detach().double()).tolist() for s, a in zip(signs, model.unique_attention())],
        td.blocks[0].attn.P.detach().tolist(),
        td.blocks[0].attn.Q.detach().tolist(),
    )


def their_lines(theirs: TheirReadings, layers: list[FamilyReading], identity: bool) -> list[str]:
    """The predecessor's own metrics in words, beside this report's family fit, and why the two can disagree."""
    iv = lambda i: f"{i.mean:.3f} [{i.lo:.3f}, {i.hi:.3f}]"  # noqa: E731
    in_family = sum(r.in_family for r in layers)
    fits = "; ".join(f"layer {r.layer}: P {r.P_explained:.0%}, Q {r.Q_explained:.0%} explained" for r in layers)
    lines = [
        "## The predecessor's own metrics",
        "",
        "Computed as InContextTD's code defines them (docs/theory.md §13), against its batch-TD transformer "
        f"(the TD(0) construction at this depth, step α = {theirs.alpha:.3g}, {theirs.alpha_from}); means "
        "over the evaluation tasks with 95% t intervals (their trainer logs one context per step).",
        "",
        "| layer | P[−1,−1] | mean abs. other P | tr Q[:d,:d] | tr Q[:d,d:2d] | their 'others' of Q |",
        "|---|---|---|---|---|---|",
        *[
            f"| {l} | {r.P_bottom_right:+.3f} | {r.P_mean_abs_others:.3f} | {r.Q_upper_left_trace:+.3f} | "
            f"{r.Q_upper_right_trace:+.3f} | {r.Q_mean_abs_others:.3f} |"
            for l, r in enumerate(theirs.layers)
        ],
        "",
        "(The TD(0) construction reads +1, 0, −d, +d and "
        "2d/((2d+1)² − 2d): their last metric subtracts the two "
        "traces signed, so it is not 0 at their own construction."
        + (
            " With the identity activation (P, Q) and (−P, −Q) are the same layer, so the signs of the first, "
            "third and fourth columns are arbitrary."
            if identity
            else ""
        )
        + ")",
        "",
        f"- IWS (implicit weight similarity) {iv(theirs.IWS)}, SS (sensitivity similarity) {iv(theirs.SS)}, "
        f"VD (value difference, μ-weighted) {iv(theirs.VD)}; a layer with random P and Q of the same norms "
        f"scores IWS {iv(theirs.random_IWS)}.",
    ]
    if theirs.logged:
        logged = ", ".join(f"{k} {v:.3f}" for k, v in theirs.logged.items())
        lines.append(f"- Their trainer logged at this step, on its one context: {logged}.")
    if identity:
        lines.append(
            "- With the identity activation the prediction is linear in the query, so its gradient is the "
            "implicit weight: IWS and SS are the same number."
        )
    verdict = (
        "puts every layer"
        if in_family == len(layers)
        else f"puts {in_family} of {len(layers)} layers"
        if in_family
        else "puts no layer"
    )
    lines.append(
        f"- This report's family fit {verdict} in the TD family ({fits}). The readings answer different "
        "questions: IWS and SS compare one d-dimensional direction per context (the implicit linear weight, "
        "the query gradient), which many weight matrices share; the family fit asks the 2(2d+1)² entries of "
        "P and Q to have TD's structure. A high IWS with a layer outside the family says the layer predicts "
        "along TD's direction on these contexts, not that its weights are TD's."
    )
    return lines


# ---- words (summary.md) ----------------------------------------------------------------------------------


def linear_layer_sentence(row: FamilyReading) -> str:
    """One layer's place in the predecessor's family, in words (docs/theory.md §13)."""
    kind = (
        "TD(0)-like"
        if abs(row.rg_share) < 0.25
        else "residual-gradient-like"
        if abs(row.rg_share - 1) < 0.25
        else f"between TD and residual gradient (ρ = {row.rg_share:.2f})"
    )
    family = "in the family" if row.in_family else f"not in the family (the rule asks ≥ {IN_FAMILY:.0%} of both)"
    return (
        f"Layer {row.layer}: cos(P, P_TD) = {row.cos_P_td0:.3f}, cos(Q, Q_TD) = {row.cos_Q_td0:.3f}; the "
        f"fit explains {row.P_explained:.0%} of P and {row.Q_explained:.0%} of Q, {family}: a {kind} update "
        f"with step {row.step:.3g}, effective discount {row.effective_discount:.3f} and a preconditioner "
        f"{row.preconditioner_off_identity:.0%} off a multiple of the identity."
    )


def lines(summary: Summary) -> list[str]:
    cfg, m, alg, lin = summary.model, summary.metrics, summary.algorithm, summary.linear
    it, ext = lin.iteration, alg.extrapolation
    share = it.share
    lines = [
        f"# ICTD analysis of `{summary.source}` (`linear-ictd`: the predecessor's linear-attention architecture)",
        "",
        f"Model: Z ← Z + (1/n) P Z M act(ZᵀQZ), {cfg.n_layers} layers, d={cfg.d_features}, "
        f"{'tied' if cfg.tied else 'per-layer'} weights, {cfg.activation} activation, λ = {cfg.trace_decay} "
        f"(docs/theory.md §13). Every number below is on {summary.eval_tasks}.",
        "",
        *answer_lines(summary.in_context),
        *ladder_lines(summary.in_context),
        "## Which algorithm do its weights run?",
        "",
        "Each layer is fitted by the family member P = p e eᵀ, Q's top-left block "
        "[[−Cᵀ, κCᵀ], [ρCᵀ, −ρκCᵀ]] (least squares; TD(0): ρ = 0, κ = 1; residual gradient: ρ = κ = 1); "
        f"a layer is in the family when the fit explains at least {IN_FAMILY:.0%} of both P and Q.",
        "",
        *[f"- {linear_layer_sentence(row)}" for row in alg.layers],
        "- " + function_r2_sentence(lin.function_r2),
        f"- Iterated on each evaluation context, layer {it.layer}'s identified update converges on "
        f"{it.converging} of {it.tasks} tasks ({share.mean:.0%} [{share.lo:.0%}, {share.hi:.0%}], "
        f"Wilson 95%; median spectral radius {it.median_radius:.3f})" + _neutral_words(it) + ".",
    ]
    if ext:
        lines.append(
            "- Run beyond its trained depth, the tied layer itself "
            f"{ext.verdict} (MSVE {shown(ext.model[-1], '.3g')} "
            f"at depth {ext.depths[-1]}; the TD(0) construction {shown(ext.reference[-1], '.3g')})."
        )
    theirs = their_lines(lin.theirs, alg.layers, cfg.activation == "identity") if lin.theirs else []
    return [
        *lines,
        "",
        *theirs,
        "",
        "## Error",
        "",
        f"- {summary.baselines.sentence}",
        "",
        *baseline_table(summary.baselines),
        "",
        f"Eval MSVE {m.eval_msve:.4f} (this project's softmax θ* at the same depth {m.theta_star_msve:.4f}).",
        "",
    ]


def _neutral_words(it: FamilyIteration) -> str:
    """The tasks where the identified layer barely acts (radius within the tolerance of 1), said as such."""
    neutral, tol = it.neutral, it.neutral_tolerance
    if not neutral:
        return ""
    return (
        f"; on {neutral} tasks it is neutral (one application moves the implicit weight by at most {tol:.0%} "
        "of its size: it barely acts, so neither converging nor diverging is said)"
    )


def function_r2_sentence(r2: float) -> str:
    """The identified members run as a model, against the model's own values: R² read as a share of
    variance only when it is one (R² < 0: worse than predicting the mean value, no share at all)."""
    where = "(R² over every state of every evaluation task)"
    if r2 < 0:
        return (
            f"The identified members, run as a model, explain none of the variance of the model's values: "
            f"R² = {r2:.3f} {where}, worse than predicting their mean."
        )
    return f"The identified members, run as a model, explain {r2:.1%} of the variance of the model's values {where}."


# ---- figures -------------------------------------------------------------------------------------------------


def figures(summary: Summary) -> dict[str, Figure]:
    w, conv = summary.linear.weights, summary.convergence
    return {
        "weights_vs_td0": plots.linear_weights(w.P[0], w.Q[0], w.P_td0, w.Q_td0, summary.model.d_features),
        "error_vs_depth": plots.error_vs_depth(
            {
                "TD(0) construction (linear, C = I)": conv.depth.td0,
                "theta* (softmax, same depth)": conv.depth.theta_star,
                "trained model": conv.depth.model,
            },
            {},
            None,
        ),
    }
