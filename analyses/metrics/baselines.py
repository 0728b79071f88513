"""In-context estimators with no training, computed from the same context as the model (docs/theory.md §7).

Each returns a value estimate at every context position ``S_0..S_n`` (``[batch, pos]``, like the
model's value row), from the context alone (features, states seen, rewards ``R_1..R_n``, the task's
``gamma``), never from ``P`` or ``v_pi``:

* ``constant``: ``mean(R) / (1 - gamma)`` everywhere: the value level of the task, no attention at all.
* ``tabular_mc``: every-visit Monte-Carlo: per state visited as a source, the mean over its visits ``t < n`` of
  the discounted return of the rest of the context ``G_t = sum_{k >= t} gamma^{k-t} R_{k+1}``; ``constant``
  elsewhere.
* ``first_visit_mc``: first-visit Monte-Carlo: per state visited as a source, ``G_t`` of its first visit
  (the longest return the context holds for it); ``constant`` elsewhere.
* ``tabular_td``: the fixed point of TD on the context's empirical MRP (certainty equivalence):
  ``v(s) = mean over visits t of s of (R_{t+1} + gamma v(S_{t+1}))`` on states visited as sources,
  ``constant`` on a state seen only as the query.
* ``lstd``: linear LSTD(0) on the features, ``w = (sum_k x_{k-1} (x_{k-1} - gamma x_k)^T)^+ sum_k x_{k-1} R_k``.
* ``lstd_bias``: ``lstd`` on the features with a constant feature 1 appended (a value level of its own).
* ``best_softmax_td``: softmax TD of the model's depth with the step ``alpha`` and inverse temperature
  ``beta`` that minimise the MSVE on these tasks (an oracle choice of two numbers: a lower bound for
  the family).

``compare`` sets a model beside all of them on the same tasks: MSVE per task split into its level part
(squared mean error over the positions) and its shape part (the rest), a t interval over tasks, and a
paired interval of each difference (``ictd_interp.analyses.metrics.intervals.paired``). ``first_level`` is the rule
read on those differences: a model *learns in context* when it lies below both ``REQUIRED`` estimators (the
constant and first-visit Monte Carlo), and the one home of that rule (``in_context``, ``stability`` and the checkpoint
track read it here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
from einops import einsum
from jaxtyping import Float
from torch import Tensor

from ictd_interp.analyses.metrics.intervals import Interval, Paired, paired, t_interval
from ictd_interp.models.stylised.state_space import state_values_on_tasks
from ictd_interp.reference.td import same_state_kernel
from ictd_interp.tasks.sampling import TaskBatch

NAMES = ("constant", "tabular_mc", "first_visit_mc", "tabular_td", "lstd", "lstd_bias", "best_softmax_td")
MODEL_ROW = "model"  # the trained model's row of ``compare``'s table, beside the estimators' rows
LABELS = {
    "constant": "constant mean(R)/(1−γ)",
    "tabular_mc": "every-visit tabular Monte-Carlo",
    "first_visit_mc": "first-visit tabular Monte-Carlo",
    "tabular_td": "tabular TD fixed point",
    "lstd": "linear LSTD on the features",
    "lstd_bias": "linear LSTD on the features and a bias",
    "theta_star_limit": "θ*'s depth limit",
    "best_softmax_td": "best softmax TD of the same depth",
    "theta_star": "θ* at the same depth",
    "td0_construction": "TD(0) construction of the same depth (linear, C = I)",
    "identified_member": "the family member its weights identify",
}


def constant(tasks: TaskBatch, gamma: float) -> Float[Tensor, "batch pos"]:
    level = tasks.rewards.double().mean(-1, keepdim=True) / (1 - gamma)
    return level.expand(-1, tasks.states.shape[1]).clone()


def _by_own_state(per_source: Tensor, tasks: TaskBatch, gamma: float) -> Tensor:
    """Mean of ``per_source [batch, t < n]`` over the sources in each position's own state; a position
    whose state is never a source gets ``constant``."""
    same = (tasks.states[:, :-1, None] == tasks.states[:, None, :]).double()  # [batch, source t, target j]
    counts = same.sum(1)
    means = einsum(per_source, same, "b t, b t j -> b j") / counts.clamp_min(1)
    return torch.where(counts > 0, means, constant(tasks, gamma))


def _returns(tasks: TaskBatch, gamma: float) -> Tensor:
    """``G_t = sum_{k >= t} gamma^{k-t} R_{k+1}`` for every source ``t < n`` (the rest of the context)."""
    rewards = tasks.rewards.double()  # R_{k+1} at column k
    k = torch.arange(rewards.shape[1], dtype=torch.float64)
    lag = k[:, None] - k[None, :]  # [k, t]
    discount = torch.where(lag >= 0, gamma ** lag.clamp_min(0), torch.zeros_like(lag))
    return einsum(rewards, discount, "b k, k t -> b t")


def tabular_mc(tasks: TaskBatch, gamma: float) -> Float[Tensor, "batch pos"]:
    return _by_own_state(_returns(tasks, gamma), tasks, gamma)


def first_visit_mc(tasks: TaskBatch, gamma: float) -> Float[Tensor, "batch pos"]:
    """``G_t`` at the first source visit of each position's state (``constant`` where it is never a source)."""
    src = tasks.states[:, :-1]
    same = src[:, :, None] == tasks.states[:, None, :]  # [batch, source t, target j]
    first = same.double().argmax(1)  # index of the first matching source (0 where none: masked below)
    values = torch.gather(_returns(tasks, gamma), 1, first)
    return torch.where(same.any(1), values, constant(tasks, gamma))


