"""The paper's claims about trained models, read from the studies the report ran (``results.csv``,
``curves.csv``): emergence of θ*'s weights and their size, kernel diagonality over training, the value
signature (this project's own findings are in ``claims.findings``). Every number is over seeds, with its
interval; every verdict by a rule."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import numpy as np
import pandas as pd

from ictd_interp.analyses.claims.claim import Claim, conditional
from ictd_interp.analyses.claims.figure_data import Curve, DiagonalityData, ObjectiveWeights, WeightsData
from ictd_interp.analyses.metrics.intervals import (
    COSINE,
    NONNEGATIVE,
    Interval,
    paired,
    proportion_interval,
    t_interval,
    welch,
)
from ictd_interp.analyses.studies.cells import DONE
from ictd_interp.analyses.studies.results import CELL, CONDITION, STATUS, STEP, curve_column
from ictd_interp.analyses.summary.store import build, to_json
from ictd_interp.analyses.summary.tables import summary_column

LEARNS = summary_column("in_context.learns_in_context")
COS_A = summary_column("metrics.cos_A")
COS_V = summary_column("metrics.cos_V")
DISCOUNT = summary_column("algorithm.layers.effective_discount")
SIGNATURE_MATCH = summary_column("metrics.signature_match")
DIAGONALITY = curve_column("kernel_diagonality_mean")

CLOSE = 0.9  # "close to θ*": both weight cosines' 95% intervals over seeds lie above this


def _per_cell(results: pd.DataFrame, column: str, how: str) -> pd.DataFrame:
    done = results[results[STATUS] == DONE]
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


def weights(results: pd.DataFrame, seeds: int, forward: str = "positional") -> Claim:
    """Emergence judged in function space: the seeds that learn in context
    (``ictd_interp.analyses.metrics.in_context``), per
    objective; each objective's weight cosines are printed beside the other objectives' (their null: a cosine near 1
    that a non-TD objective reaches too says nothing about TD). ``forward``: how the study trained them."""
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
    through = " through the state-space forward (the same function)" if forward == "state-space" else ""
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
        run=f"The `quick` preset trained with each objective{through}, {seeds} seeds each (a study on Ray: "
        "`analyses/claims` runs it into the report folder's studies/objectives); each seed judged on its own held-out "
        "tasks.",
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
    change, holds, numbers, curves_by_objective, deltas = {}, {}, [], {}, {}
    for c, part in per_cell.groupby("condition", sort=False):
        curves_by_objective[_objective(c)] = part.groupby(STEP)[DIAGONALITY].mean()
        first, last = part.sort_values(STEP).groupby(CELL)[DIAGONALITY].agg(["first", "last"]).to_numpy(float).T
        change[c] = paired(last, first)
        holds[c] = change[c].verdict == "higher"
        deltas[c] = last - first
        numbers.append(
            f"{_objective(c)}: diagonality {t_interval(first).text('.3f')} at step 0 → "
            f"{t_interval(last).text('.3f')} at "
            f"the end; change {change[c].difference.text('.3f')}"
        )
    numbers.append(contraction_line({o: float(s.iloc[-1]) for o, s in curves_by_objective.items()}, gamma))
    specific, line = diagonality_specificity(deltas)
    numbers.append(line)
    return Claim(
        "emergence_diagonality",
        "Emergence: attention becomes increasingly diagonal (mass on the query's own state) during training.",
        diagonality_run(seeds, n_tasks),
        "holds for an objective when the paired 95% t interval over seeds of (last − first) lies above 0; specific "
        f"to TD when the td objective's change exceeds every other objective's by more than {SPECIFIC_DIAGONALITY} "
        "(the lower end of the Welch 95% interval of the difference of mean changes), else not specific to TD.",
        conditional(holds, _objectives) + specific,
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


SPECIFIC_DIAGONALITY = 0.05  # TD's diagonality change must exceed every non-TD objective's by this much


def diagonality_specificity(deltas: dict[str, np.ndarray]) -> tuple[str, str]:
    """``(verdict suffix, numbers line)``: is the growth of diagonality specific to the TD objective? The Welch 95%
    interval of (td's mean change − each other objective's) against ``SPECIFIC_DIAGONALITY``."""
    td = next((c for c in deltas if _objective(c) == "td"), None)
    others = [c for c in deltas if c != td]
    if td is None or not others:
        return "", "specificity: no td objective and contrast to compare"
    gaps = {c: welch(deltas[td], deltas[c]) for c in others}
    specific = all(g.lo > SPECIFIC_DIAGONALITY for g in gaps.values())
    text = "; ".join(f"td − {_objective(c)} {g.text('+.3f')}" for c, g in gaps.items())
    return ("; specific to TD" if specific else "; not specific to TD"), f"change of diagonality, {text} (Welch 95%)"


def signature(results: pd.DataFrame) -> Claim:
    """Counted per seed (a seed has the signature when every layer has it): a tied model's layers are one weight,
    so its layers are not independent draws."""
    done = results[results[STATUS] == DONE]
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
        "holds for an objective when every seed has the signs in every layer; specific to TD when the td objective "
        "holds and no other does (their 95% Wilson intervals over seeds apart), else not specific to TD.",
        conditional(holds, _objectives) + signature_specificity(counts),
        numbers,
        data,
    )


def signature_specificity(counts: dict[str, tuple[int, int]]) -> str:
    """``"; specific to TD"`` when td's Wilson interval of seeds with the signs lies above every other objective's,
    else ``"; not specific to TD"`` (empty without a td objective and a contrast)."""
    td = next((c for c in counts if _objective(c) == "td"), None)
    others = [c for c in counts if c != td]
    if td is None or not others:
        return ""
    low = proportion_interval(*counts[td]).lo
    return (
        "; specific to TD" if all(proportion_interval(*counts[c]).hi < low for c in others) else "; not specific to TD"
    )
