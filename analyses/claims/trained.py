"""The claims about trained models, read from the studies the report ran (``results.csv``, ``curves.csv``):
emergence of θ*'s weights, kernel diagonality over training, the value signature, and this project's
findings (the learned layer iterated, the constant baseline, depth-sampled training, the standard
architecture's same-state head). Every number is over seeds, with its interval; every verdict by a rule."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Optional

import numpy as np
import pandas as pd

from analyses.claims.claim import FAILS, HOLDS, Claim, conditional
from analyses.claims.figure_data import Curve, DiagonalityData, ObjectiveWeights, WeightsData
from analyses.metrics.intervals import COSINE, NONNEGATIVE, Interval, paired, proportion_interval, t_interval
from analyses.studies.results import CELL, CONDITION, STATUS, STEP, curve_column
from analyses.summary.sections import Summary
from analyses.summary.store import build, to_json
from analyses.summary.tables import summary_column

LEARNS = summary_column("in_context.learns_in_context")
BEATS_CONSTANT = summary_column("baselines.estimators.constant.model_minus_baseline.verdict")
BEST_DEPTH = summary_column("algorithm.extrapolation.best_depth")
CONSTANT_MSVE = summary_column("baselines.estimators.constant.msve.mean")
CONVERGES = summary_column("algorithm.extrapolation.converges")
COS_A = summary_column("metrics.cos_A")
COS_V = summary_column("metrics.cos_V")
DISCOUNT = summary_column("algorithm.layers.effective_discount")
EVAL_MSVE = summary_column("metrics.eval_msve")
SIGNATURE_MATCH = summary_column("metrics.signature_match")
TRAINED_DEPTH = summary_column("algorithm.extrapolation.trained_depth")
DIAGONALITY = curve_column("kernel_diagonality_mean")

CLOSE = 0.9  # "close to θ*": both weight cosines' 95% intervals over seeds lie above this


def _per_cell(results: pd.DataFrame, column: str, how: str) -> pd.DataFrame:
    done = results[results[STATUS] == "done"]
    if column not in done or not done[column].notna().any():
        return pd.DataFrame(columns=["condition", "cell", column])
    return done.groupby(["condition", "cell"], sort=False)[column].agg(how).reset_index()


def _by_condition(
    results: pd.DataFrame, column: str, how: str, bounds: Optional[tuple[float, float]] = None
) -> dict[str, Interval]:
    cells = _per_cell(results, column, how)
    return {
        c: t_interval(part[column].astype(float).to_numpy(), bounds=bounds)
        for c, part in cells.groupby("condition", sort=False)
    }


def _objective(condition: str) -> str:
    return condition.split("=", 1)[-1]


def _objectives(good: list[str]) -> str:
    return "the objective is " + " or ".join(_objective(c) for c in good)


SIZE_CLOSE = 0.25  # "as large as θ*": both relative distances' 95% intervals lie below this ...
DISCOUNT_TOL = 0.1  # ... and the effective discount's interval lies within γ ± this


def _weights(results: pd.DataFrame, seeds: int, claim_id: str, claim: str, run: str, title: str) -> Claim:
    """Direction: the weight cosines (scale-free), the lowest layer's, over seeds per objective."""
    cos_a, cos_v = _by_condition(results, COS_A, "min", COSINE), _by_condition(results, COS_V, "min", COSINE)
    holds = {c: cos_a[c].lo >= CLOSE and cos_v[c].lo >= CLOSE for c in cos_a if c in cos_v}
    numbers = [
        f"{_objective(c)}: min over layers cos(A, A*) {cos_a[c].text('.3f')}, cos(V, V*) {cos_v[c].text('.3f')}"
        for c in holds
    ]
    return Claim(
        claim_id,
        claim,
        run + "; the last checkpoint's cosines, the lowest layer's (a model is only as close as its worst layer).",
        f"holds for an objective when the 95% t intervals over seeds of both cosines lie above {CLOSE}.",
        conditional(holds, _objectives),
        numbers,
        to_json(
            WeightsData(
                seeds=seeds,
                close=CLOSE,
                title=title,
                objectives=[ObjectiveWeights(_objective(c), cos_a[c], cos_v[c]) for c in holds],
            )
        ),
        claim_id,
    )


