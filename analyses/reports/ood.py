"""Evaluation on MRP sources the model never trained on (Boyan, loop, random, Gymnasium)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Union

import torch

from analyses.metrics import baselines
from analyses.figures import plots as figures
from analyses.metrics.convergence import GeometricFit, errors_by_context, errors_by_depth, fit_geometric
from analyses.metrics.diagonality import model_margin
from analyses.metrics.probes import prediction_gap
from analyses.reports.render import baseline_table
from analyses.metrics.baselines import Baselines
from analyses.summary.store import build, to_json
from ictd_interp.io.progress import computed
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.architectures import ICTDModel, is_stylised
from ictd_interp.tasks.mrp import describe_classes
from ictd_interp.tasks.sampling import TaskBatch


def evaluate_ood(model: ICTDModel, tasks: TaskBatch, depth: int, lengths: list[int]) -> dict[str, Any]:
    """Error versus depth and context length for the model and theta*, margin ``C``, and their gap
    (a standard model has no stored per-layer values nor a feature block ``A``: its depth curve and
    margin are left out)."""
    star = HookedICTDTransformer.from_theta_star(model.cfg)
    star_deep = HookedICTDTransformer.from_theta_star(model.cfg, depth=depth)
    star_depth = errors_by_depth(star_deep, tasks).mean(-1).tolist()
    if bool(tasks.mrp.has_unique_stationary.all()):
        margin = {"theta_star": model_margin(star, tasks).mean().item()}
        if is_stylised(model):
            margin["model"] = model_margin(model, tasks).mean().item()
    else:  # e.g. absorbing terminals: Assumption 5.1's population kernel needs a unique mu_pi
        first = int((~tasks.mrp.has_unique_stationary).nonzero()[0, 0])
        margin = {"unavailable": f"no unique stationary distribution: {describe_classes(tasks.mrp.P[first])}"}
    sections = computed({
        "depth": lambda: {"theta_star": star_depth,
                          **({"model": errors_by_depth(model, tasks).mean(-1).tolist()} if is_stylised(model) else {})},
        "context": lambda: {name: errors_by_context(m, tasks, lengths).mean(-1).tolist()
                            for name, m in (("model", model), ("theta_star", star))},
        "gap": lambda: prediction_gap(model, tasks, star),
        "baselines": lambda: _baselines(model, star, tasks),
    }, desc="evaluate")
    return {"n_states": tasks.mrp.n_states, "n_tasks": len(tasks), "context_len": tasks.states.shape[1] - 1,
            "margin": margin, "theta_star_fit": fit_geometric(star_depth), "context_lengths": lengths, **sections}


@torch.no_grad()
def _baselines(model: ICTDModel, star: HookedICTDTransformer, tasks: TaskBatch) -> Baselines:
    """The model beside the no-training estimators on these out-of-distribution tasks."""
    device = model.device
    values, star_values = model(tasks.prompt.to(device)).cpu(), star(tasks.prompt.to(device)).cpu()
    return baselines.compare(values, tasks, tasks.mrp.gamma, model.cfg.n_layers, extra={"theta_star": star_values})


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
