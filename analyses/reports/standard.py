"""``analyze`` for a standard-architecture model: find the TD circuit without being told where it is.

Nothing in a standard model is pinned, so the weight probes against θ* do not apply; everything here
is in function space and goes through the protocol both model classes share (docs/theory.md §10):
value probes per site (error vs depth), TD-quantity probes, per-head kernels and signatures, the
TD-family identification of the probed per-layer values, and the same error-vs-context,
best-in-family and (tied models) depth-extrapolation answers as the stylised report.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any, Optional

import torch

from analyses.metrics import baselines
from analyses.metrics.algorithm_id import depth_extrapolation, identify_from_values
from analyses.metrics.convergence import CONTEXT_LENGTHS, errors_by_context, sup_error
from analyses.metrics.diagonality import kernel_diagonality_mean
from analyses.metrics.heads import head_kernels, most_like, probed_layer_signatures, probed_signatures
from analyses.reports.schema import Summary, build, eval_tasks_label
from analyses.metrics.site_probes import (probe_errors_by_depth, probed_values, quantity_probes, quantity_r2,
                                   residual_stack, value_probes)
from ictd_interp.tasks.sampling import sample_from
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.architectures import ICTDModel
from ictd_interp.training.evaluation import EvalSet, evaluate
from ictd_interp.config.train import TrainConfig
from ictd_interp.io.progress import computed
from ictd_interp.models.hook_names import ends_with

# A tied standard block has no linear map to read a spectrum from: its error curve runs to 32x its depth
STANDARD_EXTRAPOLATION = 32


def compute_standard(model: ICTDModel, config: TrainConfig, source: str, curves: Optional[dict[str, list]]) -> Summary:
    """Every number of the report of a standard model, as a typed ``Summary``."""
    eval_set = EvalSet.build(replace(config, device="cpu"))
    model = model.to("cpu")
    tasks, star = eval_set.tasks, HookedICTDTransformer.from_theta_star(model.cfg)
    fit, few = sample_from(config.tasks, 256, seed=config.eval_seed + 2), tasks[:64]
    lengths = [n for n in CONTEXT_LENGTHS if not model.cfg.pos_embed or n < model.cfg.n_ctx]
    with torch.no_grad():
        values, star_values = model(tasks.prompt), star(tasks.prompt)

    @cache  # fitted once, on first use by a section
    def probes() -> dict[str, Any]:
        return {"output": value_probes(model, fit, "output"), "v_pi": value_probes(model, fit, "v_pi"),
                "quantity": quantity_probes(model, fit), "star_quantity": quantity_probes(star, fit)}

    @cache
    def kernels() -> list[dict]:
        return head_kernels(model, tasks)

    def convergence() -> dict[str, Any]:
        star_rows = residual_stack(star, tasks.prompt)[..., star.layout.current]
        long_tasks = sample_from(config.tasks, 64, seed=config.eval_seed + 1, length=max(lengths))
        output = probes()["output"]
        return {  # MSVE per site (this report) and, as the stylised report's depth curve, the sup error
            "depth_msve": {"model": probe_errors_by_depth(model, output, tasks),
                           "model_v_pi_probe": probe_errors_by_depth(model, probes()["v_pi"], tasks),
                           "theta_star": (star_rows - tasks.v_true).pow(2).mean((1, 2)).tolist()},
            "depth": {"model": [sup_error(v, tasks).mean().item() for v in probed_values(model, output, tasks)],
                      "theta_star": [sup_error(v, tasks).mean().item() for v in star_rows]},
            "context_lengths": lengths,
            "context": {name: errors_by_context(m, long_tasks, lengths).mean(-1).tolist()
                        for name, m in (("trained model", model), ("theta* (same depth)", star))}}

    def circuit() -> dict[str, Any]:
        p = probes()
        return {
            "quantity_r2": quantity_r2(model, p["quantity"], tasks),
            "theta_star_quantity_r2": quantity_r2(star, p["star_quantity"], tasks),
            "heads": kernels(),
            "signatures": probed_signatures(model, few, p["quantity"], p["output"]),
            "layer_signatures": probed_layer_signatures(model, few, p["quantity"], p["output"]),
            **most_like(kernels()),
        }

    def algorithm() -> dict[str, Any]:
        probed = probed_values(model, probes()["output"], few)
        return {
            "layers": identify_from_values(probed, few),
            "layers_tabular": identify_from_values(probed, few, kernel="tabular"),
            "extrapolation": depth_extrapolation(model, star, tasks, factor=STANDARD_EXTRAPOLATION)
            if model.cfg.tied
            else None,
        }

    sections = computed({
        "metrics": lambda: evaluate(model, eval_set).to_dict(),
        "baselines": lambda: baselines.compare(values, tasks, config.tasks.gamma, model.cfg.n_layers,
                                               extra={"theta_star": star_values}),
        "diagonality": lambda: {"theta_star": kernel_diagonality_mean(star, tasks)[0, 0].item()},
        "convergence": convergence, "circuit": circuit, "algorithm": algorithm,
        "example": lambda: _example(model, star, tasks, kernels()),
    }, desc="analyze")
    return build(Summary, {"source": source, "config": config.to_dict(), "model_config": model.cfg.to_dict(),
                           "architecture": "standard", "n_eval_tasks": len(tasks),
                           "eval_tasks": eval_tasks_label(config, len(tasks)), "curves": curves, **sections})


@torch.no_grad()
def _example(model: ICTDModel, star: HookedICTDTransformer, tasks, kernels: list[dict]) -> dict[str, Any]:
    best = max(kernels, key=lambda r: r["td_kernel_correlation"])
    _, mine = model.run_with_cache(tasks.prompt[:1], names_filter=ends_with("hook_pattern"))
    _, ref = star.run_with_cache(tasks.prompt[:1], names_filter=ends_with("hook_pattern"))
    return {
        "best_head": [best["layer"], best["head"]],
        "pattern_model": mine["pattern", best["layer"]][0, best["head"]].tolist(),
        "pattern_theta_star": ref["pattern", 0][0, 0].tolist(),
        "predicted": {"model": model(tasks.prompt)[:, -1].tolist(), "theta_star": star(tasks.prompt)[:, -1].tolist()},
        "true": tasks.v_true[:, -1].tolist(),
    }
