"""The fixed evaluation set of a run and the metrics logged along training (docs/theory.md §7)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.models.base import check_tasks
from ictd_interp.models.registry import HookedModel, holds_theta_star
from ictd_interp.models.stylised.model import HookedICTDTransformer
from ictd_interp.models.stylised.state_space import grouped_kernel, model_weights, transition_counts
from ictd_interp.models.stylised.theta_star import SIGNATURE_INPUTS
from ictd_interp.reference.metrics import (
    layer_diagonality,
    value_signature,
    visited_mean,
    weight_cosines,
    weight_distances,
)
from ictd_interp.tasks.sampling import TaskBatch, sample_from


@dataclass
class EvalSet:
    """Evaluation tasks seeded apart from training, and theta*'s error on them as the yardstick. ``state_space``:
    a run trained through the state-space forward on the CPU is evaluated through it too (float64 on the CPU, its
    cost independent of ``n``: at n = 300 and 192 layers the positional forward took 48 s an evaluation); others,
    and runs on an accelerator, where the positional forward runs on the device, positionally."""

    tasks: TaskBatch
    theta_star_msve: float
    state_space: bool = False

    @classmethod
    def build(cls, config) -> "EvalSet":
        tasks = sample_from(config.tasks, config.n_eval_tasks, seed=config.eval_seed)
        star = HookedICTDTransformer.from_theta_star(config.model).to(config.device)
        state_space = config.forward == "state-space" and torch.device(config.device).type == "cpu"
        return cls(tasks, msve(star, tasks, state_space), state_space)


@torch.no_grad()
def msve(model: HookedModel, tasks: TaskBatch, state_space: bool = False) -> float:
    """Mean squared value error of the value row against ``v_pi`` over every context position (``state_space``:
    the value row from the state-space forward)."""
    check_tasks(model, tasks)
    if state_space:
        return value_msve(model.state_space_values(tasks), tasks)
    return value_msve(model(tasks.prompt.to(model.device)), tasks)


def value_msve(values: Tensor, tasks: TaskBatch) -> float:
    """MSVE of a value row ``[batch, pos]`` against ``v_pi`` (the one definition every report uses)."""
    return float((values.double().cpu() - tasks.v_true).pow(2).mean())


PER_LAYER = {"per_layer": True}  # a list indexed by layer (how reports tabulate it)
DETAIL = {"detail": True}  # kept in summary.json for figures and readers, not tabulated


@dataclass(frozen=True)
class EvalMetrics:
    """The metrics logged along training (docs/theory.md §7). The weight probes against θ* (``cos_A``,
    ``cos_V``, ``signature``, ``signature_match``: per layer) exist only for the stylised model."""

    eval_msve: float
    theta_star_msve: float
    kernel_diagonality_mean: float
    kernel_diagonality_heads: Optional[list[list[float]]] = field(default=None, metadata=PER_LAYER)  # [layer][head]
    cos_A: Optional[list[float]] = field(default=None, metadata=PER_LAYER)
    cos_V: Optional[list[Optional[float]]] = field(default=None, metadata=PER_LAYER)
    dist_A: Optional[list[float]] = field(default=None, metadata=PER_LAYER)  # ||A - A*|| / ||A*||
    dist_V: Optional[list[float]] = field(default=None, metadata=PER_LAYER)  # ||V - V*|| / ||V*||
    signature: Optional[list[list[Optional[float]]]] = field(
        default=None, metadata={**PER_LAYER, "names": SIGNATURE_INPUTS}
    )  # (reward, next value, current value)
    signature_match: Optional[list[bool]] = field(default=None, metadata=PER_LAYER)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, leaving out what does not apply to the model's architecture."""
        return {k: v for k, v in asdict(self).items() if v is not None}


@torch.no_grad()
def run_with_diagonality(model: HookedModel, tasks: TaskBatch) -> tuple[Tensor, Float[Tensor, "layer head"]]:
    """The model's output on ``tasks`` and its kernel diagonality per layer and head, averaged over the tasks. Each
    layer's pattern is reduced as the forward computes it and then dropped: a cache of every pattern would hold
    layers × tasks × n² numbers (1.9 GB for 192 layers, 256 tasks at n = 100)."""
    table = torch.zeros(model.cfg.n_layers, model.cfg.n_heads, dtype=torch.float64)

    def reduce(pattern: Tensor, hook) -> None:
        table[hook.layer()] = layer_diagonality(pattern, tasks.states, tasks.mrp.n_states)

    patterns = [(name, reduce) for name in model.hook_dict if name.endswith("hook_pattern")]
    return model.run_with_hooks(tasks.prompt.to(model.device), fwd_hooks=patterns), table


@torch.no_grad()
def state_space_diagonality(model: HookedICTDTransformer, tasks: TaskBatch) -> Float[Tensor, "layer head"]:
    """``run_with_diagonality``'s table from the transition counts: a target in state ``s`` puts mass
    ``c(s) Ebar(s, s)`` on the sources in its own state (``state_space.grouped_kernel``), averaged over the states
    visited at any position (the query's too) and then over the tasks, as ``kernel_diagonality`` reads the pattern;
    a tied model's layers share one kernel (float64: equal to the pattern's reading to 1e-12, tested)."""
    A, _ = model_weights(model)  # [1, unique, d_feat, d_feat]
    states = tasks.states.cpu()
    c = transition_counts(states, tasks.mrp.n_states).sum(-1)  # [task, state]: sources in each state
    per_unique = []
    for u in range(A.shape[1]):
        self_mass = grouped_kernel(A[:, u], tasks.features.double().cpu(), c).diagonal(dim1=-2, dim2=-1) * c
        per_unique.append(visited_mean(self_mass, states).mean())
    layers = [per_unique[min(layer, len(per_unique) - 1)] for layer in range(model.cfg.n_layers)]
    return torch.stack(layers).view(model.cfg.n_layers, 1)


@torch.no_grad()
def evaluate(model: HookedModel, eval_set: EvalSet) -> EvalMetrics:
    """Every training-time metric of ``model`` on the evaluation tasks: error and kernel diagonality for
    any architecture; the weight probes against θ* (cosines, signature) for the stylised model."""
    cfg, tasks = model.cfg, eval_set.tasks
    check_tasks(model, tasks, "eval_set.tasks")
    if eval_set.state_space:
        values, diag = model.state_space_values(tasks), state_space_diagonality(model, tasks)
    else:
        values, diag = run_with_diagonality(model, tasks)
    common = EvalMetrics(
        eval_msve=value_msve(values, tasks),
        theta_star_msve=eval_set.theta_star_msve,
        kernel_diagonality_mean=diag.mean().item(),
        kernel_diagonality_heads=diag.tolist(),
    )
    if not holds_theta_star(model):
        return common
    cos, dist = weight_cosines(model, cfg), weight_distances(model, cfg)
    signature = value_signature(model, cfg)
    return replace(
        common,
        cos_A=cos["A"],
        cos_V=cos["V"],
        dist_A=dist["A"],
        dist_V=dist["V"],
        signature=[s["normalised"] for s in signature],
        signature_match=[s["matches"] for s in signature],
    )
