"""The paper's theorems, checked on θ* itself (no training): Theorem 1's exactness, Assumption 5.1's margin,
Theorem 2's rate and floor, Theorem 3's population NEU. Each function returns its ``Claim`` (rows), whose
``data`` holds what its figure is drawn from (``claims.claim_figures``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ictd_interp.analyses.claims.budget import Budget
from ictd_interp.analyses.claims.claim import FAILS, HOLDS, Claim, conditional
from ictd_interp.analyses.claims.figure_data import FloorData, FloorSetting, MarginData, MarginSetting
from ictd_interp.analyses.metrics.baselines import td_fixed_point_states
from ictd_interp.analyses.metrics.depth_limit import NEUTRAL_TOL, limit_spectrum
from ictd_interp.analyses.metrics.diagonality import model_margin
from ictd_interp.analyses.metrics.intervals import proportion_interval, t_interval
from ictd_interp.analyses.summary.store import to_json
from ictd_interp.config import ICTDConfig, TaskDistribution
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.reference.td import softmax_td
from ictd_interp.tasks.sampling import TaskBatch, sample_from, sample_tasks

EXACT = 1e-10  # float64: θ* is exact, only rounding differs
GAMMA, N_STATES, D = 0.9, 10, 10  # the tasks of every θ* row: Boyan chains, 10 states, 10 feature dimensions
KINDS = ("uniform", "onehot")


def theorem1(budget: Budget) -> Claim:
    worst, rows = 0.0, []
    for form in ("tsm", "dual"):
        for kind in KINDS:
            for scale in budget.theorem1_scales:
                for n in budget.theorem1_lengths:
                    tasks = sample_tasks(3, 8, 8, n, GAMMA, feature_kind=kind, feature_scale=scale, seed=n)
                    cfg = ICTDConfig(d_features=8, n_layers=budget.theorem1_depth, form=form, dtype="float64")
                    star = HookedICTDTransformer.from_theta_star(cfg)
                    _, cache = star.run_with_cache(tasks.prompt)
                    ref = softmax_td(tasks.x, tasks.rewards, GAMMA, budget.theorem1_depth)
                    err = max(
                        float((cache["resid_post", l][..., star.layout.current] - ref[:, l + 1]).abs().max())
                        for l in range(budget.theorem1_depth)
                    )
                    rows.append({"form": form, "kind": kind, "scale": scale, "n": n, "max_error": err})
                    worst = max(worst, err)
    settings = len(rows)
    return Claim(
        "theorem1",
        "Theorem 1: θ* implements softmax-weighted TD: its layer l computes TD iterate l + 1 exactly, "
        "in both forms (temporal shift and dual head).",
        f"θ* (float64, {budget.theorem1_depth} layers) against the reference iteration `softmax_td` on {settings} "
        f"settings: forms tsm and dual × uniform and one-hot features × scales {list(budget.theorem1_scales)} × "
        f"n ∈ {list(budget.theorem1_lengths)}, 3 Boyan chains (8 states) each; every layer compared.",
        f"holds when the largest absolute difference over every setting, task, position and layer is ≤ {EXACT:g} "
        "(float64 rounding).",
        HOLDS if worst <= EXACT else FAILS,
        [
            f"largest |θ* layer l − softmax TD iterate l+1|: {worst:.1e} over {settings} settings × "
            f"{budget.theorem1_depth} layers (bound {EXACT:g})"
        ],
        {"max_error": worst, "bound": EXACT, "rows": rows},
    )


def _tasks(kind: str, scale: float, n_tasks: int, seed: int, length: Optional[int] = None) -> TaskBatch:
    """The θ* rows' Boyan chains with the given features; trajectories of ``length`` transitions."""
    dist = TaskDistribution(
        n_states=N_STATES, d_features=D, context_len=30, gamma=GAMMA, feature_kind=kind, feature_scale=scale
    )
    return sample_from(dist, n_tasks, seed=seed, length=length)