def td_fixed_point(tasks: TaskBatch, gamma: float) -> Float[Tensor, "batch pos"]:
    """Solved on positions: ``v_j = sum_t K[t, j] (R_{t+1} + gamma v_{t+1})`` with ``K`` the same-state
    kernel (positions in one state get one equation, so one value); ``v_j = constant`` where no source
    shares ``S_j``. ``I - gamma K^T shift`` is strictly diagonally dominant (row sums ``gamma < 1``), so
    the system always has one solution."""
    b, n1 = tasks.states.shape
    kernel = same_state_kernel(tasks.states)  # [batch, source t, target j]
    visited = (tasks.states[:, :-1, None] == tasks.states[:, None, :]).any(1)  # [batch, j]
    shift = torch.zeros(n1 - 1, n1, dtype=torch.float64)
    shift[torch.arange(n1 - 1), torch.arange(1, n1)] = 1.0  # source t -> position t + 1
    system = torch.eye(n1, dtype=torch.float64) - gamma * einsum(kernel, shift, "b t j, t i -> b j i")
    rhs = einsum(kernel, tasks.rewards.double(), "b t j, b t -> b j")
    system = torch.where(visited[..., None], system, torch.eye(n1, dtype=torch.float64).expand(b, -1, -1))
    rhs = torch.where(visited, rhs, constant(tasks, gamma))
    return torch.linalg.solve(system, rhs.unsqueeze(-1)).squeeze(-1)


def td_fixed_point_states(tasks: TaskBatch, gamma: float) -> Float[Tensor, "batch pos"]:
    """``td_fixed_point`` solved on the ``s`` states instead of the ``n + 1`` positions (the same equations: one
    value per state), so it costs ``s^3`` per task at any context length: ``v(s) - gamma sum_s' N[s, s'] v(s') /
    c(s) = r(s)`` on the source states, the constant elsewhere."""
    from ictd_interp.models.stylised.state_space import transition_counts

    N = transition_counts(tasks.states, tasks.mrp.n_states)  # [batch, state, next]
    c = N.sum(-1)
    source = c > 0
    eye = torch.eye(N.shape[-1], dtype=torch.float64).expand_as(N)
    system = torch.where(source[..., None], eye - gamma * N / c.clamp_min(1)[..., None], eye)
    level = constant(tasks, gamma)[:, :1]
    rhs = torch.where(source, tasks.mrp.r.double(), level)
    values = torch.linalg.solve(system, rhs.unsqueeze(-1)).squeeze(-1)
    return torch.gather(values, 1, tasks.states)


