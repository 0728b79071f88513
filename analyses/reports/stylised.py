"""The report of a stylised model: every number, computed once, as a typed ``Summary`` (``reports.schema``).

Weight probes against θ* (cosines, signature), the algorithm each layer runs (read from the weights),
its iteration map and spectrum, baselines on the same tasks, kernel diagonality and Assumption 5.1's
margin, θ*'s error versus depth and its computed limit, error versus context, and population NEU.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import torch

from analyses.metrics import baselines
from analyses.metrics.algorithm_id import (
    depth_extrapolation, depths_up_to, identify_layers, iteration_map, read_layer,
    spectral_depth,
)
from analyses.metrics.convergence import CONTEXT_LENGTHS, errors_by_context, errors_by_depth, fit_geometric
from analyses.metrics.diagonality import kernel_diagonality_mean, model_margin, state_kernels
from analyses.metrics.heads import head_kernels, most_like
from analyses.metrics.neu import neu_grid
from ictd_interp.models.state_space import state_space_unavailable
from analyses.metrics.probes import activation_cosines, circuit_cosines, prediction_gap, sensitivity_cosine
from analyses.reports.schema import Summary, build, eval_tasks_label
from ictd_interp.config import TrainConfig
from ictd_interp.io.progress import computed
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.hook_names import ends_with
from ictd_interp.tasks.sampling import TaskBatch, sample_from
from ictd_interp.training.evaluation import EvalSet, evaluate

FIT_TASKS = 64  # the function-space fit (and its bootstrap) runs on the first 64 evaluation tasks
# NEU at the training setting and toward Theorem 3's limit (a longer context, deeper models); the claims
# report runs the powered grid (``analyses.claims.theory.theorem3``)
NEU_LONG, NEU_DEEP, NEU_TASKS = 100, (12, 96), 2048
LIMIT_LENGTHS, LIMIT_TASKS = (30, 100, 300, 1000), 32  # theta*'s limit (fixed point) versus context length


def theta_star_coefficients(gamma: float) -> dict[str, float]:
    """theta*'s (a, b, c) in the TD family."""
    return {"step": 1.0, "b": gamma, "c": -1.0}


