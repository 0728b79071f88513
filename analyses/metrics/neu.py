"""The population NEU of Theorem 3 (norm of the expected TD update, docs/theory.md §8b), estimated with power.

For a model with parameters ``theta`` and a task ``i`` (an MRP, its features and one trajectory
``S_0 .. S_{n+W-1}`` read as ``W`` sliding windows ``S_t .. S_{t+n}``), the per-task update is

    u_i = 1/(W-1) sum_{t < W-1} delta_t grad_theta v^_t,   delta_t = r(S_{t+n}) + gamma v^_{t+1} - v^_t,

and Theorem 3's quantity is ``||E u||^2`` over the task distribution. ``||mean_i u_i||^2`` (what NEU
training minimises) is biased upward by ``tr Cov(u) / N``; the U-statistic over all pairs of tasks

    U = (||sum_i u_i||^2 - sum_i ||u_i||^2) / (N (N - 1)) = 2/(N(N-1)) sum_{i<j} u_i . u_j

is unbiased for every ``N``. Its intervals (jackknife, and calibrated near 0) are in ``metrics.neu_intervals``.

The per-task gradients come from the exact state-space forward (``ictd_interp.models.stylised.state_space``),
with one copy of the weights per task so that one backward pass gives every ``u_i``: the cost is
independent of ``n`` once the windows are counted, which makes ``n = 1000, L = 384`` with 16k tasks
affordable. ``tests/unit/test_neu.py`` holds it against autograd through the positional hooked forward.

**The zero predictor in closed form** (``A = V = 0``: every value stays 0, so ``delta_t = r(S_{t+n})``).
With ``V = 0`` the scores never reach the output, so ``grad_A v^ = 0``; each layer's current row of ``V``
sees the prompt's sources unchanged, so ``d v^_t / d V[cur, :] = mean_{i<n} z_{t+i} = (mean x, mean R, 0, 0)``
per layer. A tied model sums its ``L`` layers (``L`` times that vector), a per-layer model has ``L`` copies:

    ||E u||^2 = L^2 ||E g||^2 (tied),  L ||E g||^2 (per layer),
    g = 1/(W-1) sum_{t<W-1} 1/n sum_{i<n} E[r(S_{t+n}) (x(S_{t+i}), r(S_{t+i}))]
      = 1/(W-1) sum_{t<W-1} 1/n sum_{i<n} ( X^T (mu_{t+i} * P^{n-i} r),  mu_{t+i} . (r * P^{n-i} r) ),

with ``mu_k = mu_0 P^k``: an exact expectation over the trajectory, per task. Only the draw of the MRPs
remains random; ``zero_predictor_neu`` averages it over many tasks (U-statistic again). For features
independent of the chain with mean zero (uniform, or one-hot with rewards of mean zero) the feature part
of ``E g`` vanishes and ``||E g||^2 = (E g_R)^2``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np
import torch
from einops import einsum

from ictd_interp.analyses.metrics.draws import context_seed
from ictd_interp.analyses.metrics.neu_intervals import (
    GROUPS,
    NeuDifference,
    NeuEstimate,
    difference_interval,
    neu_interval,
)
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.stylised.state_space import model_weights, state_space_forward, window_counts
from ictd_interp.tasks.sampling import TaskBatch, sample_from

N_WINDOWS = 5  # windows per task (W - 1 = 4 TD errors), as in the NEU training batches
CHUNK = 2048  # tasks drawn and differentiated at once (fixed: the draws depend on it, never on memory)


@dataclass(frozen=True, kw_only=True)
class NeuCell:
    """One ``(n, L)`` cell of the grid: θ*, the trained model (where it runs at ``L``) and the zero predictor
    on the same tasks, the zero predictor's closed form on 4x the tasks, and the paired differences."""

    context_len: int
    depth: int
    theta_star: NeuEstimate
    model: Optional[NeuEstimate] = None
    zero: NeuEstimate
    zero_closed_form: NeuEstimate
    theta_star_minus_zero: NeuDifference
    theta_star_minus_model: Optional[NeuDifference] = None