def _star() -> HookedICTDTransformer:
    """θ*'s one layer (A = I), float64: its margin C and its map on state values."""
    return HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=D, n_layers=1, tied=True, dtype="float64"))


def assumption(budget: Budget) -> Claim:
    table, holds = {}, {}
    for kind in KINDS:
        for scale in budget.margin_scales:
            C = model_margin(_star(), _tasks(kind, scale, budget.margin_tasks, seed=0)).numpy()
            fraction = proportion_interval(int((C > 0).sum()), len(C))
            table[(kind, scale)] = MarginSetting(kind, scale, fraction, t_interval(C))
            holds[(kind, scale)] = bool((C > 0).all())

    def describe(good):
        parts = []
        for kind in KINDS:
            scales = [s for k, s in good if k == kind]
            if scales:
                rest = [s for s in budget.margin_scales if s >= min(scales)]
                parts.append(
                    f"{kind} features at scale ≥ {min(scales):g}"
                    if rest == scales
                    else f"{kind} features at scale {', '.join(f'{s:g}' for s in scales)}"
                )
        return " or ".join(parts)

    numbers = [
        f"{kind}, scale {s:g}: C > 0 on {t.fraction_positive.mean:.0%} of {budget.margin_tasks} tasks "
        f"[{t.fraction_positive.lo:.0%}, {t.fraction_positive.hi:.0%}], mean C {t.C_mean.mean:+.3f}"
        for (kind, s), t in table.items()
    ]
    return Claim(
        "assumption51",
        "Assumption 5.1: the population kernel is diagonal enough, C = min_s M(s, s) − (1 + γ)/2 > 0.",
        f"C of θ*'s kernel (A = I) on {budget.margin_tasks} Boyan chains ({N_STATES} states, d = {D}, γ = {GAMMA}) per "
        f"feature kind and scale {list(budget.margin_scales)} (`ictd_interp.analyses.metrics.model_margin`).",
        "holds in a setting when every one of its tasks has C > 0 (the fraction's 95% Wilson interval is shown).",
        conditional(holds, describe),
        numbers,
        to_json(MarginData(budget.margin_tasks, list(table.values()))),
        "assumption51",
    )


@dataclass
class LimitRows:
    """Per context length (outer lists) and task: ``radius``, ``neutral`` (θ*'s map has the eigenvalue 1),
    ``floor`` (sup error of the depth limit, None where there is no limit), the largest ``tabular_gap`` on
    contexts whose query state is a source and whose limit exists, and how many such contexts (``query_source``);
    ``C`` per task."""

    radius: list = field(default_factory=list)
    neutral: list = field(default_factory=list)
    floor: list = field(default_factory=list)
    tabular_gap: list = field(default_factory=list)
    query_source: list = field(default_factory=list)
    C: list = field(default_factory=list)


def _limit_rows(kind: str, scale: float, budget: Budget) -> LimitRows:
    """Per context length and task: the spectral radius of the moving part of θ*'s map, whether it has the
    neutral eigenvalue 1, the sup error of its depth limit against v_π, and the limit's largest distance from
    the tabular TD fixed point on contexts whose query state is a source (``depth_limit``'s docstring)."""
    tasks, star = _tasks(kind, scale, budget.limit_tasks, seed=1, length=max(budget.limit_lengths)), _star()
    out = LimitRows()
    for n in budget.limit_lengths:
        prefix = TaskBatch(tasks.mrp, tasks.features, tasks.states[:, : n + 1])
        values, spectrum = limit_spectrum(star, prefix)
        errors = (values - prefix.v_true.double()).abs().amax(1)
        source = (prefix.states[:, :-1] == prefix.states[:, -1:]).any(1) & values.isfinite().all(1)  # and a limit
        gap = (values - td_fixed_point_states(prefix, GAMMA)).abs().amax(1)[source]
        out.radius.append(spectrum.radius)
        out.neutral.append(spectrum.neutral)
        out.floor.append([float(e) if math.isfinite(e) else None for e in errors.tolist()])
        out.tabular_gap.append(float(gap.max()) if len(gap) else None)
        out.query_source.append(int(source.sum()))
    out.C = model_margin(star, tasks).tolist()
    return out


