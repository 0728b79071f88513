"""Convergence of the in-context value estimate (docs/theory.md §5, Theorem 2): error versus depth ``L`` and
versus context length ``n``, with a fitted geometric rate to set beside ``1 - C``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.analyses.metrics.diagonality import model_margin
from ictd_interp.config import ICTDConfig
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.hook_names import ends_with
from ictd_interp.models.registry import HookedModel
from ictd_interp.tasks.sampling import TaskBatch

CONTEXT_LENGTHS = (4, 8, 16, 32, 64, 128)  # the reports' error-versus-context lengths


def context_lengths(up_to: int) -> list[int]:
    """Doubling lengths 4, 8, 16, ... below ``up_to``, then ``up_to`` itself (prefixes of one trajectory)."""
    return sorted({4 * 2**k for k in range(max(up_to.bit_length() - 2, 0)) if 4 * 2**k < up_to} | {up_to})


def sup_error(values: Float[Tensor, "batch pos"], tasks: TaskBatch) -> Float[Tensor, "batch"]:
    """``||v - v_pi||_inf`` over the states the context visited (its positions)."""
    return (values.double().cpu() - tasks.v_true).abs().amax(-1)


@torch.no_grad()
def errors_by_depth(
    model: HookedICTDTransformer, tasks: TaskBatch, state_space: bool = False
) -> Float[Tensor, "depth batch"]:
    """Row ``L`` is the error after ``L`` layers (row 0: ``v_0 = 0``), from one cached forward, or (chosen
    with ``state_space``) from the exact state-space forward (``state_space_values``: float64, no ``n x n``)."""
    rows = [sup_error(torch.zeros_like(tasks.v_true), tasks)]
    if state_space:
        return torch.stack(rows + [sup_error(v, tasks) for v in model.state_space_values(tasks, every_layer=True)])
    _, cache = model.run_with_cache(tasks.prompt.to(model.device), names_filter=ends_with("hook_resid_post"))
    current = model.layout.current
    rows += [sup_error(cache["resid_post", l][..., current], tasks) for l in range(model.cfg.n_layers)]
    return torch.stack(rows)


@torch.no_grad()
def errors_by_context(
    model: HookedModel, tasks: TaskBatch, lengths: Sequence[int], state_space: bool = False
) -> Float[Tensor, "length batch"]:
    """Final-layer error on the prefixes ``S_0..S_n`` of the tasks' trajectories, for each ``n`` (``state_space``:
    through the exact state-space forward)."""
    longest = tasks.states.shape[1] - 1
    if max(lengths) > longest or min(lengths) < 1:
        raise ValueError(f"lengths: must lie in [1, {longest}] (the trajectories' length), got {list(lengths)}")
    rows = []
    for n in lengths:
        prefix = TaskBatch(tasks.mrp, tasks.features, tasks.states[:, : n + 1])
        values = model.state_space_values(prefix) if state_space else model(prefix.prompt.to(model.device))
        rows.append(sup_error(values, prefix))
    return torch.stack(rows)


@dataclass(frozen=True)
class GeometricFit:
    """``e_L = amplitude rate^L + floor`` fitted to an error curve (``fit_geometric``); ``sse`` its squared error."""

    rate: float
    amplitude: float
    floor: float
    sse: float


def fit_geometric(errors: Union[Sequence[float], np.ndarray], depths: Optional[Sequence[int]] = None) -> GeometricFit:
    """Fit ``e_L = a rho^L + floor`` (least squares over a fine grid of ``rho``; ``a`` and ``floor``
    in closed form for each), the shape Theorem 2 predicts."""
    e = np.asarray(errors, dtype=float)
    L = np.arange(len(e), dtype=float) if depths is None else np.asarray(depths, dtype=float)
    best = GeometricFit(float("nan"), float("nan"), float("nan"), float("inf"))
    for rho in np.linspace(0.001, 0.999, 999):
        design = np.stack([rho**L, np.ones_like(L)], axis=1)
        coef, *_ = np.linalg.lstsq(design, e, rcond=None)
        sse = float(((design @ coef - e) ** 2).sum())
        if sse < best.sse:
            best = GeometricFit(float(rho), float(coef[0]), float(coef[1]), sse)
    return best


def feature_scale_sweep(
    cfg: ICTDConfig, tasks_for_scale, scales: Sequence[float], depth: int = 32
) -> list[dict[str, float]]:
    """For each feature scale (θ*'s kernel's inverse temperature is its square): theta*'s margin ``C`` and its error
    at depth 1 and ``depth``. ``tasks_for_scale(scale)`` returns the tasks with features at that scale,
    so the transition where Assumption 5.1 starts to hold (``C > 0``) shows against the error."""
    model = HookedICTDTransformer.from_theta_star(cfg, depth=depth)
    rows = []
    for scale in scales:
        tasks = tasks_for_scale(scale)
        errors = errors_by_depth(model, tasks).mean(-1)
        C = model_margin(model, tasks)
        rows.append(
            {
                "scale": float(scale),
                "margin_mean": float(C.mean()),
                "margin_min": float(C.min()),
                "frac_tasks_assumption": float((C > 0).double().mean()),
                "error_depth_1": float(errors[1]),
                f"error_depth_{depth}": float(errors[depth]),
            }
        )
    return rows