@dataclass(kw_only=True)  # fields in summary.json's order
class NeuGrid:
    """``neu_grid``: population NEU per ``(n, L)`` cell, on ``n_tasks`` tasks of ``windows_per_task`` windows,
    ``groups`` jackknife groups."""

    n_tasks: int
    windows_per_task: int
    groups: int
    tied: bool
    model_depth: Optional[int]
    rows: list[NeuCell]
    sentence: str


@torch.no_grad()
def zero_model(cfg) -> HookedICTDTransformer:
    """``A = V = 0``: every value stays 0 (its NEU is that of the TD errors ``delta = R``)."""
    model = HookedICTDTransformer.from_theta_star(cfg)
    for param in model.parameters():
        param.zero_()
    return model


def per_task_updates(
    model: HookedICTDTransformer, tasks: TaskBatch, context_len: int, depth: int, n_windows: int = N_WINDOWS
) -> torch.Tensor:
    """``u_i`` of the module docstring for every task ``[task, parameter]`` (float64): the gradient of
    each unique layer's free entries in parameter order: per layer ``A``'s feature block, then ``V``'s current row.
    The trajectories must
    hold ``context_len + n_windows - 1`` transitions."""
    if not model.cfg.tied and depth != model.cfg.n_layers:
        raise ValueError(f"depth: a per-layer model runs at its own depth {model.cfg.n_layers}, got {depth}")
    if tasks.states.shape[1] != context_len + n_windows:
        raise ValueError(
            f"tasks: trajectories of {context_len + n_windows - 1} transitions expected for "
            f"n = {context_len} and {n_windows} windows, got {tasks.states.shape[1] - 1}"
        )
    A0, w0 = model_weights(model)
    B = len(tasks)
    A = A0.expand(B, -1, -1, -1).clone().requires_grad_(True)
    w = w0.expand(B, -1, -1).clone().requires_grad_(True)
    N = window_counts(tasks.states, tasks.mrp.n_states, context_len, n_windows)
    r = tasks.mrp.r.double()
    with torch.enable_grad():
        v = state_space_forward(A, w, tasks.features.double(), r, N, model.cfg.gamma, depth)  # [task, window, state]
        query = tasks.states[:, context_len : context_len + n_windows]
        v_hat = torch.gather(v, 2, query.unsqueeze(-1)).squeeze(-1)  # [task, window]
        delta = torch.gather(r, 1, query[:, :-1]) + model.cfg.gamma * v_hat[:, 1:] - v_hat[:, :-1]
        objective = (delta.detach() * v_hat[:, :-1]).sum() / (n_windows - 1)
        gA, gw = torch.autograd.grad(objective, [A, w])
    return torch.cat([gA.flatten(2), gw], dim=2).flatten(1)  # per layer: A's block, then V's row (parameter order)


def cell_tasks(dist: TaskDistribution, context_len: int, n_tasks: int, seed: int, n_windows: int = N_WINDOWS):
    """The seeded tasks of a NEU cell, in chunks of ``CHUNK`` (trajectories of ``n + W - 1`` transitions)."""
    gen = torch.Generator().manual_seed(seed)
    at = replace(dist, context_len=context_len)
    for start in range(0, n_tasks, CHUNK):
        yield sample_from(at, min(CHUNK, n_tasks - start), generator=gen, length=context_len + n_windows - 1)


def updates_of(
    models: Mapping[str, HookedICTDTransformer],
    dist: TaskDistribution,
    context_len: int,
    depth: int,
    n_tasks: int,
    seed: int,
    n_windows: int = N_WINDOWS,
) -> dict[str, np.ndarray]:
    """Per-task updates of several models on the same seeded tasks (a paired comparison)."""
    parts: dict[str, list] = {name: [] for name in models}
    for tasks in cell_tasks(dist, context_len, n_tasks, seed, n_windows):
        for name, model in models.items():
            parts[name].append(per_task_updates(model, tasks, context_len, depth, n_windows).numpy())
    return {name: np.concatenate(p) for name, p in parts.items()}


