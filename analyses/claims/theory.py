"""The paper's theorems, checked on θ* itself (no training): Theorem 1's exactness, Assumption 5.1's margin,
Theorem 2's rate and floor, Theorem 3's population NEU. Each function returns its ``Claim`` (rows), whose
``data`` holds what its figure is drawn from (``claims.drawing``)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from analyses.claims.budget import Budget
from analyses.claims.claim import FAILS, HOLDS, Claim, conditional, thresholds
from analyses.metrics.algorithm_id import iteration_map
from analyses.metrics.diagonality import model_margin
from analyses.metrics.intervals import paired, proportion_interval, t_interval
from analyses.metrics.neu import neu_grid
from analyses.reports.stylised import theta_star_coefficients
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
                    err = max(float((cache["resid_post", l][..., star.layout.current] - ref[:, l + 1]).abs().max())
                              for l in range(budget.theorem1_depth))
                    rows.append({"form": form, "kind": kind, "scale": scale, "n": n, "max_error": err})
                    worst = max(worst, err)
    settings = len(rows)
    return Claim(
        "theorem1", "Theorem 1: θ* implements softmax-weighted TD: its layer l computes TD iterate l + 1 exactly, "
        "in both forms (temporal shift and dual head).",
        f"θ* (float64, {budget.theorem1_depth} layers) against the reference iteration `softmax_td` on {settings} "
        f"settings: forms tsm and dual × uniform and one-hot features × scales {list(budget.theorem1_scales)} × "
        f"n ∈ {list(budget.theorem1_lengths)}, 3 Boyan chains (8 states) each; every layer compared.",
        f"holds when the largest absolute difference over every setting, task, position and layer is ≤ {EXACT:g} "
        "(float64 rounding).",
        HOLDS if worst <= EXACT else FAILS,
        [f"largest |θ* layer l − softmax TD iterate l+1|: {worst:.1e} over {settings} settings × "
         f"{budget.theorem1_depth} layers (bound {EXACT:g})"],
        {"max_error": worst, "bound": EXACT, "rows": rows})


def _tasks(kind: str, scale: float, n_tasks: int, seed: int, length: Optional[int] = None) -> TaskBatch:
    """The θ* rows' Boyan chains with the given features; trajectories of ``length`` transitions."""
    dist = TaskDistribution(n_states=N_STATES, d_features=D, context_len=30, gamma=GAMMA, feature_kind=kind,
                            feature_scale=scale)
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
            table[(kind, scale)] = {"fraction_positive": fraction.to_dict(), "C_mean": t_interval(C).to_dict()}
            holds[(kind, scale)] = bool((C > 0).all())

    def describe(good):
        parts = []
        for kind in KINDS:
            scales = [s for k, s in good if k == kind]
            if scales:
                rest = [s for s in budget.margin_scales if s >= min(scales)]
                parts.append(f"{kind} features at scale ≥ {min(scales):g}" if rest == scales
                             else f"{kind} features at scale {', '.join(f'{s:g}' for s in scales)}")
        return " or ".join(parts)

    numbers = [f"{kind}, scale {s:g}: C > 0 on {t['fraction_positive']['mean']:.0%} of {budget.margin_tasks} tasks "
               f"[{t['fraction_positive']['lo']:.0%}, {t['fraction_positive']['hi']:.0%}], mean C {t['C_mean']['mean']:+.3f}"
               for (kind, s), t in table.items()]
    return Claim(
        "assumption51", "Assumption 5.1: the population kernel is diagonal enough, C = min_s M(s, s) − (1 + γ)/2 > 0.",
        f"C of θ*'s kernel (A = I) on {budget.margin_tasks} Boyan chains ({N_STATES} states, d = {D}, γ = {GAMMA}) per "
        f"feature kind and scale {list(budget.margin_scales)} (`analyses.metrics.model_margin`).",
        "holds in a setting when every one of its tasks has C > 0 (the fraction's 95% Wilson interval is shown).",
        conditional(holds, describe), numbers,
        {"tasks": budget.margin_tasks, "settings": [{"kind": k, "scale": s, **v} for (k, s), v in table.items()]},
        "assumption51")