def lstd(tasks: TaskBatch, gamma: float) -> Float[Tensor, "batch pos"]:
    return _lstd(tasks.x.double(), tasks, gamma)


def lstd_bias(tasks: TaskBatch, gamma: float) -> Float[Tensor, "batch pos"]:
    x = tasks.x.double()
    return _lstd(torch.cat([x, torch.ones_like(x[..., :1])], dim=-1), tasks, gamma)


def _lstd(x: Float[Tensor, "batch pos feature"], tasks: TaskBatch, gamma: float) -> Float[Tensor, "batch pos"]:
    src, nxt = x[:, :-1], x[:, 1:]
    A = einsum(src, src - gamma * nxt, "b k d, b k e -> b d e")
    rhs = einsum(src, tasks.rewards.double(), "b k d, b k -> b d")
    w = (torch.linalg.pinv(A) @ rhs.unsqueeze(-1)).squeeze(-1)  # pinv: a singular A (repeated features) still answers
    return einsum(x, w, "b j d, b d -> b j")


def softmax_td_values(tasks: TaskBatch, gamma: float, depth: int, alpha: float, beta: float) -> Tensor:
    """Softmax TD with step ``alpha`` and kernel ``softmax(beta <x, x'>)`` after ``depth`` steps, computed on the
    context's transition counts: a layer of the state-space forward with ``A_ff = beta I`` and the update ``alpha
    (r + gamma v(S') - v(S))`` (``models/stylised/state_space.py``), ``s^2`` work per task and step whatever ``n``;
    the positional iteration ``reference.td.softmax_td`` on features scaled by ``sqrt(beta)`` to 1e-12 (tested)."""
    d = tasks.features.shape[-1]
    A_ff = (beta * torch.eye(d, dtype=torch.float64)).view(1, 1, d, d)
    w = torch.zeros(1, 1, d + 3, dtype=torch.float64)
    w[..., d], w[..., d + 1], w[..., d + 2] = alpha, alpha, -alpha  # on (reward, gamma v(S'), v(S))
    return torch.gather(state_values_on_tasks(A_ff, w, tasks, gamma, depth), 1, tasks.states.cpu())


def best_softmax_td(tasks: TaskBatch, gamma: float, depth: int) -> dict[str, Any]:
    """The (alpha, beta) of depth-``depth`` softmax TD with the lowest MSVE on ``tasks``: a log grid over
    [1/8, 8]^2, then two finer grids around the best point. Pure: no model is touched."""
    truth = tasks.v_true

    def error(log_alpha: float, log_beta: float) -> float:
        values = softmax_td_values(tasks, gamma, depth, math.exp(log_alpha), math.exp(log_beta))
        value = float((values - truth).pow(2).mean())
        return value if math.isfinite(value) else float("inf")

    center, half, best = (0.0, 0.0), (math.log(8.0), math.log(8.0)), None
    for _ in range(3):
        grid = [(center[0] + i * half[0] / 4, center[1] + j * half[1] / 4) for i in range(-4, 5) for j in range(-4, 5)]
        best = min([(error(*g), *g) for g in grid] + ([best] if best else []))
        center, half = (best[1], best[2]), (half[0] / 4, half[1] / 4)
    return {"alpha": math.exp(best[1]), "beta": math.exp(best[2]), "msve": best[0]}


@dataclass(frozen=True)
class BestSoftmaxTD:
    """The step ``alpha`` and kernel sharpness ``beta`` of the best softmax TD, chosen on the tasks."""

    alpha: float
    beta: float


@dataclass(frozen=True)
class Estimate:
    """One estimator's error on the evaluation tasks: MSVE = level + shape, each with its t interval, and
    (for a baseline) the paired difference of the model's per-task MSVE from this estimator's."""

    msve: Interval
    level: Interval
    shape: Interval
    model_minus_baseline: Optional[Paired] = None