RATE_SETTINGS = (("uniform", 1.0), ("uniform", 5.0), ("onehot", 3.0), ("onehot", 5.0))


def _rate_claim(data: dict[tuple[str, float], LimitRows], budget: Budget, n_max: int) -> Claim:
    tested = within = 0
    numbers, slack = [], []
    for (kind, scale), d in data.items():
        rho, C = np.asarray(d.radius[-1]), np.asarray(d.C)
        positive = C > 0
        ok = int((rho[positive] <= 1 - C[positive] + 1e-12).sum())
        slack += (1 - C[positive] - rho[positive]).tolist()
        tested, within = tested + int(positive.sum()), within + ok
        neutral = int(np.sum(d.neutral[-1]))
        numbers.append(
            f"{kind} ×{scale:g}: ρ {t_interval(rho).text('.3f')} at n = {n_max} "
            f"({int((rho < 1 - NEUTRAL_TOL).sum())}/{len(rho)} tasks contract, ρ < 1 − {NEUTRAL_TOL:g}; "
            f"{neutral} also have the neutral eigenvalue 1); "
            f"C > 0 on {int(positive.sum())}/{len(C)}"
            + (
                f", ρ ≤ 1 − C on {ok}/{int(positive.sum())} of those"
                if positive.any()
                else ": the bound does not apply"
            )
        )
    verdict = (
        "holds on every task with C > 0"
        if tested and within == tested
        else "not tested (no task has C > 0)"
        if not tested
        else f"fails on {tested - within} of {tested} tasks with C > 0"
    )
    numbers.insert(
        0,
        f"ρ ≤ 1 − C on {within}/{tested} tasks with C > 0 (all settings, n = {n_max})"
        + (
            f"; the bound's slack 1 − C − ρ is {np.median(slack):.3f} at the median (smallest "
            f"{min(slack):.3f})" + (": a loose bound here" if min(slack) > 0.01 else "")
            if slack
            else ""
        ),
    )
    return Claim(
        "theorem2_rate",
        "Theorem 2 (rate): θ*'s error falls geometrically with depth, at rate at most 1 − C when "
        "Assumption 5.1 holds (C > 0).",
        f"The spectral radius ρ of the moving part of θ*'s map on the context's state values (the asymptotic rate of "
        f"its error in depth; a state never a source adds the neutral eigenvalue 1, which never moves: "
        f"`ictd_interp.analyses.metrics.depth_limit`) on {budget.limit_tasks} tasks per setting "
        f"({', '.join(f'{k} ×{s:g}' for k, s in data)}), n = {n_max}, against 1 − C per task: the asymptotic rate "
        "only (the bound at each finite depth and n is not checked).",
        "the bound is tested on every task with C > 0 (where C ≤ 0 it says nothing); holds when ρ ≤ 1 − C on every "
        "one of them. A weak test: where Assumption 5.1 holds, C < (1 − γ)/2, so the bound 1 − C exceeds (1 + γ)/2 "
        f"= {(1 + GAMMA) / 2:g} here: only a radius between {(1 + GAMMA) / 2:g} and 1 could fail it.",
        verdict,
        numbers,
        {"settings": [f"{k} ×{s:g}" for k, s in data], "tested": tested, "within": within},
    )