def weights(results: pd.DataFrame, seeds: int) -> Claim:
    """Emergence judged in function space: the seeds that learn in context (``analyses.metrics.in_context``), per
    objective; each objective's weight cosines are printed beside the other objectives' (their null: a cosine near 1
    that a non-TD objective reaches too says nothing about TD)."""
    base = _weights(
        results,
        seeds,
        "emergence_weights",
        "",
        "",
        "Emergence: trained weights against θ* (lowest "
        "layer; every objective's, so each cosine stands beside its null)",
    )
    learned = _per_cell(results, LEARNS, "first")
    holds, numbers = {}, []
    for condition, part in learned.groupby("condition", sort=False):
        k, n = int(part[LEARNS].astype(bool).sum()), len(part)
        share = proportion_interval(k, n)
        holds[condition] = bool(share.lo > 0.5)
        numbers.append(
            f"{_objective(condition)}: {k}/{n} seeds learn in context (Wilson 95% [{share.lo:.0%}, {share.hi:.0%}])"
        )
    figure = build(WeightsData, base.data)
    tally = {_objective(c): n.split(": ", 1)[1].split(" seeds", 1)[0] for c, n in zip(holds, numbers)}
    figure = replace(
        figure,
        judged=False,
        title="Emergence: weight cosines with θ* (lowest layer) per objective, each "
        "beside the others' (x: seeds that learn in context)",
        objectives=[
            replace(o, objective=f"{o.objective}\n{tally.get(o.objective, '?')} learn") for o in figure.objectives
        ],
    )
    return replace(
        base,
        data=to_json(figure),
        claim="Emergence: reinforcement pretraining (the TD objective) yields a model that learns in context — it "
        "beats the constant and first-visit Monte Carlo on held-out tasks — not just weights that point at θ*.",
        run=f"The `quick` preset trained with each objective, {seeds} seeds each (a study on Ray: `analyses/claims` "
        "runs it into the report folder's studies/objectives); each seed judged on its own held-out tasks.",
        rule="holds for an objective when the Wilson 95% interval of the fraction of its seeds that learn in context "
        "(MSVE below both the constant and first-visit MC, paired 95% t intervals over tasks) lies above 1/2; "
        "the cosines are shown, not judged: every objective's stands beside the others' as their null.",
        verdict=conditional(holds, _objectives) if holds else "not measured (no cell carries the verdict)",
        numbers=numbers + [f"cosines, {line}" for line in base.numbers],
    )


def control_weights(results: pd.DataFrame, seeds: int) -> Claim:
    return _weights(
        results,
        seeds,
        "control_emergence",
        "Beyond the paper: pretraining on state-action chains turns "
        "the weights toward θ* (softmax SARSA) when the objective is SARSA's TD objective (Q-learning's TD "
        "objective and regression on q* measured beside it).",
        f"The `control-quick` preset (random two-action MDPs of 4 states, uniform behaviour, the "
        f"state-action chain as the MRP) trained with each objective, {seeds} seeds each (the report "
        "folder's studies/control_objectives)",
        "Control emergence: trained weights against θ* (lowest layer)",
    )


def weight_size(results: pd.DataFrame, seeds: int, gamma: float) -> Claim:
    """Size: relative distances to θ* and the effective discount the value row implies."""
    dist_a = _by_condition(results, "metrics.dist_A", "max", NONNEGATIVE)
    dist_v = _by_condition(results, "metrics.dist_V", "max", NONNEGATIVE)
    discount = _by_condition(results, DISCOUNT, "last")
    holds, numbers = {}, []
    for c in dist_a:
        if c not in dist_v:
            continue
        disc = discount.get(c)
        near = disc is not None and gamma - DISCOUNT_TOL <= disc.lo and disc.hi <= gamma + DISCOUNT_TOL
        holds[c] = dist_a[c].hi <= SIZE_CLOSE and dist_v[c].hi <= SIZE_CLOSE and near
        numbers.append(
            f"{_objective(c)}: max over layers ‖A − A*‖/‖A*‖ {dist_a[c].text('.2f')}, ‖V − V*‖/‖V*‖ "
            f"{dist_v[c].text('.2f')}; effective discount "
            f"{disc.text('.2f') if disc else 'not identifiable'} "
            f"(θ*: {gamma:g})"
        )
    return Claim(
        "emergence_weight_size",
        "Emergence (size): the trained weights are θ*'s in size too (small relative distance, "
        "and the effective discount b/(−c) of the value row equal to γ).",
        f"The same study ({seeds} seeds per objective): the largest relative distance over layers and the last layer's "
        "effective discount (read from its weights).",
        "holds for an objective when both relative distances' 95% "
        f"t intervals over seeds lie below {SIZE_CLOSE} and the "
        f"effective discount's lies within γ ± {DISCOUNT_TOL}.",
        conditional(holds, _objectives),
        numbers,
        {
            "seeds": seeds,
            "size_close": SIZE_CLOSE,
            "objectives": [
                {
                    "objective": _objective(c),
                    "dist_A": dist_a[c].to_dict(),
                    "dist_V": dist_v[c].to_dict(),
                    "effective_discount": discount[c].to_dict() if c in discount else None,
                }
                for c in holds
            ],
        },
    )