def _limit_rows(kind: str, scale: float, budget: Budget) -> dict:
    """Per task and context length: θ*'s map's spectral radius and the sup error of its fixed point."""
    tasks, star = _tasks(kind, scale, budget.limit_tasks, seed=1, length=max(budget.limit_lengths)), _star()
    out = {"radius": [], "floor": []}
    for n in budget.limit_lengths:
        prefix = TaskBatch(tasks.mrp, tasks.features, tasks.states[:, : n + 1])
        result = iteration_map(star, prefix, 0, theta_star_coefficients(GAMMA))
        out["radius"].append(result["spectral_radius"])
        out["floor"].append(result["fixed_point_errors"])
    out["C"] = model_margin(star, tasks).tolist()
    return out


def theorem2(budget: Budget) -> list[Claim]:
    """Two rows: the rate (ρ of θ*'s map against the bound 1 − C where C > 0) and the floor → 0 as n grows."""
    settings = [("uniform", 1.0), ("onehot", 3.0)]
    data = {s: _limit_rows(*s, budget) for s in settings}
    lengths = np.asarray(budget.limit_lengths, dtype=float)
    rate_ok, rate_numbers, floor_ok, floor_numbers, slopes = {}, [], {}, [], {}
    for (kind, scale), d in data.items():
        rho, C = np.asarray(d["radius"][-1]), np.asarray(d["C"])
        positive = C > 0
        within = int((rho[positive] <= 1 - C[positive] + 1e-12).sum())
        # where C <= 0 the bound says nothing: such a setting does not test the claim, and it does not hold there
        rate_ok[(kind, scale)] = bool(positive.any()) and within == int(positive.sum())
        rate_numbers.append(f"{kind} ×{scale:g}: ρ(T) {t_interval(rho).text('.3f')} at n = {int(lengths[-1])} "
                            f"({int((rho < 1).sum())}/{len(rho)} tasks contract); C > 0 on {int(positive.sum())}/{len(C)}"
                            + (f", ρ ≤ 1 − C on {within}/{int(positive.sum())} of those" if positive.any() else
                               ": the bound does not apply"))
        floors = np.asarray([[np.nan if f is None else f for f in row] for row in d["floor"]], dtype=float)  # [n, task]
        ok = np.isfinite(floors).all(0) & (floors > 0).all(0)
        x = np.log(lengths) - np.log(lengths).mean()
        per_task = x @ np.log(floors[:, ok]) / (x @ x)  # least-squares slope of log error on log n, every task at once
        slope = t_interval(per_task) if per_task.size else None
        slopes[(kind, scale)] = (floors, slope)
        floor_ok[(kind, scale)] = slope is not None and slope.hi < 0
        floor_numbers.append(
            f"{kind} ×{scale:g}: fixed-point error " + ", ".join(f"{np.nanmean(floors[i]):.3f} (n = {int(n)})"
                                                                   for i, n in enumerate(lengths))
            + (f"; slope of log error vs log n {slope.text('.2f')} over {slope.n} tasks"
               + (" (contains −1/2: ≈ 1/√n)" if slope.lo <= -0.5 <= slope.hi else "") if slope else
               "; too few contracting tasks for a slope"))
    describe = lambda good: " or ".join(f"{k} features at scale {s:g}" for k, s in good)  # noqa: E731
    rate = Claim(
        "theorem2_rate", "Theorem 2 (rate): θ*'s error falls geometrically with depth, at rate at most 1 − C when "
        "Assumption 5.1 holds (C > 0).",
        f"The spectral radius ρ(T) of θ*'s map on the context's state values (the asymptotic rate of its error "
        f"in depth) on {budget.limit_tasks} tasks per setting, n = {int(lengths[-1])}, against 1 − C per task.",
        "holds in a setting when it has tasks with C > 0 and ρ(T) ≤ 1 − C on every one of them (where C ≤ 0 the "
        "bound says nothing, so the claim is not shown there).",
        conditional(rate_ok, describe), rate_numbers, {"settings": [str(s) for s in settings]})
    floor = Claim(
        "theorem2_floor", "Theorem 2 (floor): the error's floor (its limit as depth grows) goes to 0 as the context "
        "length n grows.",
        f"θ*'s limit computed as the fixed point of its map (sup error against v_π) at n ∈ {list(budget.limit_lengths)}, "
        f"prefixes of one trajectory per task, {budget.limit_tasks} tasks per setting; per task the slope of log error "
        "against log n.",
        "holds in a setting when the 95% t interval of the per-task slope lies below 0 (the floor falls with n).",
        conditional(floor_ok, describe), floor_numbers,
        {"lengths": list(budget.limit_lengths), "settings": [
            {"kind": k, "scale": s, "floor_mean": np.nanmean(v[0], 1).tolist(), "slope": v[1].to_dict() if v[1] else None}
            for (k, s), v in slopes.items()]}, "theorem2_floor")
    return [rate, floor]


