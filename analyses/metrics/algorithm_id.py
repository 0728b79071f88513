"""Which algorithm does each layer run, and what happens when it is iterated?

**From the weights (stylised models, TSM form, paper mask, softmax).** A layer's update of the value
row is exactly ``dv_j = sum_k K(S_{k-1}, S_j) (a R_k + b v(S_k) + c v(S_{k-1}) + w . x_{k-1})`` with
``K = softmax_k(x_{k-1}^T A_ff x_j)``, ``a, gamma^-1 b, c`` the current row of ``V`` on (reward, target,
current) and ``w`` its feature entries (``read_layer``). The kernel's inverse temperature ``beta`` is
the projection of ``A_ff`` on the identity (any sign) and its isotropy ``cos(A_ff, I)`` says how well
one temperature describes it. Identical (tied) layers give identical answers by construction.

**From function space (any model; the only way for a standard transformer).** Per layer, the observed update of the
value row ``dv = v_out - v_in`` on
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

from ictd_interp.models.hook_names import attn_param, get_act_name

from analyses.metrics.diagonality import state_kernels
from analyses.metrics.intervals import t_interval
from analyses.metrics.site_probes import residual_stack
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.architectures import ICTDModel, is_stylised
from ictd_interp.models.state_space import state_space_unavailable
from ictd_interp.training.evaluation import msve, value_msve
from ictd_interp.tasks.sampling import TaskBatch
from ictd_interp.config.fields import check_choice
from ictd_interp.reference.metrics import cosine, identifiable_inputs
from ictd_interp.reference.td import feature_scores, same_state_kernel

IN_FAMILY_FVE = 0.95  # below this fraction of variance explained, the family does not explain the layer
BETA_RANGE = (0.02, 50.0)  # |beta|, searched on both signs
# Above this condition number of the (column-normalised) design the fitted coefficients are not
# reported. Measured on the first 64 evaluation tasks: quick-mc-s0's fits at condition 75 and 119 gave
# effective discounts -0.74 and -0.88 for one tied layer whose weights say -1.10 (a slightly anisotropic
# kernel, amplified by the conditioning); theta*'s exact layers sit at 20-37, quick-td-s0's at 11-14.
MAX_CONDITION = 50.0
N_BOOT = 200
ISOTROPIC = 0.95  # cos(A_ff, I) from which one inverse temperature describes the kernel


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
    """The TD-family parameters of one layer's update (``b``, ``c`` None when ``v_in`` is zero), with
    ``beta`` of either sign: a log grid of ``|beta|`` on both signs, then golden section on the winner's."""
    with_values = bool(v_in.abs().max() > 1e-12)  # an untied first layer sees v_in = 0: b, c unidentifiable
    kernel = lambda sign, log_beta: torch.softmax(sign * math.exp(log_beta) * scores, dim=1)  # noqa: E731
    loss = lambda sign, log_beta: _solve(kernel(sign, log_beta), rewards, v_in, dv, with_values)[0]  # noqa: E731
    grid = np.linspace(math.log(BETA_RANGE[0]), math.log(BETA_RANGE[1]), 40)
    sign, start = min(((sg, g) for sg in (1.0, -1.0) for g in grid), key=lambda p: loss(*p))
    step = grid[1] - grid[0]
    log_beta = _golden(lambda g: loss(sign, g), start - step, start + step)
    return {"beta": sign * math.exp(log_beta), **_fit(kernel(sign, log_beta), rewards, v_in, dv, with_values)}

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
    design = _design(kernel, rewards, v_in, with_values).numpy()
    cond = condition_number(design)
    return {"source": "fit", **_coefficients(coef, with_values), "fve": fve,
            "rms_residual": math.sqrt(residual / dv.numel()), "in_family": bool(fve >= IN_FAMILY_FVE),
            "condition_number": cond, "identifiable": bool(cond <= MAX_CONDITION),
            "interval": _bootstrap(design.reshape(*dv.shape, -1), dv.numpy(), with_values)}


def _coefficients(coef, with_values: bool) -> dict:
    a = float(coef[0])
    b, c = (float(coef[1]), float(coef[2])) if with_values else (None, None)
    return {"step": a, "b": b, "c": c, "effective_discount": b / -c if with_values and c != 0 else None,
            "current_weight": c / a if with_values and a != 0 else None}


def condition_number(design: np.ndarray) -> float:
    """Of the design with unit-norm columns (scale-free): how ill-posed the least squares is."""
    norms = np.linalg.norm(design, axis=0)
    return float(np.linalg.cond(design / np.where(norms > 0, norms, 1.0)))


