"""Which algorithm does each layer run, and what happens when it is iterated? (function space)

**Identification.** Per layer, the observed update of the value row ``dv = v_out - v_in`` on
evaluation prompts is fitted by the TD family with free coefficients

    ``dv_j = sum_k K_beta(S_{k-1}, S_j) (a R_k + b v_in(S_k) + c v_in(S_{k-1}))``,
    ``K_beta = softmax_k(beta <x_{k-1}, x_j>)``,

linear in ``(a, b, c)`` for a fixed ``beta`` (least squares), with ``beta`` searched on a log grid and
refined by golden section. Reported: the step ``a``, the effective discount ``b / (-c)`` and the
current-value weight ``c / a``; theta* gives ``(1, gamma, -1)`` and ``beta = 1``. Nothing forces
``c = -a`` (an earlier fit did, and gave three different algorithms for three identical layers).

**Iteration.** Grouping the kernel by state (``M^_n``, ``P^_n`` of the docs), a layer in the family
maps values on states as ``v <- T v + a M^_n r`` with ``T = I + c M^_n + b P^_n``; iterating it
converges iff the spectral radius ``rho(T) < 1``, to the fixed point ``v* = -(c M^_n + b P^_n)^{-1}
a M^_n r``. theta*'s ``T = I - M^_n + gamma P^_n``.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
from einops import einsum
from torch import Tensor

from analyses.attention import state_kernels
from analyses.value_probes import residual_stack
from ictd_interp import HookedICTDTransformer
from ictd_interp.architectures import ICTDModel, is_stylised
from ictd_interp.evaluation import msve
from ictd_interp.tasks import TaskBatch
from ictd_interp.config import check_choice
from ictd_interp.td import feature_scores, same_state_kernel

IN_FAMILY_FVE = 0.95  # below this fraction of variance explained, the family does not explain the layer
BETA_RANGE = (0.02, 50.0)


def _design(kernel: Tensor, rewards: Tensor, v_in: Tensor, with_values: bool) -> Tensor:
    """Columns ``sum_k K(S_{k-1}, S_j) (R_k, v_in(S_k), v_in(S_{k-1}))``; ``kernel [batch, source k-1, target j]``."""
    columns = [einsum(rewards, kernel, "b k, b k j -> b j")]
    if with_values:
        columns += [einsum(v_in[:, 1:], kernel, "b k, b k j -> b j"), einsum(v_in[:, :-1], kernel, "b k, b k j -> b j")]
    return torch.stack([c.flatten() for c in columns], dim=1)


def _solve(kernel: Tensor, rewards, v_in, dv, with_values: bool) -> tuple[float, np.ndarray]:
    design = _design(kernel, rewards, v_in, with_values).numpy()
    coef, *_ = np.linalg.lstsq(design, dv.flatten().numpy(), rcond=None)
    return float(((design @ coef - dv.flatten().numpy()) ** 2).sum()), coef


def _golden(f, lo: float, hi: float, iters: int = 40) -> float:
    ratio = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    for _ in range(iters):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        a, b = (a, d) if f(c) < f(d) else (c, b)
    return (a + b) / 2


def identify_layer(scores: Tensor, rewards: Tensor, v_in: Tensor, dv: Tensor) -> dict:
    """The TD-family parameters of one layer's update (``b``, ``c`` None when ``v_in`` is zero)."""
    with_values = bool(v_in.abs().max() > 1e-12)  # an untied first layer sees v_in = 0: b, c unidentifiable
    kernel = lambda log_beta: torch.softmax(math.exp(log_beta) * scores, dim=1)  # noqa: E731
    loss = lambda log_beta: _solve(kernel(log_beta), rewards, v_in, dv, with_values)[0]  # noqa: E731
    grid = np.linspace(math.log(BETA_RANGE[0]), math.log(BETA_RANGE[1]), 40)
    start = grid[int(np.argmin([loss(g) for g in grid]))]
    step = grid[1] - grid[0]
    log_beta = _golden(loss, start - step, start + step)
    return {"beta": math.exp(log_beta), **_fit(kernel(log_beta), rewards, v_in, dv, with_values)}


