"""Evaluation on MRP sources the model never trained on (Boyan, loop, random, Gymnasium)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import torch
from torch import Tensor

from ictd_interp.analyses.figures import plots as figures
from ictd_interp.analyses.figures.style import wrapped
from ictd_interp.analyses.metrics import baselines, in_context
from ictd_interp.analyses.metrics.algorithm_id import LayerReading, read_layer
from ictd_interp.analyses.metrics.baselines import Baselines
from ictd_interp.analyses.metrics.convergence import GeometricFit, errors_by_context, errors_by_depth, fit_geometric
from ictd_interp.analyses.metrics.diagonality import model_margin
from ictd_interp.analyses.metrics.in_context import InContext
from ictd_interp.analyses.metrics.probes import query_gap
from ictd_interp.analyses.reports.shared_figures import ladder_of
from ictd_interp.analyses.reports.summary_md import answer_lines, baseline_table, ladder_lines
from ictd_interp.analyses.summary.store import build, to_json
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.io.progress import computed
from ictd_interp.io.staging import staged
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.registry import HookedModel, holds_theta_star
from ictd_interp.models.stylised.state_space import state_space_unavailable
from ictd_interp.tasks.mrp import describe_classes
from ictd_interp.tasks.sampling import TaskBatch


@dataclass(kw_only=True)
class Margins:
    """Assumption 5.1's mean margin ``C`` of θ* and the model, or why there is none (no unique μ_π)."""

    theta_star: Optional[float] = None
    model: Optional[float] = None
    unavailable: Optional[str] = None


@dataclass(kw_only=True)
class Curves:
    """Mean sup error per depth or per context length; ``model`` absent where the model has no such curve."""

    theta_star: list[float]
    model: Optional[list[float]] = None


@dataclass(kw_only=True)  # fields in evaluation.json's order
class Evaluation:
    """``evaluate``'s result (``evaluation.json``): where the tasks came from, then every number."""

    source: str = ""
    environment: str = ""
    policy: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    n_states: int
    n_tasks: int
    context_len: int
    margin: Margins
    theta_star_fit: GeometricFit
    context_lengths: list[int]
    depth: Curves
    context: Curves
    gap: dict[str, float]
    baselines: Baselines
    in_context: Optional[InContext] = None  # the Answer: analyze's verdict, on these tasks (None: before it)


def evaluate_ood(
    model: HookedModel,
    tasks: TaskBatch,
    depth: int,
    lengths: list[int],
    dist: Optional[TaskDistribution] = None,
    seed: int = 0,
) -> Evaluation:
    """Error versus depth and context length for the model and theta*, margin ``C``, and their gap
    (a standard model has no stored per-layer values nor a feature block ``A``: its depth curve and
    margin are left out). θ*'s curves and the model's come from the exact state-space forward wherever it
    applies (a stylised model in the TSM form with the paper mask and softmax: ``exact``; float64, cost
    independent of the context length), else from the positional forward. With ``dist`` (the distribution
    ``tasks`` were drawn from, features drawn too) the Answer is ``analyze``'s: the function-space verdict on
    these tasks and the verdict ladder on tasks of ``dist`` drawn from ``seed`` (``in_context.assess``)."""
    star = HookedICTDTransformer.from_theta_star(model.cfg)
    star_deep = HookedICTDTransformer.from_theta_star(model.cfg, depth=depth)
    exact = {
        "model": holds_theta_star(model) and state_space_unavailable(model.cfg) is None,
        "theta_star": state_space_unavailable(star.cfg) is None,
    }
    star_depth = errors_by_depth(star_deep, tasks, state_space=exact["theta_star"]).mean(-1).tolist()
    if bool(tasks.mrp.has_unique_stationary.all()):
        margin = Margins(
            theta_star=model_margin(star, tasks).mean().item(),
            model=model_margin(model, tasks).mean().item() if holds_theta_star(model) else None,
        )
    else:  # e.g. absorbing terminals: Assumption 5.1's population kernel needs a unique mu_pi
        first = int((~tasks.mrp.has_unique_stationary).nonzero()[0, 0])
        margin = Margins(unavailable=f"no unique stationary distribution: {describe_classes(tasks.mrp.P[first])}")
    mine, theirs = _values(model, tasks, exact["model"]), _values(star, tasks, exact["theta_star"])
    context = lambda m, ok: errors_by_context(m, tasks, lengths, ok).mean(-1).tolist()  # noqa: E731
    sections = computed(
        {
            "depth": lambda: Curves(
                theta_star=star_depth,
                model=errors_by_depth(model, tasks, exact["model"]).mean(-1).tolist()
                if holds_theta_star(model)
                else None,
            ),
            "context": lambda: Curves(
                theta_star=context(star, exact["theta_star"]), model=context(model, exact["model"])
            ),
            "gap": lambda: query_gap(mine[:, -1], theirs[:, -1], tasks),
            "baselines": lambda: baselines.compare(
                mine, tasks, tasks.mrp.gamma, model.cfg.n_layers, extra={"theta_star": theirs}
            ),
            "in_context": lambda: (
                None
                if dist is None
                else in_context.assess(model, tasks, out["baselines"], _last_layer(model), dist, seed)
            ),
        },
        desc="evaluate",
        into=(out := {}),
    )
    return Evaluation(
        n_states=tasks.mrp.n_states,
        n_tasks=len(tasks),
        context_len=tasks.states.shape[1] - 1,
        margin=margin,
        theta_star_fit=fit_geometric(star_depth),
        context_lengths=lengths,
        **sections,
    )


