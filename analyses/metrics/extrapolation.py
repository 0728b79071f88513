"""What a model's layers do run beyond the depth they were trained at: the error curve against depth, its
verdict, and how deep the curve must run for a layer's spectrum to show.

A tied model repeats its layer; a per-layer model keeps its layers and repeats its last one
(``layer_at_depth``; a standard model the same through ``values_at_depth``). The curve is compared with a
construction run to the same depths (θ*, or a linear model's TD(0) construction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.hook_names import attn_param, get_act_name
from ictd_interp.models.registry import HookedModel, holds_theta_star
from ictd_interp.tasks.sampling import TaskBatch
from ictd_interp.training.evaluation import DETAIL, value_msve


@dataclass(kw_only=True)  # fields in summary.json's order
class Extrapolation:
    """The error curve against depth (``depths``, ``model``, the construction's ``reference``) and its verdict
    (``extrapolation_verdict``); a stylised report lets the last layer's spectrum decide instead and keeps the
    curve's own verdict as ``curve_verdict``, saying which in ``verdict_from``."""

    trained_depth: int
    best_depth: int
    converges: bool
    verdict: str
    depths: list[int] = field(metadata=DETAIL)
    model: list[Optional[float]] = field(metadata=DETAIL)
    reference: list[Optional[float]] = field(metadata=DETAIL)
    reference_name: str = "theta*"  # theta*, or a linear model's "TD(0) construction"
    curve_verdict: Optional[str] = None
    verdict_from: Optional[str] = None


def spectral_depth(radii: list[float], trained: int, cap: int = 256) -> int:
    """How deep the extrapolation must run for the spectrum's verdict to show in the error: until the
    median task's slowest mode has shrunk (or grown) by a factor 1000, at least 8x the trained depth."""
    rho = float(np.median(radii))
    if rho <= 0:
        return 8 * trained
    if abs(math.log(rho)) < 1e-6:
        return cap
    return int(min(cap, max(8 * trained, math.ceil(math.log(1e3) / abs(math.log(rho))))))


def depths_up_to(deepest: int, trained: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, 16, ... up to ``deepest``, with the trained depth and ``deepest`` itself."""
    ladder = {1, 2, 3}
    k = 4
    while k <= deepest:
        ladder |= {k, k + k // 2}
        k *= 2
    return sorted({d for d in ladder if d <= deepest} | {trained, deepest})


def layer_at_depth(model: HookedICTDTransformer, depth: int) -> HookedICTDTransformer:
    """The trained layers run to another depth: a tied model repeats its layer; a per-layer model
    keeps its layers and repeats its last one beyond its trained depth (or stops early)."""
    cfg = type(model.cfg).from_dict({**model.cfg.to_dict(), "n_layers": depth})
    deeper = type(model)(cfg).to(model.device)
    trained, last = model.state_dict(), model.cfg.n_layers - 1
    deeper.load_state_dict(
        {attn_param(l, name): trained[attn_param(min(l, last), name)] for l in range(depth) for name in ("A", "V")}
    )
    return deeper


def depth_extrapolation(
    model: HookedModel,
    star: HookedModel,
    tasks: TaskBatch,
    depths: Optional[list[int]] = None,
    factor: int = 8,
    reference_name: str = "theta*",
) -> Extrapolation:
    """MSVE of the model's layers and of a construction (``star``, named ``reference_name``: theta*, or a
    linear model's TD(0) construction) run to each depth (default: 1 .. ``factor`` x the trained depth),
    with the verdict the error curve gives (``extrapolation_verdict``)."""
    trained = model.cfg.n_layers
    depths = depths or depths_up_to(factor * trained, trained)
    errors = msve_at_depths(model, tasks, depths)
    best_depth, converges, verdict = extrapolation_verdict(depths, errors)
    return Extrapolation(
        trained_depth=trained,
        depths=depths,
        model=errors,
        reference=msve_at_depths(star, tasks, depths),
        reference_name=reference_name,
        best_depth=best_depth,
        converges=converges,
        verdict=verdict,
    )


@torch.no_grad()
def msve_at_depths(model: HookedModel, tasks: TaskBatch, depths: list[int]) -> list[float]:
    """MSVE after each of ``depths`` layers; a stylised model in one forward pass of the deepest
    (``layer_at_depth``), caching only the value rows it needs."""
    if not holds_theta_star(model):
        return [msve_at_depth(model, tasks, d) for d in depths]
    deeper = layer_at_depth(model, max(depths))
    wanted = {get_act_name("resid_post", d - 1) for d in depths}
    _, cache = deeper.run_with_cache(tasks.prompt.to(deeper.device), names_filter=lambda name: name in wanted)
    current = deeper.layout.current
    return [value_msve(cache["resid_post", d - 1][..., current], tasks) for d in depths]


@torch.no_grad()
def msve_at_depth(model: HookedModel, tasks: TaskBatch, depth: int) -> float:
    """MSVE of the model's layers run to ``depth`` (``values_at_depth``)."""
    return value_msve(values_at_depth(model, tasks, depth), tasks)


@torch.no_grad()
def values_at_depth(model: HookedModel, tasks: TaskBatch, depth: int) -> Tensor:
    """The value row ``[batch, pos]`` of the model's layers run to ``depth`` (``layer_at_depth``; a standard model
    repeats its last block: its ``values_at_depth``)."""
    prompt = tasks.prompt.to(model.device)
    if holds_theta_star(model):
        return layer_at_depth(model, depth)(prompt)
    return model.values_at_depth(prompt, depth)


def extrapolation_verdict(depths: list[int], errors: list[float]) -> tuple[int, bool, str]:
    """``(best depth, converges, verdict)``. ``converges`` when the deepest error is within 1.5x of the best;
    ``settles on a worse fixed point`` when it is not but the last two depths agree within 5% (the iteration
    settles, on a worse estimate: its error rises with depth, so it is not said to converge); else ``diverges after
    depth k`` (k the best depth). Non-finite errors diverge."""
    finite = [e if math.isfinite(e) else float("inf") for e in errors]
    best = int(np.argmin(finite))
    near_best = finite[-1] <= 1.5 * finite[best]
    settled = math.isfinite(finite[-1]) and len(finite) > 1 and abs(finite[-1] / finite[-2] - 1) < 0.05
    if near_best:
        verdict = "converges"
    elif settled:
        verdict = f"settles on a worse fixed point after depth {depths[best]}"
    else:
        verdict = f"diverges after depth {depths[best]}"
    return depths[best], near_best, verdict
