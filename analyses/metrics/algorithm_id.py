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
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np
import torch
from einops import einsum
from torch import Tensor

from ictd_interp.analyses.metrics.depth_limit import NEUTRAL_TOL
from ictd_interp.analyses.metrics.diagonality import state_kernels
from ictd_interp.analyses.metrics.intervals import Interval, t_interval
from ictd_interp.analyses.metrics.site_probes import residual_stack
from ictd_interp.config.fields import check_choice
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.hook_names import get_act_name
from ictd_interp.models.registry import holds_theta_star
from ictd_interp.models.stylised.state_space import state_space_unavailable
from ictd_interp.models.stylised.theta_star import TDCoefficients
from ictd_interp.reference.metrics import cosine, identifiable_inputs
from ictd_interp.reference.td import feature_scores, same_state_kernel
from ictd_interp.tasks.sampling import TaskBatch
from ictd_interp.training.evaluation import DETAIL

IN_FAMILY_FVE = 0.95  # below this fraction of variance explained, the family does not explain the layer
BETA_RANGE = (0.02, 50.0)  # |beta|, searched on both signs
# Above this condition number of the (column-normalised) design the fitted coefficients are not
# reported. Measured on the first 64 evaluation tasks: depth3-mc-s0's fits at condition 75 and 119 gave
# effective discounts -0.74 and -0.88 for one tied layer whose weights say -1.10 (a slightly anisotropic
# kernel, amplified by the conditioning); theta*'s exact layers sit at 20-37, depth3-td-s0's at 11-14.
MAX_CONDITION = 50.0
N_BOOT = 200
ISOTROPIC = 0.95  # cos(A_ff, I) from which one inverse temperature describes the kernel


@dataclass(kw_only=True)  # fields in summary.json's order
class Spectrum:
    """``spectral_verdict``: the spectral radius of a layer's map over tasks, and the verdict its rule gives."""

    spectral_radius_mean: float
    spectral_radius_min: float
    spectral_radius_max: float
    fraction_contracting: float
    converges: bool
    verdict: str


@dataclass(kw_only=True)
class IterationMap(Spectrum):
    """``iteration_map``: the spectrum of a layer's map on state values, and the sup distance of its fixed point
    from ``v_pi`` (mean over the tasks whose map contracts, with its t interval; None where none does)."""

    fixed_point_error: Optional[float]
    fixed_point_error_interval: Optional[Interval]
    spectral_radius: Optional[list[float]] = field(default=None, metadata=DETAIL)  # per task
    fixed_point_errors: Optional[list[Optional[float]]] = field(default=None, metadata=DETAIL)  # per task
    neutral_tasks: Optional[int] = None  # tasks whose map has the eigenvalue 1 of a state never a source


@dataclass(kw_only=True)
class CoefficientIntervals:
    """95% percentile-bootstrap intervals ``[lo, hi]`` over tasks (None: no resample identified it)."""

    step: Optional[list[float]]
    effective_discount: Optional[list[float]]
    current_weight: Optional[list[float]]


@dataclass(kw_only=True)
class LayerReading:
    """One layer as a member of the TD family ``dv = a K (R + b/a v' + c/a v)``: read from its weights
    (``source="weights"``: ``read_layer``) or fitted in function space (``"fit"``: ``identify_layer``). ``b``,
    ``c`` and the ratios are None where the layer's input values are zero (not identifiable)."""

    layer: int
    source: str
    step: float
    b: Optional[float]
    c: Optional[float]
    effective_discount: Optional[float]
    current_weight: Optional[float]
    beta: Optional[float]  # None: the same-state (tabular) kernel
    fve: Optional[float]  # fraction of the update's variance explained (fits only)
    in_family: bool
    identifiable: bool
    kernel_isotropy: Optional[float] = None  # weights: cos(A_ff, I)
    feature_drive: Optional[list[float]] = None  # weights: the current row's feature entries
    rms_residual: Optional[float] = None  # fits
    condition_number: Optional[float] = None  # fits: of the column-normalised design
    interval: Optional[CoefficientIntervals] = None  # fits
    iteration: Optional[IterationMap] = None  # its map iterated (attached by the report)

    @property
    def coefficients(self) -> TDCoefficients:
        return TDCoefficients(self.step, self.b, self.c)


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