def _last_layer(model: HookedModel) -> Optional[LayerReading]:
    """The last layer read exactly from the weights where that applies (else the discount is left to ``analyze``)."""
    if holds_theta_star(model) and state_space_unavailable(model.cfg) is None:
        return read_layer(model, model.cfg.n_layers - 1)
    return None


@torch.no_grad()
def _values(model: HookedModel, tasks: TaskBatch, state_space: bool) -> Tensor:
    """The value row ``[batch, pos]`` on the CPU: exact in state space where chosen, else the positional forward."""
    return model.state_space_values(tasks) if state_space else model(tasks.prompt.to(model.device)).cpu()


def write_ood(result: Evaluation, out_dir: Union[str, Path]) -> None:
    """``evaluation.json``, ``evaluation.md`` and ``figures/``, all or none (``staged``)."""
    with staged(Path(out_dir)) as work:
        _write_ood(result, work)


def _write_ood(result: Evaluation, out_dir: Path) -> None:
    (out_dir / "evaluation.json").write_text(json.dumps(to_json(result), indent=1))
    title = f"# Out-of-distribution evaluation of `{result.source}` on {result.environment}"
    lines = [
        title,
        "",
        sample_sentence(result),
        "",
        *answer_lines(result.in_context),
        *ladder_lines(result.in_context),
        result.baselines.sentence,
        "",
        *baseline_table(result.baselines),
        "",
        "## Error against context length and depth",
        "",
        *curve_sentences(result),
        "",
    ]
    (out_dir / "evaluation.md").write_text("\n".join(lines))
    (out_dir / "figures").mkdir()  # as analyze lays its folder out
    for name, fig in ood_figures(result).items():
        for ext in ("png", "svg"):
            fig.savefig(out_dir / "figures" / f"{name}.{ext}", dpi=120)


def sample_sentence(result: Evaluation) -> str:
    """Which tasks, how many, and at which depth every number below is read."""
    s = result.settings
    features = f"{s.get('feature_kind', '?')} features × {s.get('feature_scale', '?')}"
    return (
        f"{result.n_tasks} tasks from `{result.environment}` (policy: {result.policy or 'n/a'}), {result.n_states} "
        f"states, one trajectory of {result.context_len} transitions per task, γ = {s.get('gamma', '?')}, "
        f"{features}, seed {s.get('seed', '?')}. The model runs at its own depth ({result.baselines.depth} layers) "
        "and θ* at the same depth unless a line says otherwise; errors are over the context's positions 0..n, "
        "the query included, and every curve is a mean over the tasks."
    )


def curve_sentences(result: Evaluation) -> list[str]:
    """What the two figures show, in words (their numbers are in evaluation.json)."""
    n, ctx, fit = result.context_lengths, result.context, result.theta_star_fit

    def course(curve: list[float]) -> str:
        best = min(range(len(curve)), key=curve.__getitem__)
        return f"{curve[0]:.3f} at n = {n[0]} → {curve[-1]:.3f} at n = {n[-1]}" + (
            f" (lowest {curve[best]:.3f} at n = {n[best]})" if 0 < best < len(curve) - 1 else ""
        )

    lines = [
        f"- Sup error ‖v_L − v_π‖∞ against the context length (figure `error_vs_context.png`): the model "
        f"{course(ctx.model)}; θ* at the same depth {course(ctx.theta_star)}."
    ]
    deepest = len(result.depth.theta_star) - 1
    star = result.depth.theta_star
    lines.append(
        f"- Against depth at n = {result.context_len} (figure `figures/error_vs_depth.png`): θ* {star[0]:.3f} "
        f"at depth 0 → {star[-1]:.3f} at depth {deepest}; a fit a ρ^L + floor over those "
        f"depths gives ρ = {fit.rate:.3f} and floor {fit.floor:.3f} (the fit's, over the depths it saw)"
        + (
            f"; the model {result.depth.model[-1]:.3f} at its depth {len(result.depth.model) - 1}."
            if result.depth.model
            else "."
        )
    )
    m = result.margin
    lines.append(
        f"- Assumption 5.1 margin C (mean over the tasks): θ* {m.theta_star:+.3f}"
        + (f", the model's kernel {m.model:+.3f}" if m.model is not None else "")
        + ("; C ≤ 0: Theorem 2's contraction bound does not apply." if m.theta_star <= 0 else ".")
        if m.unavailable is None
        else f"- Assumption 5.1 margin: not computed ({m.unavailable})."
    )
    return lines


def ood_figures(result: Union[Evaluation, dict[str, Any]]) -> dict[str, Any]:
    """The evaluation's figures, from its numbers (typed, or as evaluation.json holds them)."""
    result = build(Evaluation, result)
    fits = {"theta*": result.theta_star_fit}
    curves = {"theta*": result.depth.theta_star}
    if result.depth.model is not None:
        curves["trained model"] = result.depth.model
    depth_fig = figures.error_vs_depth(curves, fits)
    depth_fig.axes[0].set_title(
        wrapped(
            f"Error versus depth at n = {result.context_len} ({result.environment}; mean over {result.n_tasks} tasks)",
            50,
        ),
        fontsize=9,
    )
    context = {"trained model": result.context.model, "theta_star": result.context.theta_star}
    where = f"{result.environment}, depth {result.baselines.depth}; mean over {result.n_tasks} tasks"
    ladder = result.in_context.ladder if result.in_context is not None else None
    return {
        **({"ladder": ladder_of(ladder, result.environment)} if ladder is not None else {}),
        "error_vs_depth": depth_fig,
        "error_vs_context": figures.error_vs_context(result.context_lengths, context, where),
    }