def compute(model: HookedICTDTransformer, config: TrainConfig, source: str, curves: Optional[dict[str, list]],
            neu: bool = True) -> Summary:
    """Every number of the report of a stylised model (``neu=False`` leaves out the NEU section, the slowest)."""
    eval_set = EvalSet.build(replace(config, device="cpu"))
    model = model.to("cpu")
    tasks, star = eval_set.tasks, HookedICTDTransformer.from_theta_star(model.cfg)
    depth = max(2 * model.cfg.n_layers, 16)
    long_tasks = sample_from(config.tasks, 64, seed=config.eval_seed + 1, length=max(CONTEXT_LENGTHS))
    C, star_map = model_margin(star, tasks), summary_star_map(star, tasks)
    with torch.no_grad():
        model_values, star_values = model(tasks.prompt), star(tasks.prompt)
    exact = state_space_unavailable(model.cfg) is None

    def convergence() -> dict[str, Any]:
        star_depth = (
            errors_by_depth(HookedICTDTransformer.from_theta_star(model.cfg, depth=depth), tasks).mean(-1).tolist()
        )
        return {"depth": {"theta_star": star_depth, "model": errors_by_depth(model, tasks).mean(-1).tolist()},
                "theta_star_fit": fit_geometric(star_depth), "one_minus_C": 1 - C.mean().item(),
                "theta_star_limit": theta_star_limit(model.cfg, config, star_map),
                "context_lengths": list(CONTEXT_LENGTHS),
                "context": {name: errors_by_context(m, long_tasks, CONTEXT_LENGTHS).mean(-1).tolist()
                            for name, m in (("trained model", model), ("theta* (same depth)", star))}}

    sections = computed(
        {
            "metrics": lambda: evaluate(model, eval_set).to_dict(),
            "baselines": lambda: baselines.compare(
                model_values, tasks, config.tasks.gamma, model.cfg.n_layers, extra={"theta_star": star_values}
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
            "algorithm": lambda: algorithm_answers(model, star, tasks, star_map),
            "circuit": lambda: {"heads": (heads := head_kernels(model, tasks)), **most_like(heads)},
            "convergence": convergence,
            "neu": lambda: (
                neu_grid(
                    model.cfg,
                    config.tasks,
                    model,
                    lengths=tuple(sorted({config.tasks.context_len, NEU_LONG})),
                    depths=tuple(sorted({model.cfg.n_layers, *NEU_DEEP})),
                    n_tasks=NEU_TASKS,
                    seed=config.eval_seed,
                )
                if neu and exact
                else None
            ),
            "example": lambda: _example(model, star, tasks),
        },
        desc="analyze",
    )
    return build(Summary, {"source": source, "architecture": "stylised", "config": config.to_dict(),
                           "model_config": model.cfg.to_dict(), "n_eval_tasks": len(tasks),
                           "eval_tasks": eval_tasks_label(config, len(tasks)), "curves": curves, **sections})


def algorithm_answers(model: HookedICTDTransformer, star: HookedICTDTransformer, tasks: TaskBatch,
                      star_map: dict[str, Any]) -> dict[str, Any]:
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
        usable = row["b"] is not None and row["identifiable"]
        if model.cfg.tied and reason is None and row["layer"] > 0:  # one layer, read once: its map is layer 0's
            row["iteration"] = layers[0]["iteration"]
        else:
            row["iteration"] = iteration_map(model, tasks, row["layer"], row) if usable else None
    iterated = layers[last]["iteration"]
    deepest = spectral_depth(iterated["spectral_radius"], model.cfg.n_layers) if iterated else 8 * model.cfg.n_layers
    extrapolation = depth_extrapolation(model, star, tasks, depths_up_to(deepest, model.cfg.n_layers))
    if iterated is not None:  # the spectrum decides; the error curve is shown beside it
        extrapolation = {**extrapolation, "curve_verdict": extrapolation["verdict"],
                         "verdict": iterated["verdict"], "converges": iterated["converges"],
                         "verdict_from": "spectrum of the last layer's map on state values"}
    else:
        extrapolation["verdict_from"] = "error curve (no linear map could be read or fitted)"
    return {"source": "weights" if reason is None else "fit", "exact_read_unavailable": reason, "layers": layers,
            "extrapolation": extrapolation, "theta_star_map": _without_radii(star_map)}


def summary_star_map(star: HookedICTDTransformer, tasks: TaskBatch) -> dict[str, Any]:
    """theta*'s map on the evaluation tasks (its spectrum and fixed point), the one the report's first
    section and the first row of ``theta_star_limit`` both quote."""
    return iteration_map(star, tasks, 0, theta_star_coefficients(star.cfg.gamma))


def theta_star_limit(cfg, config: TrainConfig, at_training_length: dict[str, Any]) -> dict[str, Any]:
    """theta*'s limit as depth grows, computed rather than extrapolated: per context length, the sup
    error of the fixed point of its map (``iteration_map``) and that map's spectral radius (the
    asymptotic rate of its geometric decay). At the training length, ``at_training_length`` (its map on
    the evaluation tasks, as the report's first section quotes it); at the longer ``LIMIT_LENGTHS``, on
    ``LIMIT_TASKS`` other tasks with trajectories of the longest length (prefixes for the shorter ones)."""
    n_train = config.tasks.context_len
    tasks = sample_from(config.tasks, LIMIT_TASKS, seed=config.eval_seed + 2, length=max(LIMIT_LENGTHS))
    star = HookedICTDTransformer.from_theta_star(replace(cfg, dtype="float64", n_layers=1, tied=True))
    rows = [_limit_row(n_train, at_training_length, "evaluation")]
    for n in (n for n in LIMIT_LENGTHS if n > n_train):
        prefix = TaskBatch(tasks.mrp, tasks.features, tasks.states[:, : n + 1])
        rows.append(_limit_row(n, iteration_map(star, prefix, 0, theta_star_coefficients(cfg.gamma)), "long"))
    return {"n_tasks": LIMIT_TASKS, "rows": rows}


def _limit_row(n: int, result: dict[str, Any], tasks: str) -> dict[str, Any]:
    return {"context_len": n, "tasks": tasks, "fixed_point_error": result["fixed_point_error"],
            "fixed_point_error_interval": result["fixed_point_error_interval"],
            "spectral_radius_mean": result["spectral_radius_mean"],
            "fraction_contracting": result["fraction_contracting"]}


def _without_radii(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in ("spectral_radius", "fixed_point_errors")}


@torch.no_grad()
def _example(model: HookedICTDTransformer, star: HookedICTDTransformer, tasks) -> dict[str, Any]:
    """One prompt's patterns and grouped kernel, and every query prediction (for the figures)."""
    prompt = tasks.prompt
    _, mine = model.run_with_cache(prompt[:1], names_filter=ends_with("hook_pattern"))
    _, ref = star.run_with_cache(prompt[:1], names_filter=ends_with("hook_pattern"))
    M, _ = state_kernels(mine["pattern", 0][:, 0].double(), tasks.states[:1], tasks.mrp.n_states)
    return {"pattern_model": mine["pattern", 0][0, 0].tolist(), "pattern_theta_star": ref["pattern", 0][0, 0].tolist(),
            "grouped_kernel": M[0].nan_to_num(0.0).tolist(),
            "predicted": {"model": model(prompt)[:, -1].tolist(), "theta_star": star(prompt)[:, -1].tolist()},
            "true": tasks.v_true[:, -1].tolist()}