def identify_layer(scores: Tensor, rewards: Tensor, v_in: Tensor, dv: Tensor, layer: int = 0) -> LayerReading:
    """The TD-family parameters of one layer's update (``b``, ``c`` None when ``v_in`` is zero), with
    ``beta`` of either sign: a log grid of ``|beta|`` on both signs, then golden section on the winner's."""
    with_values = bool(v_in.abs().max() > 1e-12)  # an untied first layer sees v_in = 0: b, c unidentifiable
    kernel = lambda sign, log_beta: torch.softmax(sign * math.exp(log_beta) * scores, dim=1)  # noqa: E731
    loss = lambda sign, log_beta: _solve(kernel(sign, log_beta), rewards, v_in, dv, with_values)[0]  # noqa: E731
    grid = np.linspace(math.log(BETA_RANGE[0]), math.log(BETA_RANGE[1]), 40)
    sign, start = min(((sg, g) for sg in (1.0, -1.0) for g in grid), key=lambda p: loss(*p))
    step = grid[1] - grid[0]
    log_beta = _golden(lambda g: loss(sign, g), start - step, start + step)
    return _fit(kernel(sign, log_beta), rewards, v_in, dv, with_values, layer, beta=sign * math.exp(log_beta))


def identify_layer_tabular(states: Tensor, rewards: Tensor, v_in: Tensor, dv: Tensor, layer: int = 0) -> LayerReading:
    """As ``identify_layer`` with the tabular (same-state) kernel in place of the softmax family:
    tabular TD with free ``(a, b, c)``. A model whose heads attend to same-state sources is judged
    against this family too."""
    with_values = bool(v_in.abs().max() > 1e-12)
    return _fit(same_state_kernel(states), rewards, v_in, dv, with_values, layer, beta=None)


def _fit(
    kernel: Tensor, rewards: Tensor, v_in: Tensor, dv: Tensor, with_values: bool, layer: int, beta: Optional[float]
) -> LayerReading:
    residual, coef = _solve(kernel, rewards, v_in, dv, with_values)
    total = float(((dv - dv.mean()) ** 2).sum())
    fve = 1 - residual / total if total > 0 else float("nan")
    design = _design(kernel, rewards, v_in, with_values).numpy()
    cond = condition_number(design)
    return LayerReading(
        layer=layer,
        source="fit",
        **_coefficients(coef, with_values),
        beta=beta,
        fve=fve,
        rms_residual=math.sqrt(residual / dv.numel()),
        in_family=bool(fve >= IN_FAMILY_FVE),
        condition_number=cond,
        identifiable=bool(cond <= MAX_CONDITION),
        interval=_bootstrap(design.reshape(*dv.shape, -1), dv.numpy(), with_values),
    )


def _coefficients(coef, with_values: bool) -> dict[str, Optional[float]]:
    """``LayerReading``'s coefficient fields from ``(a, b, c)``."""
    a = float(coef[0])
    b, c = (float(coef[1]), float(coef[2])) if with_values else (None, None)
    return {
        "step": a,
        "b": b,
        "c": c,
        "effective_discount": b / -c if with_values and c != 0 else None,
        "current_weight": c / a if with_values and a != 0 else None,
    }


def condition_number(design: np.ndarray) -> float:
    """Of the design with unit-norm columns (scale-free): how ill-posed the least squares is."""
    norms = np.linalg.norm(design, axis=0)
    return float(np.linalg.cond(design / np.where(norms > 0, norms, 1.0)))


def _bootstrap(design: np.ndarray, dv: np.ndarray, with_values: bool) -> CoefficientIntervals:
    """95% percentile-bootstrap intervals of step, effective discount and current weight, resampling
    tasks (``N_BOOT`` resamples, seed 0) at the fitted kernel. ``design [task, pos, column]``. A resample
    is a count per task, so every resample's least squares is one solve of count-weighted per-task normal
    equations, all resamples at once (pinv: an ill-posed design still answers)."""
    n_tasks = design.shape[0]
    picks = np.random.default_rng(0).integers(0, n_tasks, (N_BOOT, n_tasks))  # tasks drawn with replacement
    counts = np.stack([np.bincount(row, minlength=n_tasks) for row in picks])
    gram = np.einsum("tpi,tpj->tij", design, design)  # [task, col, col]
    moment = np.einsum("tpi,tp->ti", design, dv)  # [task, col]
    coefs = np.einsum(
        "rij,rj->ri", np.linalg.pinv(np.einsum("rt,tij->rij", counts, gram)), np.einsum("rt,ti->ri", counts, moment)
    )
    draws = [_coefficients(coef, with_values) for coef in coefs]
    out = {}
    for key in ("step", "effective_discount", "current_weight"):
        values = np.array([d[key] for d in draws if d[key] is not None], dtype=float)
        out[key] = [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))] if len(values) else None
    return CoefficientIntervals(**out)