def _floor_setting(kind: str, scale: float, d: LimitRows, lengths: np.ndarray) -> tuple[np.ndarray, Any, str]:
    """One setting's depth-limit errors ``[n, task]`` (NaN where a context has no limit), the t interval of the
    per-task least-squares slope of log error on log n (None with fewer than 2 converging tasks), and its line."""
    floors = np.asarray([[np.nan if f is None else f for f in row] for row in d.floor], dtype=float)
    ok = np.isfinite(floors).all(0) & (floors > 0).all(0)
    x = np.log(lengths) - np.log(lengths).mean()
    per_task = x @ np.log(floors[:, ok]) / (x @ x)  # every task's slope at once
    slope = t_interval(per_task) if per_task.size >= 2 else None
    diverged = [int(np.isnan(row).sum()) for row in floors]
    text = (
        f"{kind} ×{scale:g}: sup error of θ*'s depth limit (mean over tasks) "
        + ", ".join(
            f"{np.nanmean(floors[i]):.3f} (n = {int(n)}"
            + (
                f", {diverged[i]} of {floors.shape[1]} tasks without a limit: radius ≥ 1 − {NEUTRAL_TOL:g}"
                if diverged[i]
                else ""
            )
            + ")"
            for i, n in enumerate(lengths)
        )
        + (
            f"; slope of log error vs log n {slope.text('.2f')} over {slope.n} tasks"
            + (" (contains −1/2: ≈ 1/√n)" if slope.lo <= -0.5 <= slope.hi else "")
            if slope
            else "; too few converging tasks for a slope"
        )
    )
    return floors, slope, text


def theorem2(budget: Budget) -> list[Claim]:
    """Two rows: the rate (ρ of θ*'s map against the bound 1 − C where C > 0) and the floor → 0 as n grows."""
    data = {s: _limit_rows(*s, budget) for s in RATE_SETTINGS}
    lengths = np.asarray(budget.limit_lengths, dtype=float)
    floor_ok, floor_numbers, slopes = {}, [], {}
    for (kind, scale), d in data.items():
        floors, slope, text = _floor_setting(kind, scale, d, lengths)
        slopes[(kind, scale)] = (floors, slope)
        floor_ok[(kind, scale)] = slope is not None and slope.hi < 0
        floor_numbers.append(text)
    gaps = [g for d in data.values() for g in d.tabular_gap if g is not None]
    sources = sum(sum(d.query_source) for d in data.values())
    contexts = len(data) * len(lengths) * budget.limit_tasks
    floor_numbers.append(
        "θ*'s depth limit equals the tabular TD fixed point of the context "
        f"(`baselines.td_fixed_point`, solved on the states) to {max(gaps):.1e} "
        f"on the {sources} of {contexts} contexts (over the {len(data)} settings) whose query state is a source and "
        "whose limit exists: the "
        "floor is tabular estimation error; the kernel and C set only the rate. Where the query state is not a "
        "source, its value is free in the tabular equations and θ*'s kernel picks it; contexts without a limit are "
        "left out."
    )
    describe = lambda good: " or ".join(f"{k} features at scale {s:g}" for k, s in good)  # noqa: E731
    floor = Claim(
        "theorem2_floor",
        "Theorem 2 (floor): the error's floor (its limit as depth grows) goes to 0 as the context length n grows.",
        "θ*'s depth limit (`ictd_interp.analyses.metrics.depth_limit`: exact, no singular solve where a state is "
        "never a source) "
        "against v_π (sup over the context's positions) at n ∈ "
        f"{list(budget.limit_lengths)}, prefixes of one trajectory "
        f"per task, {budget.limit_tasks} tasks per setting; per task the slope of log error against log n.",
        "holds in a setting when the 95% t interval of the per-task slope lies below 0 (the floor falls with n).",
        conditional(floor_ok, describe),
        floor_numbers,
        to_json(
            FloorData(
                list(budget.limit_lengths),
                max(gaps),
                [FloorSetting(k, s, np.nanmean(v[0], 1).tolist(), v[1]) for (k, s), v in slopes.items()],
            )
        ),
        "theorem2_floor",
    )
    return [_rate_claim(data, budget, int(lengths[-1])), floor]