@dataclass(frozen=True)
class Baselines:
    n_tasks: int
    depth: int
    estimators: dict[str, Estimate]
    best_softmax_td: BestSoftmaxTD
    sentence: str


def estimates(tasks: TaskBatch, gamma: float, depth: int) -> tuple[dict[str, Tensor], BestSoftmaxTD]:
    """Every baseline's values on ``tasks``, and the (alpha, beta) chosen for ``best_softmax_td``."""
    best = best_softmax_td(tasks, gamma, depth)
    values = {
        "constant": constant(tasks, gamma),
        "tabular_mc": tabular_mc(tasks, gamma),
        "first_visit_mc": first_visit_mc(tasks, gamma),
        "tabular_td": td_fixed_point(tasks, gamma),
        "lstd": lstd(tasks, gamma),
        "lstd_bias": lstd_bias(tasks, gamma),
        "best_softmax_td": softmax_td_values(tasks, gamma, depth, best["alpha"], best["beta"]),
    }
    return values, BestSoftmaxTD(best["alpha"], best["beta"])


def error_parts(values: Tensor, tasks: TaskBatch) -> dict[str, np.ndarray]:
    """Per task: MSVE over the positions, and its split ``msve = level + shape`` with ``level`` the
    squared mean error (a wrong value level) and ``shape`` the variance of the error over positions."""
    err = values.double().cpu() - tasks.v_true
    level = err.mean(-1).pow(2)
    msve = err.pow(2).mean(-1)
    return {"msve": msve.numpy(), "level": level.numpy(), "shape": (msve - level).numpy()}


def compare(
    model_values: Tensor, tasks: TaskBatch, gamma: float, depth: int, extra: Optional[dict[str, Tensor]] = None
) -> Baselines:
    """The model beside every baseline (and the ``extra`` estimators, e.g. theta*) on the same tasks."""
    base, chosen = estimates(tasks, gamma, depth)
    model = error_parts(model_values, tasks)
    rows = {MODEL_ROW: _row(model)}
    for name, values in {**base, **(extra or {})}.items():
        parts = error_parts(values, tasks)
        rows[name] = _row(parts, paired(model["msve"], parts["msve"]))
    return Baselines(
        n_tasks=len(tasks), depth=depth, estimators=rows, best_softmax_td=chosen, sentence=sentence(rows, len(tasks))
    )


def _row(parts: dict[str, np.ndarray], versus: Optional[Paired] = None) -> Estimate:
    return Estimate(t_interval(parts["msve"]), t_interval(parts["level"]), t_interval(parts["shape"]), versus)


def sentence(rows: dict[str, Estimate], n_tasks: int) -> str:
    """Which baselines the model beats, loses to, and which differences the sample cannot decide."""
    groups: dict[str, list[str]] = {"lower": [], "higher": [], "undecided": []}
    for name, row in rows.items():
        if name != MODEL_ROW:
            groups[row.model_minus_baseline.verdict].append(LABELS.get(name, name))
    parts = []
    if groups["lower"]:
        parts.append("beats " + ", ".join(groups["lower"]))
    if groups["higher"]:
        parts.append("is worse than " + ", ".join(groups["higher"]))
    if groups["undecided"]:
        parts.append("cannot be told apart from " + ", ".join(groups["undecided"]))
    return (
        f"On these {n_tasks} tasks the model " + "; ".join(parts) + " (paired 95% t interval of the per-task "
        "MSVE difference: it decides only when it excludes 0)."
    )


REQUIRED = ("constant", "first_visit_mc")  # the first level's rule: beat both significantly


def first_level(minus: dict[str, Paired]) -> Optional[bool]:
    """The first level's rule on the model's paired differences against ``REQUIRED`` (more keys are ignored):
    True when both lie below 0, False when one lies above, None when neither lies above and one straddles 0 (the
    sample cannot decide)."""
    verdicts = [minus[name].verdict for name in REQUIRED]
    if all(v == "lower" for v in verdicts):
        return True
    return False if "higher" in verdicts else None