@torch.no_grad()
def identify_layers(model: HookedICTDTransformer, tasks: TaskBatch) -> list[LayerReading]:
    """Per layer, ``identify_layer`` on the model's value row before and after the layer."""
    return identify_from_values(residual_stack(model, tasks.prompt)[..., model.layout.current], tasks)


def identify_from_values(values: Tensor, tasks: TaskBatch, kernel: str = "softmax") -> list[LayerReading]:
    """``identify_layer`` (``kernel="softmax"``) or ``identify_layer_tabular`` (``"tabular"``) for each
    consecutive pair of per-site values ``[site, batch, pos]`` (the value row of a stylised model, or a
    standard model's probed values: ``ictd_interp.analyses.metrics.site_probes``)."""
    check_choice("kernel", kernel, ("softmax", "tabular"))
    scores, rewards = feature_scores(tasks.x.double()), tasks.rewards.double()
    fit = (
        (lambda v, dv, l: identify_layer(scores, rewards, v, dv, l))
        if kernel == "softmax"
        else (lambda v, dv, l: identify_layer_tabular(tasks.states, rewards, v, dv, l))
    )
    return [fit(values[layer], values[layer + 1] - values[layer], layer) for layer in range(values.shape[0] - 1)]


@torch.no_grad()
def read_layer(model: HookedICTDTransformer, layer: int) -> LayerReading:
    """The TD-family parameters of a stylised layer, read exactly from its weights (module docstring)."""
    cfg, lay = model.cfg, model.layout
    attn = model.blocks[layer].attn
    A = (attn.A * attn.mask_A)[0, lay.features, lay.features].double()
    row = (attn.V * attn.mask_V)[0, lay.current].double()
    identifiable = bool(identifiable_inputs(cfg, layer)[lay.current])
    coef = [float(row[lay.reward]), cfg.gamma * float(row[lay.target]), float(row[lay.current])]
    eye = torch.eye(cfg.d_features, dtype=torch.float64)
    isotropy = cosine(A, eye)
    return LayerReading(
        layer=layer,
        source="weights",
        **_coefficients(coef, identifiable),
        beta=float(torch.trace(A)) / cfg.d_features,
        kernel_isotropy=isotropy,
        feature_drive=row[lay.features].tolist(),
        in_family=bool(abs(isotropy) >= ISOTROPIC),
        fve=None,
        identifiable=True,
    )


@torch.no_grad()
def iteration_map(
    model: HookedICTDTransformer,
    tasks: TaskBatch,
    layer: int,
    coefficients: TDCoefficients,
    drive: Optional[list[float]] = None,
) -> IterationMap:
    """Per task, the layer's map on the values of the context's states ``v <- T v + M^ (a r + X w)``,
    ``T = I + c M^_n + b P^_n``: its spectral radius and, where it converges, the sup distance of its limit
    from ``v_pi``. A stylised layer the state-space forward covers (TSM, paper mask, softmax) is read from its
    weights (``depth_limit``: the radius of the part that moves, the neutral eigenvalue 1 of a state never a
    source reported apart, no singular solve); any other from its pattern and the given ``coefficients`` (and
    feature ``drive``, read from a stylised layer's weights)."""
    if holds_theta_star(model) and state_space_unavailable(model.cfg) is None:
        return _weights_map(model, tasks, layer)
    _, cache = model.run_with_cache(tasks.prompt.to(model.device), names_filter=get_act_name("pattern", layer))
    pattern = cache["pattern", layer][:, 0].double().cpu()
    return state_map(pattern, tasks, *coefficients, drive)


def _weights_map(model: HookedICTDTransformer, tasks: TaskBatch, layer: int) -> IterationMap:
    from ictd_interp.analyses.metrics.depth_limit import limit_from

    start = torch.zeros(len(tasks), tasks.mrp.n_states, dtype=torch.float64)
    values, spectrum = limit_from(model, tasks, start, layer)
    errors = (torch.gather(values, 1, tasks.states) - tasks.v_true.double()).abs().amax(1)
    per_task = [float(e) if reason is None else None for e, reason in zip(errors.tolist(), spectrum.reason)]
    return replace(_map(spectrum.radius, per_task), neutral_tasks=int(sum(spectrum.neutral)))