def _bootstrap(design: np.ndarray, dv: np.ndarray, with_values: bool) -> dict:
    """95% percentile-bootstrap intervals of step, effective discount and current weight, resampling
    tasks (``N_BOOT`` resamples, seed 0) at the fitted kernel. ``design [task, pos, column]``. A resample
    is a count per task, so every resample's least squares is one solve of count-weighted per-task normal
    equations, all resamples at once (pinv: an ill-posed design still answers)."""
    n_tasks = design.shape[0]
    picks = np.random.default_rng(0).integers(0, n_tasks, (N_BOOT, n_tasks))  # tasks drawn with replacement
    counts = np.stack([np.bincount(row, minlength=n_tasks) for row in picks])
    gram = np.einsum("tpi,tpj->tij", design, design)  # [task, col, col]
    moment = np.einsum("tpi,tp->ti", design, dv)  # [task, col]
    coefs = np.einsum("rij,rj->ri", np.linalg.pinv(np.einsum("rt,tij->rij", counts, gram)),
                      np.einsum("rt,ti->ri", counts, moment))
    draws = [_coefficients(coef, with_values) for coef in coefs]
    out = {}
    for key in ("step", "effective_discount", "current_weight"):
        values = np.array([d[key] for d in draws if d[key] is not None], dtype=float)
        out[key] = [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))] if len(values) else None
    return out


@torch.no_grad()
def identify_layers(model: HookedICTDTransformer, tasks: TaskBatch) -> list[dict]:
    """Per layer, ``identify_layer`` on the model's value row before and after the layer."""
    return identify_from_values(residual_stack(model, tasks.prompt)[..., model.layout.current], tasks)


def identify_from_values(values: Tensor, tasks: TaskBatch, kernel: str = "softmax") -> list[dict]:
    """``identify_layer`` (``kernel="softmax"``) or ``identify_layer_tabular`` (``"tabular"``) for each
    consecutive pair of per-site values ``[site, batch, pos]`` (the value row of a stylised model, or a
    standard model's probed values: ``analyses.metrics.site_probes``)."""
    check_choice("kernel", kernel, ("softmax", "tabular"))
    scores, rewards = feature_scores(tasks.x.double()), tasks.rewards.double()
    fit = (lambda v, dv: identify_layer(scores, rewards, v, dv)) if kernel == "softmax" else \
        (lambda v, dv: identify_layer_tabular(tasks.states, rewards, v, dv))
    return [{"layer": layer, **fit(values[layer], values[layer + 1] - values[layer])}
            for layer in range(values.shape[0] - 1)]


@torch.no_grad()
def read_layer(model: HookedICTDTransformer, layer: int) -> dict:
    """The TD-family parameters of a stylised layer, read exactly from its weights (module docstring)."""
    cfg, lay = model.cfg, model.layout
    attn = model.blocks[layer].attn
    A = (attn.A * attn.mask_A)[0, lay.features, lay.features].double()
    row = (attn.V * attn.mask_V)[0, lay.current].double()
    identifiable = bool(identifiable_inputs(cfg, layer)[lay.current])
    coef = [float(row[lay.reward]), cfg.gamma * float(row[lay.target]), float(row[lay.current])]
    eye = torch.eye(cfg.d_features, dtype=torch.float64)
    isotropy = cosine(A, eye)
    return {"layer": layer, "source": "weights", **_coefficients(coef, identifiable),
            "beta": float(torch.trace(A)) / cfg.d_features, "kernel_isotropy": isotropy,
            "feature_drive": row[lay.features].tolist(), "in_family": bool(abs(isotropy) >= ISOTROPIC),
            "fve": None, "identifiable": True}


@torch.no_grad()
def iteration_map(model: HookedICTDTransformer, tasks: TaskBatch, layer: int, read: dict) -> dict:
    """Per task, the layer's map on the values of the context's states ``v <- T v + M^ (a r + X w)``,
    ``T = I + c M^_n + b P^_n``: its spectral radius and, where it converges, the sup distance of its limit
    from ``v_pi``. A stylised layer the state-space forward covers (TSM, paper mask, softmax) is read from its
    weights (``depth_limit``: the radius of the part that moves, the neutral eigenvalue 1 of a state never a
    source reported apart, no singular solve); any other from its pattern and ``read``'s coefficients."""
    if is_stylised(model) and state_space_unavailable(model.cfg) is None:
        return _weights_map(model, tasks, layer)
    _, cache = model.run_with_cache(tasks.prompt.to(model.device), names_filter=get_act_name("pattern", layer))
    pattern = cache["pattern", layer][:, 0].double().cpu()
    return state_map(pattern, tasks, read["step"], read["b"], read["c"], read.get("feature_drive"))


def _weights_map(model: HookedICTDTransformer, tasks: TaskBatch, layer: int) -> dict:
    from analyses.metrics.depth_limit import limit_from

    start = torch.zeros(len(tasks), tasks.mrp.n_states, dtype=torch.float64)
    values, spectrum = limit_from(model, tasks, start, layer)
    errors = (torch.gather(values, 1, tasks.states) - tasks.v_true.double()).abs().amax(1)
    per_task = [float(e) if reason is None else None for e, reason in zip(errors.tolist(), spectrum.reason)]
    distances = [e for e in per_task if e is not None]
    return {"spectral_radius": spectrum.radius, "fixed_point_errors": per_task, **spectral_verdict(spectrum.radius),
            "neutral_tasks": int(sum(spectrum.neutral)),
            "fixed_point_error": float(np.mean(distances)) if distances else None,
            "fixed_point_error_interval": t_interval(distances).to_dict() if len(distances) > 1 else None}