def theorem3(budget: Budget, model: Optional[HookedICTDTransformer]) -> Claim:
    cfg = ICTDConfig(d_features=4, n_layers=1, tied=model.cfg.tied if model is not None else True, dtype="float64")
    dist = TaskDistribution(d_features=4, gamma=GAMMA)
    grid = neu_grid(cfg, dist, model, lengths=budget.neu_lengths, depths=budget.neu_depths,
                    tasks_per_batch=budget.neu_tasks_per_batch, n_windows=5, repeats=budget.neu_repeats, seed=3)
    below, numbers, differences = {}, [], []
    for row in grid["rows"]:
        n, L = row["context_len"], row["depth"]
        vs_zero = paired(row["theta_star"]["population_values"], row["zero"]["population_values"])
        vs_model = (paired(row["theta_star"]["population_values"], row["model"]["population_values"])
                    if "model" in row else None)
        below[(n, L)] = vs_zero.verdict == "lower" and (vs_model is None or vs_model.verdict == "lower")
        differences.append({"context_len": n, "depth": L, "theta_star_minus_zero": vs_zero.to_dict(),
                            "theta_star_minus_model": vs_model.to_dict() if vs_model else None})
        numbers.append(f"n = {n}, L = {L}: θ* {row['theta_star']['population']['mean']:.2e}, zero predictor "
                       f"{row['zero']['population']['mean']:.2e} (θ* − zero {vs_zero.difference.text('.1e')}: "
                       f"{vs_zero.verdict})" + (f", trained model {row['model']['population']['mean']:.2e} (θ* − model "
                                                f"{vs_model.difference.text('.1e')}: {vs_model.verdict})" if vs_model else ""))
    grid_points = [(float(n), float(L)) for n, L in below]
    verdict = conditional({(float(n), float(L)): ok for (n, L), ok in below.items()},
                          lambda good: thresholds(good, grid_points, ("n", "L")))
    name = budget.neu_model if model is not None else "none"
    return Claim(
        "theorem3", "Theorem 3: θ* minimises the norm of the expected update (NEU) as n → ∞ and then L → ∞.",
        f"Population NEU (unbiased) of θ*, the zero predictor and the trained `{name}` (at its own depth) on "
        f"n ∈ {list(budget.neu_lengths)} × L ∈ {list(budget.neu_depths)}, {budget.neu_repeats} seeded batches of "
        f"{budget.neu_tasks_per_batch} tasks × 5 windows per cell (`analyses.metrics.neu_grid`).",
        "θ* is the minimiser at (n, L) when the paired 95% t interval over the batches puts its NEU below the zero "
        "predictor's and (at the trained depth) below the trained model's.",
        verdict, numbers, {"differences": differences, "below": [list(k) for k, ok in below.items() if ok],
                           "rows": [{k: v for k, v in r.items() if k != "population_values"} for r in grid["rows"]]},
        "theorem3")