def contraction_line(last: dict[str, float], gamma: float) -> str:
    """What the end diagonality says of Theorem 2's contraction condition (``last``: the mean at the last step, per
    objective): Assumption 5.1 needs every state's ``M(s, s) > (1 + γ) / 2``, and a mean is at least the minimum."""
    need, top = (1 + gamma) / 2, max(last, key=last.get)
    verdict = "so no objective's kernel meets" if last[top] < need else "which does not show that the kernels meet"
    return (
        f"Assumption 5.1 (Theorem 2's contraction) needs M(s, s) > (1 + γ)/2 = {need:.2f} at every state; the "
        f"largest mean diagonality at the end is {last[top]:.3f} ({top}), {verdict} it in this regime (θ*'s "
        "neither: the Assumption 5.1 row)"
    )


def diagonality_run(seeds: int, n_tasks: int) -> str:
    """What the diagonality row ran (its saved rows are re-read by this same sentence)."""
    return (
        f"Kernel diagonality (the mean over visited states of the grouped kernel's M(s, s)) on the {n_tasks} "
        f"evaluation tasks at step 0 and at the last step, per seed ({seeds} seeds per objective, the same study "
        "as above)."
    )


def diagonality(curves: pd.DataFrame, seeds: int, gamma: float, n_tasks: int) -> Claim:
    per_cell = curves.groupby([CONDITION, CELL, STEP], sort=False)[DIAGONALITY].first().reset_index()
    change, holds, numbers, curves_by_objective = {}, {}, [], {}
    for c, part in per_cell.groupby("condition", sort=False):
        curves_by_objective[_objective(c)] = part.groupby(STEP)[DIAGONALITY].mean()
        first, last = part.sort_values(STEP).groupby(CELL)[DIAGONALITY].agg(["first", "last"]).to_numpy(float).T
        change[c] = paired(last, first)
        holds[c] = change[c].verdict == "higher"
        numbers.append(
            f"{_objective(c)}: diagonality {t_interval(first).text('.3f')} at step 0 → "
            f"{t_interval(last).text('.3f')} at "
            f"the end; change {change[c].difference.text('.3f')}"
        )
    numbers.append(contraction_line({o: float(s.iloc[-1]) for o, s in curves_by_objective.items()}, gamma))
    return Claim(
        "emergence_diagonality",
        "Emergence: attention becomes increasingly diagonal (mass on the query's own state) during training.",
        diagonality_run(seeds, n_tasks),
        "holds for an objective when the paired 95% t interval over seeds of (last − first) lies above 0.",
        conditional(holds, _objectives),
        numbers,
        to_json(
            DiagonalityData(
                seeds,
                {_objective(c): v for c, v in change.items()},
                {o: Curve(s.index.tolist(), s.tolist()) for o, s in curves_by_objective.items()},
            )
        ),
        "emergence_diagonality",
    )


def signature(results: pd.DataFrame) -> Claim:
    """Counted per seed (a seed has the signature when every layer has it): a tied model's layers are one weight,
    so its layers are not independent draws."""
    done = results[results[STATUS] == "done"]
    done = done[done[SIGNATURE_MATCH].notna()] if SIGNATURE_MATCH in done else done.iloc[:0]
    counts = {}
    for c, part in done.groupby("condition", sort=False):
        per_seed = part.groupby(CELL, sort=False)[SIGNATURE_MATCH].agg(lambda x: bool(x.astype(bool).all()))
        counts[c] = (int(per_seed.sum()), len(per_seed))
    return signature_claim(counts)


