"""Evaluation on MRP sources the model never trained on (Boyan, loop, random, Gymnasium)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Union

import torch
from torch import Tensor

from analyses.metrics import baselines
from analyses.figures import plots as figures
from analyses.metrics.convergence import GeometricFit, errors_by_context, errors_by_depth, fit_geometric
from analyses.metrics.diagonality import model_margin
from analyses.metrics.probes import query_gap
from analyses.reports.render import baseline_table
from analyses.metrics.baselines import Baselines
from analyses.summary.store import build, to_json
from ictd_interp.io.progress import computed
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.architectures import ICTDModel, is_stylised
from ictd_interp.models.state_space import state_space_unavailable
from ictd_interp.tasks.mrp import describe_classes
from ictd_interp.tasks.sampling import TaskBatch


def evaluate_ood(model: ICTDModel, tasks: TaskBatch, depth: int, lengths: list[int]) -> dict[str, Any]:
    """Error versus depth and context length for the model and theta*, margin ``C``, and their gap
    (a standard model has no stored per-layer values nor a feature block ``A``: its depth curve and
    margin are left out). θ*'s curves and the model's come from the exact state-space forward wherever it
    applies (a stylised model in the TSM form with the paper mask and softmax: ``exact``; float64, cost
    independent of the context length), else from the positional forward."""
    star = HookedICTDTransformer.from_theta_star(model.cfg)
    star_deep = HookedICTDTransformer.from_theta_star(model.cfg, depth=depth)
    exact = {"model": is_stylised(model) and state_space_unavailable(model.cfg) is None,
             "theta_star": state_space_unavailable(star.cfg) is None}
    star_depth = errors_by_depth(star_deep, tasks, state_space=exact["theta_star"]).mean(-1).tolist()
    if bool(tasks.mrp.has_unique_stationary.all()):
        margin = {"theta_star": model_margin(star, tasks).mean().item()}
        if is_stylised(model):
            margin["model"] = model_margin(model, tasks).mean().item()
    else:  # e.g. absorbing terminals: Assumption 5.1's population kernel needs a unique mu_pi
        first = int((~tasks.mrp.has_unique_stationary).nonzero()[0, 0])
        margin = {"unavailable": f"no unique stationary distribution: {describe_classes(tasks.mrp.P[first])}"}
    values = {name: _values(m, tasks, exact[name]) for name, m in (("model", model), ("theta_star", star))}
    sections = computed({
        "depth": lambda: {"theta_star": star_depth,
                          **({"model": errors_by_depth(model, tasks, exact["model"]).mean(-1).tolist()}
                             if is_stylised(model) else {})},
        "context": lambda: {name: errors_by_context(m, tasks, lengths, exact[name]).mean(-1).tolist()
                            for name, m in (("model", model), ("theta_star", star))},
        "gap": lambda: query_gap(values["model"][:, -1], values["theta_star"][:, -1], tasks),
        "baselines": lambda: baselines.compare(values["model"], tasks, tasks.mrp.gamma, model.cfg.n_layers,
                                               extra={"theta_star": values["theta_star"]}),
    }, desc="evaluate")
    return {"n_states": tasks.mrp.n_states, "n_tasks": len(tasks), "context_len": tasks.states.shape[1] - 1,
            "margin": margin, "theta_star_fit": fit_geometric(star_depth), "context_lengths": lengths, **sections}


@torch.no_grad()
def _values(model: ICTDModel, tasks: TaskBatch, state_space: bool) -> Tensor:
    """The value row ``[batch, pos]`` on the CPU: exact in state space where chosen, else the positional forward."""
    return model.state_space_values(tasks) if state_space else model(tasks.prompt.to(model.device)).cpu()


def write_ood(result: dict[str, Any], out_dir: Union[str, Path]) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "evaluation.json").write_text(json.dumps(to_json(result), indent=1))
    base = build(Baselines, result["baselines"])  # typed, or as evaluation.json holds it
    title = f"# Out-of-distribution evaluation of `{result.get('source', '')}` on {result.get('environment', '')}"
    lines = [title, "", f"{result['n_tasks']} tasks, {result['n_states']} "
                        f"states, context length {result['context_len']}.",
             "", base.sentence, "", *baseline_table(base), ""]
    (out_dir / "evaluation.md").write_text("\n".join(lines))
    for name, fig in ood_figures(result).items():
        for ext in ("png", "svg"):
            fig.savefig(out_dir / f"{name}.{ext}", dpi=120)


def ood_figures(result: dict[str, Any]) -> dict[str, Any]:
    """The evaluation's figures, from its saved numbers."""
    fits = {"theta*": build(GeometricFit, result["theta_star_fit"])}  # typed, or as evaluation.json holds it
    where = result.get("environment", "")
    curves = {"theta*": result["depth"]["theta_star"]}
    if "model" in result["depth"]:
        curves["trained model"] = result["depth"]["model"]
    depth_fig = figures.error_vs_depth(curves, fits)
    depth_fig.axes[0].set_title(figures.wrapped(f"Error versus depth ({where}, policy: "
                                                f"{result.get('policy', 'n/a')})", 50),
                                fontsize=9)
    return {"error_vs_depth": depth_fig,
            "error_vs_context": figures.error_vs_context(result["context_lengths"], result["context"], where)}