def state_map(
    pattern: Tensor, tasks: TaskBatch, a: float, b: float, c: float, drive: Optional[list[float]] = None
) -> IterationMap:
    """``iteration_map`` from a pattern ``[batch, query_pos, key_pos]``. The map acts on the states the
    context holds (any position ``S_0..S_n``): a state seen only as the query is still updated, and its
    value feeds the last transition's target. Its radius is taken on the part that moves (``moving_map``), so
    the neutral eigenvalue 1 such a state adds under a pattern that depends on states alone (docs/theory.md §8a)
    neither hides a contraction nor makes the fixed-point solve singular; those tasks are counted apart
    (``iterated_limit``)."""
    M, P = state_kernels(pattern, tasks.states, tasks.mrp.n_states)
    radii, per_task, neutral = [], [], 0
    for t in range(len(tasks)):
        seen = torch.zeros(tasks.mrp.n_states, dtype=torch.bool)
        seen[tasks.states[t]] = True
        m, p = M[t][seen][:, seen], P[t][seen][:, seen]
        drive_t = a * tasks.mrp.r[t][seen].double()
        if drive is not None:
            drive_t = drive_t + tasks.features[t][seen].double() @ torch.tensor(drive, dtype=torch.float64)
        radius, fixed, is_neutral = iterated_limit(torch.eye(len(m), dtype=m.dtype) + c * m + b * p, m @ drive_t)
        radii.append(radius)
        neutral += is_neutral
        fixed_error = None if fixed is None else float((fixed - tasks.mrp.v_pi[t][seen].double()).abs().max())
        per_task.append(fixed_error)
    return replace(_map(radii, per_task), neutral_tasks=neutral)


def iterated_limit(T: Tensor, step: Tensor) -> tuple[float, Optional[Tensor], bool]:
    """``v <- T v + step`` iterated from 0: the spectral radius of ``T`` on the part that moves (``moving_map``),
    the limit where that radius is below 1 (None otherwise), and whether ``T`` has the neutral eigenvalue 1 off
    that part. A ``step`` with a component off it adds the same vector at every layer: the values drift, so the
    radius counts as 1 at least; ``T = I`` moves nothing, radius 1."""
    basis, moving = moving_map(T)
    inside = basis.T @ step
    stays = bool((basis @ inside - step).abs().max() <= 1e-9 * max(1.0, float(step.abs().max())))
    radius = float(torch.linalg.eigvals(moving).abs().max()) if len(moving) else 1.0
    radius = radius if stays else max(radius, 1.0)
    fixed = None
    if radius < 1 - NEUTRAL_TOL:  # as the weights path (depth_limit): a rounded 1 is no contraction
        fixed = basis @ torch.linalg.solve(torch.eye(len(moving), dtype=T.dtype) - moving, inside)
    return radius, fixed, basis.shape[1] < len(T)


def moving_map(T: Tensor, rtol: float = 1e-10) -> tuple[Tensor, Tensor]:
    """An orthonormal basis ``Q`` of ``range(T - I)`` and ``T`` restricted to it, ``Q^T T Q``. Every iterate of
    ``v <- T v + m`` from 0 stays there when ``m`` does (``T`` maps it into itself); ``T``'s eigenvalues off it
    are exactly 1 (directions the map never moves). Rank by singular values above ``rtol`` times the largest."""
    U, S, _ = torch.linalg.svd(T - torch.eye(len(T), dtype=T.dtype))
    rank = int((S > rtol * S[0]).sum()) if len(S) and S[0] > 0 else 0
    Q = U[:, :rank]
    return Q, Q.T @ T @ Q


def _map(radii: list[float], per_task: list[Optional[float]]) -> IterationMap:
    distances = [e for e in per_task if e is not None]
    return IterationMap(
        **vars(spectral_verdict(radii)),
        spectral_radius=radii,
        fixed_point_errors=per_task,
        fixed_point_error=float(np.mean(distances)) if distances else None,
        fixed_point_error_interval=t_interval(distances) if len(distances) > 1 else None,
    )


def spectral_verdict(radii: list[float]) -> Spectrum:
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
    return Spectrum(
        spectral_radius_mean=float(r.mean()),
        spectral_radius_min=float(r.min()),
        spectral_radius_max=float(r.max()),
        fraction_contracting=fraction,
        converges=fraction == 1.0,
        verdict=verdict,
    )