def population_neu(
    model: HookedICTDTransformer,
    dist: TaskDistribution,
    context_len: int,
    depth: int,
    n_tasks: int,
    seed: int,
    n_windows: int = N_WINDOWS,
    groups: int = GROUPS,
) -> NeuEstimate:
    """Unbiased ``||E u||^2`` of ``model`` run at ``depth`` on ``n_tasks`` tasks of ``dist`` with context
    length ``context_len``, with its 95% jackknife interval."""
    u = updates_of({"model": model}, dist, context_len, depth, n_tasks, seed, n_windows)["model"]
    return neu_interval(u, groups)


def zero_predictor_g(tasks: TaskBatch, context_len: int, n_windows: int = N_WINDOWS) -> torch.Tensor:
    """``g`` of the module docstring per task ``[task, d + 1]`` (features, reward), exact over trajectories."""
    P, r, mu = tasks.mrp.P.double(), tasks.mrp.r.double(), tasks.mrp.mu0.double()
    n = context_len
    mus = [mu]
    for _ in range(n + n_windows - 2):
        mus.append(einsum(mus[-1], P, "b s, b s t -> b t"))
    ahead = [r]  # P^k r
    for _ in range(n):
        ahead.append(einsum(P, ahead[-1], "b s t, b t -> b s"))
    mus, ahead = torch.stack(mus, 1), torch.stack(ahead[:0:-1], 1)  # [b, k, s]; ahead[:, i] = P^{n-i} r
    total = torch.zeros(len(tasks), tasks.features.shape[-1] + 1, dtype=torch.float64)
    for t in range(n_windows - 1):  # every i < n of window t at once: mu_{t+i}(s) (P^{n-i} r)(s)
        weight = mus[:, t : t + n] * ahead
        total[:, :-1] += einsum(weight, tasks.features.double(), "b i s, b s d -> b d")
        total[:, -1] += einsum(weight, r, "b i s, b s -> b")
    return total / ((n_windows - 1) * n)


def zero_predictor_neu(
    dist: TaskDistribution,
    context_len: int,
    depth: int,
    n_tasks: int,
    seed: int,
    tied: bool = True,
    n_windows: int = N_WINDOWS,
    groups: int = GROUPS,
) -> NeuEstimate:
    """The zero predictor's ``||E u||^2`` from its closed form (module docstring), over ``n_tasks`` MRPs."""
    g = np.concatenate(
        [zero_predictor_g(t, context_len, n_windows).numpy() for t in cell_tasks(dist, context_len, n_tasks, seed, 1)]
    )
    out = neu_interval(g, groups)
    factor = depth**2 if tied else depth
    return replace(
        out,
        estimate=out.estimate * factor,
        lo=out.lo * factor,
        hi=out.hi * factor,
        half_width=out.half_width * factor,
        calibrated_lo=out.calibrated_lo * factor,
        calibrated_hi=out.calibrated_hi * factor,
    )


def _zero_updates(u_one_layer: np.ndarray, depth: int, tied: bool) -> np.ndarray:
    """The zero predictor's per-task updates at ``depth`` from those at depth 1 (module docstring: ``L``
    times the same vector when tied, ``L`` copies of it per layer)."""
    return u_one_layer * depth if tied else np.tile(u_one_layer, (1, depth))


