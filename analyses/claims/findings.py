"""This project's findings about trained models, beside the paper's claims (``claims.trained``): the learned
layer iterated past its depth, the constant baseline, depth-sampled training and the standard architecture's
same-state head. Every number is over seeds, with its interval; every verdict by a rule."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pandas as pd

from analyses.claims.claim import FAILS, HOLDS, Claim
from analyses.metrics.intervals import COSINE, NONNEGATIVE, Interval, paired, t_interval
from analyses.studies.results import CONDITION, STATUS
from analyses.summary.sections import Summary
from analyses.summary.tables import summary_column

BEATS_CONSTANT = summary_column("baselines.estimators.constant.model_minus_baseline.verdict")
BEST_DEPTH = summary_column("algorithm.extrapolation.best_depth")
CONSTANT_MSVE = summary_column("baselines.estimators.constant.msve.mean")
CONVERGES = summary_column("algorithm.extrapolation.converges")
EVAL_MSVE = summary_column("metrics.eval_msve")
TRAINED_DEPTH = summary_column("algorithm.extrapolation.trained_depth")


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