def state_map(pattern: Tensor, tasks: TaskBatch, a: float, b: float, c: float,
              drive: Optional[list[float]] = None) -> dict:
    """``iteration_map`` from a pattern ``[batch, query_pos, key_pos]``. The map acts on the states the
    context holds (any position ``S_0..S_n``): a state seen only as the query is still updated, and its
    value feeds the last transition's target."""
    M, P = state_kernels(pattern, tasks.states, tasks.mrp.n_states)
    radii, distances, per_task = [], [], []
    for t in range(len(tasks)):
        seen = torch.zeros(tasks.mrp.n_states, dtype=torch.bool)
        seen[tasks.states[t]] = True
        m, p = M[t][seen][:, seen], P[t][seen][:, seen]
        T = torch.eye(len(m), dtype=m.dtype) + c * m + b * p
        radius = float(torch.linalg.eigvals(T).abs().max())
        radii.append(radius)
        if radius < 1:
            drive_t = a * tasks.mrp.r[t][seen].double()
            if drive is not None:
                drive_t = drive_t + tasks.features[t][seen].double() @ torch.tensor(drive, dtype=torch.float64)
            fixed = torch.linalg.solve(-(c * m + b * p), m @ drive_t)
            distances.append(float((fixed - tasks.mrp.v_pi[t][seen].double()).abs().max()))
        per_task.append(distances[-1] if radius < 1 else None)
    return {"spectral_radius": radii, "fixed_point_errors": per_task, **spectral_verdict(radii),
            "fixed_point_error": float(np.mean(distances)) if distances else None,
            "fixed_point_error_interval": t_interval(distances).to_dict() if len(distances) > 1 else None}


def spectral_verdict(radii: list[float]) -> dict:
    """Rule: the layer ``converges when iterated`` iff ``rho(T) < 1`` on every task, ``diverges when
    iterated`` iff ``rho(T) > 1`` on every task; otherwise it converges on the stated fraction of tasks."""
    r = np.asarray(radii, dtype=float)
    fraction = float((r < 1).mean())
    if fraction == 1.0:
        verdict = "converges when iterated"
    elif (r > 1).all():
        verdict = "diverges when iterated"
    else:
        verdict = f"converges when iterated on {fraction:.0%} of tasks only"
    return {"spectral_radius_mean": float(r.mean()), "spectral_radius_min": float(r.min()),
            "spectral_radius_max": float(r.max()), "fraction_contracting": fraction,
            "converges": fraction == 1.0, "verdict": verdict}


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
    deeper = HookedICTDTransformer(cfg).to(model.device)
    trained, last = model.state_dict(), model.cfg.n_layers - 1
    deeper.load_state_dict({attn_param(l, name): trained[attn_param(min(l, last), name)]
                            for l in range(depth) for name in ("A", "V")})
    return deeper


def depth_extrapolation(model: ICTDModel, star: ICTDModel, tasks: TaskBatch,
                        depths: Optional[list[int]] = None, factor: int = 8, reference_name: str = "theta*") -> dict:
    """MSVE of the model's layers and of a construction (``reference``, named ``reference_name``: theta*, or a
    linear model's TD(0) construction) run to each depth (default: 1 .. ``factor`` x the trained depth),
    with the verdict the error curve gives (``extrapolation_verdict``)."""
    trained = model.cfg.n_layers
    depths = depths or depths_up_to(factor * trained, trained)
    errors = msve_at_depths(model, tasks, depths)
    return {"trained_depth": trained, "depths": depths, "model": errors,
            "reference": msve_at_depths(star, tasks, depths), "reference_name": reference_name,
            **extrapolation_verdict(depths, errors)}


@torch.no_grad()
def msve_at_depths(model: ICTDModel, tasks: TaskBatch, depths: list[int]) -> list[float]:
    """MSVE after each of ``depths`` layers; a stylised model in one forward pass of the deepest
    (``layer_at_depth``), caching only the value rows it needs."""
    if not is_stylised(model):
        return [msve_at_depth(model, tasks, d) for d in depths]
    deeper = layer_at_depth(model, max(depths))
    wanted = {get_act_name("resid_post", d - 1) for d in depths}
    _, cache = deeper.run_with_cache(tasks.prompt.to(deeper.device), names_filter=lambda name: name in wanted)
    current = deeper.layout.current
    return [value_msve(cache["resid_post", d - 1][..., current], tasks) for d in depths]


@torch.no_grad()
def msve_at_depth(model: ICTDModel, tasks: TaskBatch, depth: int) -> float:
    """MSVE of the model's layers run to ``depth`` (``layer_at_depth``; a standard model repeats its
    last block: ``values_at_depth``)."""
    if is_stylised(model):
        return msve(layer_at_depth(model, depth), tasks)
    values = model.values_at_depth(tasks.prompt.to(model.device), depth)
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