def neu_grid(
    cfg,
    dist: TaskDistribution,
    model: HookedICTDTransformer | None = None,
    lengths: tuple[int, ...] = (10, 30, 100),
    depths: tuple[int, ...] = (1, 3, 12),
    n_tasks: int = 4096,
    seed: int = 0,
    n_windows: int = N_WINDOWS,
    groups: int = GROUPS,
    progress: bool = False,
) -> NeuGrid:
    """Population NEU of θ*, the zero predictor and ``model`` on every ``(n, L)``, all on the same seeded
    tasks per ``n`` (paired). A tied ``model`` runs its layer ``L`` times in every cell; a per-layer one only
    at its own depth. The zero predictor is also given by its closed form (``zero_predictor_neu``, 4x the
    tasks). θ* has ``cfg``'s parametrisation (tied or per layer)."""
    from ictd_interp.io.progress import progress_bar

    tied = cfg.tied
    star_cfg = replace(cfg, dtype="float64", n_layers=1) if tied else replace(cfg, dtype="float64")
    rows = []
    bar = progress_bar(total=len(lengths) * len(depths), disable=not progress, desc="neu")
    for n in lengths:
        zero_one = updates_of(
            {"zero": zero_model(replace(star_cfg, n_layers=1))},
            dist,
            n,
            1,
            n_tasks,
            context_seed(seed, n, "neu"),
            n_windows,
        )["zero"]
        for L in depths:
            models = {
                "theta_star": HookedICTDTransformer.from_theta_star(star_cfg if tied else replace(star_cfg, n_layers=L))
            }
            if model is not None and (model.cfg.tied or L == model.cfg.n_layers):
                models["model"] = model
            u = updates_of(models, dist, n, L, n_tasks, context_seed(seed, n, "neu"), n_windows)
            u["zero"] = _zero_updates(zero_one, L, tied)
            rows.append(
                NeuCell(
                    context_len=n,
                    depth=L,
                    theta_star=neu_interval(u["theta_star"], groups),
                    model=neu_interval(u["model"], groups) if "model" in u else None,
                    zero=neu_interval(u["zero"], groups),
                    zero_closed_form=zero_predictor_neu(
                        dist, n, L, 4 * n_tasks, context_seed(seed, n, "neu_zero_closed_form"), tied, n_windows, groups
                    ),
                    theta_star_minus_zero=difference_interval(u["theta_star"], u["zero"], groups),
                    theta_star_minus_model=difference_interval(u["theta_star"], u["model"], groups)
                    if "model" in u
                    else None,
                )
            )
            bar.update(1)
    bar.close()
    return NeuGrid(
        n_tasks=n_tasks,
        windows_per_task=n_windows,
        groups=groups,
        tied=tied,
        model_depth=model.cfg.n_layers if model is not None else None,
        rows=rows,
        sentence=neu_sentence(rows),
    )


def _cells(rows: list[NeuCell], verdict: str) -> str:
    return (
        ", ".join(f"(n={r.context_len}, L={r.depth})" for r in rows if r.theta_star_minus_zero.verdict == verdict)
        or "none"
    )


def neu_sentence(rows: list[NeuCell]) -> str:
    """Where θ*'s population NEU is below or above the zero predictor's (paired jackknife interval)."""
    return (
        f"θ*'s population NEU is below the zero predictor's (paired 95% jackknife interval over the same tasks) at "
        f"{_cells(rows, 'lower')}; above it at {_cells(rows, 'higher')}; undecided at {_cells(rows, 'undecided')}. "
        "Theorem 3 makes θ* a minimiser only as n → ∞ and then L → ∞, not at a finite (n, L)."
    )


def population_table(result: NeuGrid) -> list[str]:
    """Markdown rows: population NEU of θ*, the zero predictor (and its closed form), the model, per (n, L)."""
    lines = [
        "| n | L | θ* | zero predictor (closed form) | model | θ* − zero | θ* − model |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result.rows:
        model, versus = r.model.text() if r.model else "–", r.theta_star_minus_model
        lines.append(
            f"| {r.context_len} | {r.depth} | {r.theta_star.text()} | {r.zero.text()} "
            f"({r.zero_closed_form.text()}) | {model} | {r.theta_star_minus_zero.text()} | "
            f"{versus.text() if versus else '–'} |"
        )
    if any(x is not None and x.estimate < 0 for r in result.rows for x in (r.theta_star, r.model, r.zero)):
        lines += [
            "",
            "A negative entry is the unbiased U-statistic falling below 0 by chance: NEU itself is a squared norm, "
            "never negative (read the calibrated interval, which never goes below 0).",
        ]
    return lines