def signature_claim(counts: dict[str, tuple[int, int]]) -> Claim:
    """The signature row from ``{condition: (seeds with TD's signs in every layer, seeds)}``."""
    holds, numbers, data = {}, [], {}
    for c, (k, n) in counts.items():
        fraction = proportion_interval(k, n)
        holds[c], data[c] = k == n, {"seeds_with_signature": k, "seeds": n, **fraction.to_dict()}
        numbers.append(
            f"{_objective(c)}: {k}/{n} seeds have TD's signs in every layer, {fraction.mean:.0%} "
            f"[{fraction.lo:.0%}, {fraction.hi:.0%}] (95% Wilson interval over seeds)"
        )
    return Claim(
        "emergence_signature",
        "Emergence: the value row's weights on (reward, next value, current value) take TD's signs (+, +, −).",
        "The identifiable entries of each layer's value row, per seed (the same study); a seed counts when every "
        "layer has the signs (a tied model's layers share one weight, so seeds, not layers, are the sample).",
        "holds for an objective when every seed has the signs in every layer.",
        conditional(holds, _objectives),
        numbers,
        data,
    )


def _done_cells(results: pd.DataFrame, condition: str) -> pd.DataFrame:
    return results[(results[STATUS] == "done") & (results[CONDITION] == condition)].drop_duplicates("cell")


def _by_seeds(k: int, n: int) -> str:
    """Verdict of a rule checked per seed: every seed, none, or the count."""
    return HOLDS if n and k == n else FAILS if k == 0 else f"holds only in {k} of {n} seeds"


def iterated(results: pd.DataFrame, condition: str) -> Claim:
    cells = _done_cells(results, condition)
    best = cells[BEST_DEPTH].astype(float).to_numpy()
    k, n = int(cells[CONVERGES].astype(bool).sum()), len(cells)
    return Claim(
        "finding_iteration",
        "This project: the TD-trained layer is a convergent TD iteration (running it deeper than "
        "it was trained approaches v_π).",
        "The spectrum of the learned layer's map on state values (ρ(T) < 1 on every evaluation task), per seed, "
        "and the depth where its MSVE is lowest (`analyses.metrics.algorithm_id`).",
        "holds when every seed's last layer converges when iterated; fails when none does.",
        _by_seeds(k, n),
        [
            f"{k}/{n} seeds converge when iterated; best depth {t_interval(best).text('.1f')} "
            f"(trained depth {int(cells[TRAINED_DEPTH].iloc[0])})"
        ],
        {"converging_seeds": k, "seeds": n, "best_depth": t_interval(best).to_dict()},
    )


def constant_baseline(results: pd.DataFrame, condition: str, n_tasks: int) -> Claim:
    cells = _done_cells(results, condition)
    verdicts = cells[BEATS_CONSTANT]
    model = t_interval(cells[EVAL_MSVE].astype(float).to_numpy(), bounds=NONNEGATIVE)
    const = t_interval(cells[CONSTANT_MSVE].astype(float).to_numpy(), bounds=NONNEGATIVE)
    point_worse = int((cells[EVAL_MSVE].astype(float) > cells[CONSTANT_MSVE].astype(float)).sum())
    return constant_baseline_claim(
        model,
        const,
        int((verdicts == "lower").sum()),
        int((verdicts == "higher").sum()),
        len(cells),
        point_worse,
        n_tasks,
    )


def constant_baseline_claim(
    model: Interval, const: Interval, lower: int, higher: int, n: int, point_worse: int, n_tasks: int
) -> Claim:
    """The constant-baseline row from its counts: seeds significantly better (``lower``) and worse (``higher``)
    than the constant, of ``n``; ``point_worse`` seeds whose point estimate is worse; ``n_tasks`` per seed."""
    verdict = (
        HOLDS
        if n and lower == n
        else FAILS
        if n and higher == n
        else f"not shown: {lower} of {n} seeds significantly better, {higher} significantly worse, "
        f"{n - lower - higher} undecided"
    )
    sign_p = min(1.0, 2 * sum(math.comb(n, k) for k in range(max(point_worse, n - point_worse), n + 1)) / 2**n)
    return Claim(
        "finding_baseline",
        "This project: the TD-trained model beats the constant in-context predictor "
        "mean(R)/(1 − γ) (no attention, no training).",
        f"Per seed, the paired per-task MSVE difference model − constant on the {n_tasks} evaluation tasks "
        "(`analyses.metrics.baselines`).",
        "holds when every seed's paired 95% t interval (over tasks) lies below 0; fails when every seed's lies "
        "above 0; otherwise not shown, with the counts. The seed-level intervals below are over seeds only (the "
        "constant's is narrow because every seed is evaluated on the same tasks): they do not decide the rule.",
        verdict,
        [
            f"model MSVE {model.text('.3f')}, constant {const.text('.3f')} (over {n} seeds); {lower} seeds "
            f"significantly better, {higher} significantly worse, {n - lower - higher} undecided; the point "
            f"estimate is worse than the constant's in {point_worse} of {n} seeds (two-sided sign test p = "
            f"{sign_p:.3g})"
        ],
        {
            "model": model.to_dict(),
            "constant": const.to_dict(),
            "better": lower,
            "worse": higher,
            "seeds": n,
            "point_worse": point_worse,
            "n_tasks": n_tasks,
        },
    )