def identify_layer_tabular(states: Tensor, rewards: Tensor, v_in: Tensor, dv: Tensor) -> dict:
    """As ``identify_layer`` with the tabular (same-state) kernel in place of the softmax family:
    tabular TD with free ``(a, b, c)``. A model whose heads attend to same-state sources is judged
    against this family too."""
    with_values = bool(v_in.abs().max() > 1e-12)
    return {"beta": None, **_fit(same_state_kernel(states), rewards, v_in, dv, with_values)}


def _fit(kernel: Tensor, rewards: Tensor, v_in: Tensor, dv: Tensor, with_values: bool) -> dict:
    residual, coef = _solve(kernel, rewards, v_in, dv, with_values)
    total = float(((dv - dv.mean()) ** 2).sum())
    fve = 1 - residual / total if total > 0 else float("nan")
    a = float(coef[0])
    b, c = (float(coef[1]), float(coef[2])) if with_values else (None, None)
    return {"step": a, "b": b, "c": c,
            "effective_discount": b / -c if with_values and c != 0 else None,
            "current_weight": c / a if with_values and a != 0 else None,
            "fve": fve, "rms_residual": math.sqrt(residual / dv.numel()), "in_family": bool(fve >= IN_FAMILY_FVE)}


@torch.no_grad()
def identify_layers(model: HookedICTDTransformer, tasks: TaskBatch) -> list[dict]:
    """Per layer, ``identify_layer`` on the model's value row before and after the layer."""
    return identify_from_values(residual_stack(model, tasks.prompt)[..., model.layout.current], tasks)


def identify_from_values(values: Tensor, tasks: TaskBatch, kernel: str = "softmax") -> list[dict]:
    """``identify_layer`` (``kernel="softmax"``) or ``identify_layer_tabular`` (``"tabular"``) for each
    consecutive pair of per-site values ``[site, batch, pos]`` (the value row of a stylised model, or a
    standard model's probed values: ``analyses.value_probes``)."""
    check_choice("kernel", kernel, ("softmax", "tabular"))
    scores, rewards = feature_scores(tasks.x.double()), tasks.rewards.double()
    fit = (lambda v, dv: identify_layer(scores, rewards, v, dv)) if kernel == "softmax" else \
        (lambda v, dv: identify_layer_tabular(tasks.states, rewards, v, dv))
    return [{"layer": layer, **fit(values[layer], values[layer + 1] - values[layer])}
            for layer in range(values.shape[0] - 1)]


@torch.no_grad()
def iteration_map(model: HookedICTDTransformer, tasks: TaskBatch, layer: int, b: float, c: float, a: float) -> dict:
    """Spectral radius of ``T = I + c M^_n + b P^_n`` per task (on visited states) and the distance
    of the fixed point from ``v_pi`` where ``rho(T) < 1``."""
    device = next(model.parameters()).device
    _, cache = model.run_with_cache(tasks.prompt.to(device), names_filter=lambda n: n.endswith("hook_pattern"))
    pattern = cache["pattern", layer][:, 0].double().cpu()
    M, P = state_kernels(pattern, tasks.states, tasks.mrp.n_states)
    radii, distances = [], []
    n_states = tasks.mrp.n_states
    for t in range(len(tasks)):
        # states seen as a source S_0..S_{n-1}: a state seen only as the query has no observed
        # transition, its value is never updated and enters the map as a fixed input
        visited = torch.zeros(n_states, dtype=torch.bool)
        visited[tasks.states[t, :-1]] = True
        m, p = M[t][visited][:, visited], P[t][visited][:, visited]
        T = torch.eye(len(m), dtype=m.dtype) + c * m + b * p
        radius = float(torch.linalg.eigvals(T).abs().max())
        radii.append(radius)
        if radius < 1:
            r = tasks.mrp.r[t][visited].double()
            fixed = torch.linalg.solve(-(c * m + b * p), a * (m @ r))
            distances.append(float((fixed - tasks.mrp.v_pi[t][visited].double()).abs().max()))
    radii_np = np.asarray(radii)
    return {"spectral_radius_mean": float(radii_np.mean()), "spectral_radius_max": float(radii_np.max()),
            "fraction_contracting": float((radii_np < 1).mean()),
            "fixed_point_error": float(np.mean(distances)) if distances else None}


