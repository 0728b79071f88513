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

from analyses.metrics import baselines
from analyses.metrics.algorithm_id import depth_extrapolation
from analyses.metrics.convergence import CONTEXT_LENGTHS, errors_by_context, sup_error
from analyses.metrics.diagonality import kernel_diagonality_mean
from analyses.metrics.heads import head_kernels, most_like
from analyses.metrics.linear_family import convergence, identified_model, identify, td0_model
from analyses.metrics.site_probes import residual_stack
from analyses.reports.schema import Summary, build, eval_tasks_label
from ictd_interp.config.train import TrainConfig
from ictd_interp.models import HookedICTDTransformer, HookedLinearICTD
from ictd_interp.tasks.sampling import sample_from
from ictd_interp.training.evaluation import EvalSet, evaluate

LINEAR_EXTRAPOLATION = 8  # a tied layer's error curve runs to 8x its depth


def compute_linear(model: HookedLinearICTD, config: TrainConfig, source: str,
                   curves: Optional[dict[str, list]]) -> Summary:
    """Every number of the report of a linear model, as a typed ``Summary``."""
    eval_set = EvalSet.build(replace(config, device="cpu"))
    model = model.to("cpu")
    tasks, star = eval_set.tasks, HookedICTDTransformer.from_theta_star(model.cfg.theta_star_config())
    td, member = td0_model(model), identified_model(model)
    layers = identify(model)
    with torch.no_grad():
        values, td_values, member_values = model(tasks.prompt), td(tasks.prompt), member(tasks.prompt)
        star_values = star(tasks.prompt)
    positions = tasks.prompt.shape[1]  # the query columns are the last n + 1 (depth 0 predicts 0 everywhere)
    rows = {"model": -residual_stack(model, tasks.prompt)[..., -positions:, -1],
            "td0": -residual_stack(td, tasks.prompt)[..., -positions:, -1],
            "theta_star": residual_stack(star, tasks.prompt)[..., star.layout.current]}
    per_layer = {name: [sup_error(v, tasks).mean().item() for v in site] for name, site in rows.items()}
    residual = (values - member_values).double().pow(2).sum()
    kernels = head_kernels(model, tasks)
    lengths = list(CONTEXT_LENGTHS)
    long_tasks = sample_from(config.tasks, 64, seed=config.eval_seed + 1, length=max(lengths))
    return build(Summary, {
        "source": source, "config": config.to_dict(), "model_config": model.cfg.to_dict(),
        "architecture": "linear-ictd", "n_eval_tasks": len(tasks), "eval_tasks": eval_tasks_label(config, len(tasks)),
        "metrics": evaluate(model, eval_set).to_dict(),
        "baselines": baselines.compare(values, tasks, config.tasks.gamma, model.cfg.n_layers,
                                       extra={"theta_star": star_values, "td0_construction": td_values,
                                              "identified_member": member_values}),
        "diagonality": {"theta_star": kernel_diagonality_mean(star, tasks)[0, 0].item()},
        "convergence": {"depth": per_layer, "context_lengths": lengths,
                        "context": {name: errors_by_context(m, long_tasks, lengths).mean(-1).tolist()
                                    for name, m in (("trained model", model), ("TD(0) construction (same depth)", td))}},
        "circuit": {"heads": kernels, **most_like(kernels)},
        "algorithm": {"layers": layers, "source": "weights",
                      "extrapolation": depth_extrapolation(model, td, tasks, factor=LINEAR_EXTRAPOLATION)
                      if model.cfg.tied else None},
        "linear": {"function_r2": 1.0 - float(residual / (values - values.mean()).double().pow(2).sum()),
                   "iteration": convergence(model, layers, tasks), "weights": _weights(model, td)},
        "curves": curves,
        "example": {"predicted": {"model": values[:, -1].tolist(), "TD(0) construction": td_values[:, -1].tolist()},
                    "true": tasks.v_true[:, -1].tolist()},
    })


def _weights(model: HookedLinearICTD, td: HookedLinearICTD) -> dict[str, Any]:
    """``P`` and ``Q`` of each (unique) layer, on the sign that makes ``P[-1, -1] >= 0`` (the layer is unchanged
    by ``(P, Q) -> (-P, -Q)``), and the TD(0) construction's, for the figure."""
    signs = [1.0 if a.P[-1, -1] >= 0 else -1.0 for a in model.unique_attention()]
    return {"P": [(s * a.P.detach().double()).tolist() for s, a in zip(signs, model.unique_attention())],
            "Q": [(s * a.Q.detach().double()).tolist() for s, a in zip(signs, model.unique_attention())],
            "P_td0": td.blocks[0].attn.P.detach().tolist(), "Q_td0": td.blocks[0].attn.Q.detach().tolist()}