def depth_sampling(results: pd.DataFrame, fixed: str, sampled: str) -> Claim:
    def count(condition: str) -> tuple[int, int]:
        cells = _done_cells(results, condition)
        return int(cells[CONVERGES].astype(bool).sum()), len(cells)

    (k_fixed, n_fixed), (k, n) = count(fixed), count(sampled)
    return Claim(
        "finding_depth_sampling",
        "This project: training the tied layer at depths drawn each step makes it converge when iterated.",
        f"The quick preset with `--train-depths` ({sampled}) against its fixed depth ({fixed}), same seeds.",
        "holds when every depth-sampled seed's layer converges when iterated (ρ(T) < 1 on every task).",
        _by_seeds(k, n),
        [f"depth-sampled: {k}/{n} seeds converge; fixed depth: {k_fixed}/{n_fixed}"],
        {"sampled": [k, n], "fixed": [k_fixed, n_fixed]},
    )


def same_state_head(summaries: list[Summary], source: str) -> Claim:
    td = [s.circuit.max_td_kernel_correlation for s in summaries]
    tab = [s.circuit.max_tabular_kernel_correlation for s in summaries]
    return same_state_claim(tab, td, source, _td_head_itself(summaries))


def _td_head_itself(summaries: list[Summary]) -> Optional[list[float]]:
    """Per seed, the most TD-like head's own (tabular − softmax-TD) correlation; None where a summary lacks its
    heads."""
    out = []
    for s in summaries:
        heads = [h for h in (s.circuit.heads or []) if h.tabular_kernel_correlation is not None]
        if not heads:
            return None
        top = max(heads, key=lambda h: h.td_kernel_correlation)
        out.append(top.tabular_kernel_correlation - top.td_kernel_correlation)
    return out


def same_state_claim(tab: list[float], td: list[float], source: str, td_head: Optional[list[float]] = None) -> Claim:
    """The same-state row from each seed's largest correlation of any head with the tabular and the TD kernel
    (``td_head``: the most TD-like head's own tabular − TD correlation, a line beside it when known)."""
    tab_, td_ = np.asarray(tab), np.asarray(td)
    if len(tab) >= 2:
        diff = paired(tab_, td_)
        verdict = (
            HOLDS
            if diff.verdict == "higher"
            else FAILS
            if diff.verdict == "lower"
            else f"{FAILS} (undecided: the interval contains 0)"
        )
        text = f"tabular − softmax-TD correlation {diff.difference.text('.2f')}"
    else:
        verdict = f"{HOLDS if tab[0] > td[0] else FAILS} in the one seed measured"
        text = "one seed: no interval"
    return Claim(
        "finding_same_state_head",
        "This project: the standard transformer's attention is more same-state "
        "(tabular) than TD-like: its most same-state head correlates more with the tabular kernel than its most "
        "TD-like head with θ*'s softmax kernel (the two may be different heads). The model has no positional "
        "embedding, so it cannot see which state follows which: per-state averaging is within its reach, TD's "
        "bootstrap is not (docs/theory.md §10).",
        f"Per seed, the largest correlation of any head's pattern with each kernel ({source}).",
        "holds when the paired 95% t interval over seeds of (largest tabular − largest softmax-TD correlation) lies "
        "above 0 (with one seed, by the single value, said so).",
        verdict,
        [
            f"most same-state head {t_interval(tab_, bounds=COSINE).text('.2f')}, "
            f"most TD-like head {t_interval(td_, bounds=COSINE).text('.2f')} "
            f"({len(tab)} seed{'s' if len(tab) > 1 else ''}); {text}"
        ]
        + (
            [
                f"the most TD-like head itself, tabular − softmax-TD correlation: "
                f"{t_interval(td_head).text('+.2f') if len(td_head) >= 2 else f'{td_head[0]:+.2f} (one seed)'} "
                "(above 0: that head is closer to the same-state kernel)"
            ]
            if td_head
            else []
        ),
        {"tabular": list(tab), "td": list(td), **({"td_head_tabular_minus_td": list(td_head)} if td_head else {})},
    )
