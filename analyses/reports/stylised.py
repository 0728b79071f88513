"""The report of a stylised model: every number, computed once, as a typed ``Summary``
(``ictd_interp.analyses.summary``).

Weight probes against θ* (cosines, signature), the algorithm each layer runs (read from the weights),
its iteration map and spectrum, baselines on the same tasks, kernel diagonality and Assumption 5.1's
margin, θ*'s error versus depth and its computed limit, error versus context, and population NEU.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import torch
from torch import Tensor

from ictd_interp.analyses.figures import plots
from ictd_interp.analyses.figures.style import STAR, Figure
from ictd_interp.analyses.metrics import baselines, cosine_null, in_context
from ictd_interp.analyses.metrics.acting import model_acting
from ictd_interp.analyses.metrics.algorithm_id import IterationMap, identify_layers, iteration_map, read_layer
from ictd_interp.analyses.metrics.convergence import (
    CONTEXT_LENGTHS,
    errors_by_context,
    errors_by_depth,
    fit_geometric,
)
from ictd_interp.analyses.metrics.diagonality import kernel_diagonality_mean, model_margin, state_kernels
from ictd_interp.analyses.metrics.draws import draw_seed
from ictd_interp.analyses.metrics.extrapolation import depth_extrapolation, depths_up_to, layer_at_depth, spectral_depth
from ictd_interp.analyses.metrics.heads import head_kernels, most_like
from ictd_interp.analyses.metrics.neu import neu_grid
from ictd_interp.analyses.metrics.probes import activation_cosines, circuit_cosines, prediction_gap, sensitivity_cosine
from ictd_interp.analyses.metrics.readings import LONG, Contexts, WeightReading, read_model
from ictd_interp.analyses.metrics.theta_star_limit import star_map, theta_star_limit, theta_star_rows
from ictd_interp.analyses.reports.stylised_words import (
    algorithm_sentences,
    diagonality_sentence,
    limit_sentence,
    margin_sentence,
    per_layer_text,
)
from ictd_interp.analyses.reports.summary_md import (
    acting_lines,
    answer_lines,
    baseline_table,
    control_algorithm_sentence,
    ladder_lines,
    neu_lines,
    signs_text,
    summary_header,
)
from ictd_interp.analyses.summary.sections import Algorithm, DepthCurves, Summary
from ictd_interp.analyses.summary.store import build
from ictd_interp.config import TrainConfig
from ictd_interp.io.progress import computed
from ictd_interp.io.text import shown
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.hook_names import ends_with
from ictd_interp.models.stylised.state_space import state_space_unavailable
from ictd_interp.models.stylised.theta_star import SIGNATURE_TEXT
from ictd_interp.reference.metrics import VALUE_INPUTS, signature_on_values
from ictd_interp.tasks.sampling import TaskBatch, sample_from
from ictd_interp.training.evaluation import EvalSet, evaluate

ARCHITECTURE = "stylised"  # the architecture of this report (found by ictd_interp.analyses.analyze)
FIT_TASKS = 64  # the function-space fit (and its bootstrap) runs on the first 64 evaluation tasks
# NEU at the training setting and toward Theorem 3's limit (a longer context, deeper models); the claims
# report runs the powered grid (``ictd_interp.analyses.claims.neu_limit.theorem3``)
NEU_LONG, NEU_DEEP, NEU_TASKS = 100, (12, 96), 2048


def compute(
    model: HookedICTDTransformer,
    config: TrainConfig,
    source: str,
    curves: Optional[dict[str, list]],
    metadata: Optional[dict[str, Any]] = None,
    neu: bool = True,
) -> Summary:
    """Every number of the report of a stylised model (``neu=False`` leaves out the NEU section, the slowest;
    ``metadata``, the checkpoint's, is not read: the stylised report needs nothing from it)."""
    eval_set = EvalSet.build(replace(config, device="cpu"))
    model = model.to("cpu")
    tasks, star = eval_set.tasks, HookedICTDTransformer.from_theta_star(model.cfg)
    C, star_fixed = model_margin(star, tasks), star_map(star, tasks)
    with torch.no_grad():
        model_values = model(tasks.prompt)
    exact = state_space_unavailable(model.cfg) is None

    out: dict[str, Any] = {}
    sections = computed(
        {
            "metrics": lambda: evaluate(model, eval_set).to_dict(),
            "baselines": lambda: baselines.compare(
                model_values,
                tasks,
                config.tasks.gamma,
                model.cfg.n_layers,
                extra=theta_star_rows(model.cfg, tasks),
            ),
            "probes": lambda: {
                **prediction_gap(model, tasks, star),
                "sensitivity_cosine": sensitivity_cosine(model, tasks, star),
                "circuits": circuit_cosines(model, star),
                "activation_cosines": activation_cosines(model, tasks, star),
            },
            "diagonality": lambda: {
                "model": kernel_diagonality_mean(model, tasks).tolist(),
                "theta_star": kernel_diagonality_mean(star, tasks)[0, 0].item(),
                "threshold": (1 + config.tasks.gamma) / 2,
            },
            "margin": lambda: {
                "model_mean": model_margin(model, tasks).mean().item(),
                "theta_star_mean": C.mean().item(),
                "theta_star_min": C.min().item(),
            },
            "algorithm": lambda: algorithm_answers(model, star, tasks, star_fixed),
            "in_context": lambda: replace(
                in_context.assess(
                    model, tasks, out["baselines"], out["algorithm"].layers[-1], config.tasks, config.eval_seed
                ),
                **dict(zip(("cos_A", "cos_V"), cosine_null.lowest(model))),
                cosine_nulls=cosine_null.nulls(model.cfg),
            ),
            "readings": lambda: _readings(model, config, tasks) if exact else None,
            "acting": lambda: (
                model_acting(model, config.tasks, draw_seed(config.eval_seed, "acting"))
                if config.tasks.n_actions and model.cfg.attention == "softmax"
                else None
            ),
            "circuit": lambda: {"heads": (heads := head_kernels(model, tasks)), **most_like(heads)},
            "convergence": lambda: _convergence(model, star, config, tasks, C, star_fixed),
            "neu": lambda: _neu(model, config) if neu and exact else None,
            "example": lambda: _example(model, star, tasks),
        },
        desc="analyze",
        into=out,
    )
    return build(
        Summary,
        {
            **summary_header(source, config, model, len(tasks), curves),
            **sections,
        },
    )


def _convergence(
    model: HookedICTDTransformer,
    star: HookedICTDTransformer,
    config: TrainConfig,
    tasks: TaskBatch,
    C: Tensor,
    star_fixed: IterationMap,
) -> dict[str, Any]:
    """Error versus depth (the trained layers run past their depth, as far as θ*'s curve), θ*'s geometric fit
    and computed limit, and error versus context on 64 longer trajectories."""
    depth = max(2 * model.cfg.n_layers, 16)
    long_tasks = sample_from(
        config.tasks, 64, seed=draw_seed(config.eval_seed, "long_context"), length=max(CONTEXT_LENGTHS)
    )
    star_depth = errors_by_depth(HookedICTDTransformer.from_theta_star(model.cfg, depth=depth), tasks).mean(-1).tolist()
    deeper = layer_at_depth(model, depth)
    return {
        "depth": DepthCurves(model=errors_by_depth(deeper, tasks).mean(-1).tolist(), theta_star=star_depth),
        "theta_star_fit": fit_geometric(star_depth),
        "one_minus_C": 1 - C.mean().item(),
        "theta_star_limit": theta_star_limit(
            model.cfg, config.tasks, draw_seed(config.eval_seed, "theta_star_limit"), star_fixed
        ),
        "context_lengths": list(CONTEXT_LENGTHS),
        "context": {
            name: errors_by_context(m, long_tasks, CONTEXT_LENGTHS).mean(-1).tolist()
            for name, m in (("trained model", model), ("theta* (same depth)", star))
        },
    }


def _neu(model: HookedICTDTransformer, config: TrainConfig):
    """Population NEU at the training setting and toward Theorem 3's limit (``NEU_LONG``, ``NEU_DEEP``)."""
    return neu_grid(
        model.cfg,
        config.tasks,
        model,
        lengths=tuple(sorted({config.tasks.context_len, NEU_LONG})),
        depths=tuple(sorted({model.cfg.n_layers, *NEU_DEEP})),
        n_tasks=NEU_TASKS,
        seed=config.eval_seed,
    )


def algorithm_answers(
    model: HookedICTDTransformer, star: HookedICTDTransformer, tasks: TaskBatch, star_fixed: IterationMap
) -> Algorithm:
    """Which algorithm each layer runs (read from the weights where the layer is a fixed linear map,
    fitted otherwise), what iterating the last layer does (from the spectrum of its map), the error
    curve run as deep as that spectrum needs, and theta*'s own map and fixed point on the same tasks."""
    reason = state_space_unavailable(model.cfg)
    last = model.cfg.n_layers - 1
    if reason is None:
        layers = [read_layer(model, layer) for layer in range(model.cfg.n_layers)]
    else:
        layers = identify_layers(model, tasks[:FIT_TASKS])
    for row in layers:
        usable = row.b is not None and row.identifiable
        if model.cfg.tied and reason is None and row.layer > 0:  # one layer, read once: its map is layer 0's
            row.iteration = layers[0].iteration
        elif usable:
            row.iteration = iteration_map(model, tasks, row.layer, row.coefficients, row.feature_drive)
    iterated = layers[last].iteration
    deepest = spectral_depth(iterated.spectral_radius, model.cfg.n_layers) if iterated else 8 * model.cfg.n_layers
    extrapolation = depth_extrapolation(model, star, tasks, depths_up_to(deepest, model.cfg.n_layers))
    if iterated is not None:  # the spectrum decides; the error curve is shown beside it
        verdict, converges = iterated.verdict, iterated.converges
        if iterated.converges and not extrapolation.converges:  # the map contracts, the error does not: no TD
            verdict = (
                "contracts when iterated (its map's radius is below 1 on every task) but its error rises with depth: "
                f"it settles on a fixed point worse than its error at depth {extrapolation.best_depth}"
            )
            converges = False
        extrapolation = replace(
            extrapolation,
            curve_verdict=extrapolation.verdict,
            verdict=verdict,
            converges=converges,
            verdict_from="spectrum of the last layer's map on state values",
        )
    else:
        extrapolation = replace(extrapolation, verdict_from="error curve (no linear map could be read or fitted)")
    return Algorithm(
        source="weights" if reason is None else "fit",
        exact_read_unavailable=reason,
        layers=layers,
        extrapolation=extrapolation,
        theta_star_map=replace(star_fixed, spectral_radius=None, fixed_point_errors=None),
    )


@torch.no_grad()
def _example(model: HookedICTDTransformer, star: HookedICTDTransformer, tasks) -> dict[str, Any]:
    """One prompt's patterns and grouped kernel, and every query prediction (for the figures)."""
    prompt = tasks.prompt
    _, mine = model.run_with_cache(prompt[:1], names_filter=ends_with("hook_pattern"))
    _, ref = star.run_with_cache(prompt[:1], names_filter=ends_with("hook_pattern"))
    M, _ = state_kernels(mine["pattern", 0][:, 0].double(), tasks.states[:1], tasks.mrp.n_states)
    return {
        "pattern_model": mine["pattern", 0][0, 0].tolist(),
        "pattern_theta_star": ref["pattern", 0][0, 0].tolist(),
        "grouped_kernel": M[0].nan_to_num(0.0).tolist(),
        "predicted": {"model": model(prompt)[:, -1].tolist(), "theta_star": star(prompt)[:, -1].tolist()},
        "true": tasks.v_true[:, -1].tolist(),
    }


# ---- words (summary.md; the longer sentences in reports.stylised_words) ------------------------------------


def lines(summary: Summary) -> list[str]:
    m, p, cfg = summary.metrics, summary.probes, summary.model
    conv, alg, ext = summary.convergence, summary.algorithm, summary.algorithm.extrapolation
    tied = cfg.tied
    on_values = [signature_on_values(s, summary.gamma) for s in m.signature]  # as the signature figure draws them
    signature = (
        [f"- layers 0–{len(m.signature) - 1} (tied): {signs_text(on_values[0])}"]
        if tied and all(s == m.signature[0] for s in m.signature)
        else [f"- layer {l}: {signs_text(s)}" for l, s in enumerate(on_values)]
    )
    return [
        f"# ICTD analysis of `{summary.source}`",
        "",
        f"Model: {cfg.form} form, {cfg.attention} attention, {cfg.n_layers} layers, d={cfg.d_features}, "
        f"{'tied' if cfg.tied else 'per-layer'} weights, {cfg.mask} mask. Every number below is on "
        f"{summary.eval_tasks}, except where a section names its own sample (θ*'s limit at longer contexts, the NEU "
        "table).",
        "",
        *answer_lines(summary.in_context, summary.readings),
        *ladder_lines(summary.in_context),
        "## What does this model compute?",
        "",
        *algorithm_sentences(alg, summary.baselines, summary.gamma),
        *control_algorithm_sentence(summary.training),
        *acting_lines(summary.acting),
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
        f"| cos(A, A*) per layer | {per_layer_text([f'{c:.3f}' for c in m.cos_A], tied)} |",
        f"| cos(V, V*) per layer (identifiable entries) | {per_layer_text([shown(c) for c in m.cos_V], tied)} |",
        f"| sign match {SIGNATURE_TEXT} per layer | "
        f"{per_layer_text(['yes' if s else 'no' for s in m.signature_match], tied)} |",
        f"| prediction gap to θ* at the query (RMS over tasks) | {p.rms_gap_to_theta_star:.4f} |",
        f"| sensitivity cosine dv/dx(S_n) | {p.sensitivity_cosine:.3f} |",
        "",
        "Weight cosines near 1 say the weights point where θ*'s do; they do not say the update converges "
        "(see above: the effective discount and the iteration decide that).",
        "",
        f"Value-row signature: the weights on ({', '.join(VALUE_INPUTS)}), normalised by the largest (θ*: 1, γ, "
        "−1; effective discount = the v(S') weight over |the v(S) weight|); n/a = not identifiable at that layer:",
        "",
        *signature,
        "",
        "## Kernel and convergence theory",
        "",
        diagonality_sentence(summary.diagonality, m.kernel_diagonality_mean),
        "",
        margin_sentence(summary.margin, conv.one_minus_C, conv.theta_star_fit.rate, summary.gamma),
        "",
        limit_sentence(conv.theta_star_limit, conv.theta_star_fit),
        "",
        *neu_lines(summary.neu),
    ]


# ---- figures -------------------------------------------------------------------------------------------------


def figures(summary: Summary) -> dict[str, Figure]:
    ex, conv, tied = summary.example, summary.convergence, summary.model.tied
    out = {
        "attention": plots.attention_comparison(
            {"trained, layer 0": ex.pattern_model, f"{STAR}, layer 0": ex.pattern_theta_star}
        ),
        "grouped_kernel": plots.grouped_kernel(ex.grouped_kernel, "grouped kernel $\\hat M_n$ (model, layer 0)"),
        "signature": plots.signature_bars(summary.metrics.signature, tied=tied, gamma=summary.gamma),
        "error_vs_depth": plots.error_vs_depth(
            {"theta*": conv.depth.theta_star, "trained layers (repeated past their depth)": conv.depth.model},
            {"theta*": conv.theta_star_fit},
            conv.one_minus_C,
            trained_depth=summary.model.n_layers,
        ),
    }
    if summary.curves:
        c = summary.curves
        out["diagonality_over_training"] = plots.diagonality_curve(
            c.step, c.kernel_diagonality_mean, summary.gamma, c.kernel_diagonality_heads, summary.diagonality.theta_star
        )
        out["cosine_over_training"] = plots.cosine_curves(c.step, c.cos_A, c.cos_V, tied=tied)
    return out


def _readings(model: HookedICTDTransformer, config: TrainConfig, tasks: TaskBatch) -> list[WeightReading]:
    """The readings the checkpoint track scores (``readings.REPORTED``), the depth limit on its named long draw; no
    reported reading fits a probe, so the probes' fit set is the evaluation tasks themselves."""
    long = sample_from(config.tasks, len(tasks), seed=draw_seed(config.eval_seed, "readings_long"), length=LONG)
    return read_model(model, Contexts(tasks, tasks, long))