def layer_at_depth(model: HookedICTDTransformer, depth: int) -> HookedICTDTransformer:
    """The trained layers run to another depth: a tied model repeats its layer; a per-layer model
    keeps its layers and repeats its last one beyond its trained depth (or stops early)."""
    cfg = type(model.cfg).from_dict({**model.cfg.to_dict(), "n_layers": depth})
    deeper = HookedICTDTransformer(cfg).to(next(model.parameters()).device)
    trained, last = model.state_dict(), model.cfg.n_layers - 1
    deeper.load_state_dict({f"blocks.{l}.attn.{name}": trained[f"blocks.{min(l, last)}.attn.{name}"]
                            for l in range(depth) for name in ("A", "V")})
    return deeper


def depth_extrapolation(model: ICTDModel, star: HookedICTDTransformer, tasks: TaskBatch,
                        factor: int = 8) -> dict:
    """MSVE at depths 1 .. ``factor`` x the trained depth, for the model's layers and theta*, and a verdict."""
    trained = model.cfg.n_layers
    depths = sorted({d for d in [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64] if d <= factor * trained} | {trained})
    errors = [msve_at_depth(model, tasks, d) for d in depths]
    star_errors = [msve(layer_at_depth(star, d), tasks) for d in depths]
    return {"trained_depth": trained, "depths": depths, "model": errors, "theta_star": star_errors,
            **extrapolation_verdict(depths, errors)}


@torch.no_grad()
def msve_at_depth(model: ICTDModel, tasks: TaskBatch, depth: int) -> float:
    """MSVE of the model's layers run to ``depth`` (``layer_at_depth``; a standard model repeats its
    last block: ``values_at_depth``)."""
    if is_stylised(model):
        return msve(layer_at_depth(model, depth), tasks)
    values = model.values_at_depth(tasks.prompt.to(next(model.parameters()).device), depth)
    return float((values.double().cpu() - tasks.v_true).pow(2).mean())


def extrapolation_verdict(depths: list[int], errors: list[float]) -> dict:
    """``converges`` when the deepest error is within 1.5x of the best; ``settles on a worse fixed
    point`` when it is not but the last two depths agree within 5% (the iteration converges, to a
    worse estimate); else ``diverges after depth k`` (k the best depth). Non-finite errors diverge."""
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
    return {"best_depth": depths[best], "converges": near_best or settled, "verdict": verdict}


def best_in_family(star: HookedICTDTransformer, tasks: TaskBatch) -> dict:
    """The (alpha, beta) softmax TD of the trained depth with the lowest MSVE: a log grid, then two
    finer grids around the best point. ``star`` is theta* at that depth (alpha scales V, beta A)."""
    base = {k: v.clone() for k, v in star.state_dict().items()}

    def error(log_alpha: float, log_beta: float) -> float:
        star.load_state_dict({k: v * (math.exp(log_beta) if k.endswith(".A") else math.exp(log_alpha))
                              for k, v in base.items()})
        value = msve(star, tasks)
        return value if math.isfinite(value) else float("inf")

    center, half = (0.0, 0.0), (math.log(8.0), math.log(8.0))
    best: Optional[tuple[float, float, float]] = None
    for _ in range(3):
        grid = [(center[0] + i * half[0] / 4, center[1] + j * half[1] / 4) for i in range(-4, 5) for j in range(-4, 5)]
        scored = [(error(*g), *g) for g in grid]
        best = min(scored + ([best] if best else []))
        center, half = (best[1], best[2]), (half[0] / 4, half[1] / 4)
    star.load_state_dict(base)
    return {"alpha": math.exp(best[1]), "beta": math.exp(best[2]), "msve": best[0]}
