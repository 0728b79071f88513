"""Where a stylised layer's values go as depth -> infinity, computed without a singular solve.

In state space (``ictd_interp.models.stylised.state_space``) one layer is ``v <- v + Ebar (y0 + F v)`` with
``Ebar [state, source state]`` the grouped kernel, ``y0 = c (X w_x + w_R r)`` the drive and
``F = diag(c) w_cur + gamma w_tar N`` (rows: the source states). Its map on the state values is
``T = I + Ebar F``. Writing ``y_l = y0 + F v_l``,

    y_{l+1} = (I + F Ebar) y_l = H y_l,      v_L = v_0 + Ebar sum_{l < L} H^l y_0,

so the iteration lives in the span of ``Ebar``'s columns: one direction per source state. ``T`` and ``H``
share their eigenvalues except that ``T`` has the eigenvalue exactly 1 once per context state that is
never a source (the query state seen only as the query): those directions are *neutral*, never moved
by the layer. The limit therefore exists iff ``rho(H) < 1`` and is

    v_inf = v_0 - Ebar (F Ebar)^{-1} (y0 + F v_0),

a solve with ``F Ebar`` (source states only), regular whenever ``rho(H) < 1``. Solving the full
``(I - T) v = b`` instead is singular exactly in the neutral case, and rounding then decides whether a
solver notices.

For θ* (``w_R = 1, w_tar = 1, w_cur = -1``) the limit makes ``y = 0``: every source state's summed TD
error vanishes, the certainty-equivalence TD equations of the context. Where the query state is also a
source that is the whole tabular fixed point (``baselines.td_fixed_point``, whatever the kernel); where it is
not, the equations leave the query state's value free and θ*'s kernel picks it (its row of ``Ebar``),
while ``td_fixed_point`` sets it to the constant predictor: the two then differ on the whole context.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.models.stylised.state_space import layer_parts, model_weights, moving_radius, transition_counts
from ictd_interp.tasks.sampling import TaskBatch

NEUTRAL_TOL = 1e-9  # |rho - 1| below this is reported as neutral (float64 rounding of an exact 1)


@dataclass(frozen=True)
class LimitSpectrum:
    """Per task: ``radius`` the spectral radius of ``H`` (the part of the map that moves, the asymptotic
    rate), ``neutral`` whether ``T`` also has the neutral eigenvalue 1 (a context state never a source),
    ``reason`` why no limit exists (None: it does)."""

    radius: list[float]
    neutral: list[bool]
    reason: list[str | None]


def _layer_operators(model, tasks: TaskBatch, layer: int):
    """``layer_parts`` of the model's ``layer`` on ``tasks`` (float64), and which states are sources."""
    A, w = model_weights(model)
    u = min(layer, A.shape[1] - 1)
    N = transition_counts(tasks.states, tasks.mrp.n_states)
    X, r = tasks.features.double(), tasks.mrp.r.double()
    kernel, y0, F = layer_parts(A[:, u], w[:, u], X, r, N, model.cfg.gamma)
    return kernel, y0, F, N.sum(-1) > 0


def limit_from(model, tasks: TaskBatch, start: Tensor, layer: int) -> tuple[Tensor, LimitSpectrum]:
    """The limit of repeating ``layer`` from state values ``start [task, state]``."""
    kernel, y0, F, source = _layer_operators(model, tasks, layer)
    out = torch.full_like(start, float("nan"))
    radius, neutral, reason = [], [], []
    seen = torch.zeros_like(source)
    seen.scatter_(1, tasks.states, True)
    radii = moving_radius(kernel, F, source).tolist()
    for t in range(len(tasks)):
        s, rho = source[t], radii[t]
        FE = F[t][s] @ kernel[t][:, s]  # [source, source]
        radius.append(rho)
        neutral.append(bool((seen[t] & ~s).any()))
        if rho < 1 - NEUTRAL_TOL:
            z = torch.linalg.solve(FE, (y0[t] + F[t] @ start[t])[s])
            out[t] = start[t] - kernel[t][:, s] @ z
            reason.append(None)
        else:
            reason.append(
                f"the map's moving part has spectral radius {rho:.6f} >= 1: the values "
                + ("stay on a neutral direction" if abs(rho - 1) <= NEUTRAL_TOL else "diverge")
            )
    return out, LimitSpectrum(radius, neutral, reason)


def limit_spectrum(model, tasks: TaskBatch) -> tuple[Float[Tensor, "batch pos"], LimitSpectrum]:
    """``depth_limit`` with its per-task spectrum and reasons. A per-layer model runs its layers, then
    repeats its last one (as ``extrapolation.layer_at_depth`` does)."""
    from ictd_interp.models.stylised.state_space import state_space_forward

    n_layers = model.cfg.n_layers
    if model.cfg.tied or n_layers == 1:
        start = torch.zeros(len(tasks), tasks.mrp.n_states, dtype=torch.float64)
    else:
        A, w = model_weights(model)
        counts = transition_counts(tasks.states, tasks.mrp.n_states).unsqueeze(1)
        start = state_space_forward(
            A, w, tasks.features.double(), tasks.mrp.r.double(), counts, model.cfg.gamma, n_layers - 1
        )[:, 0]
    values, spectrum = limit_from(model, tasks, start, n_layers - 1)
    return torch.gather(values, 1, tasks.states), spectrum


def depth_limit(model, tasks: TaskBatch) -> Float[Tensor, "batch pos"]:
    """The values a stylised layer reaches as depth -> infinity, per task and position (float64): exact on
    the part of the map that moves when the map has the neutral eigenvalue 1, NaN on a task whose map
    diverges (``limit_spectrum`` gives the reason). TSM form, paper mask, softmax only."""
    return limit_spectrum(model, tasks)[0]
