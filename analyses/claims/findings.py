"""This project's findings about trained models, beside the paper's claims (``claims.trained``): the learned
layer iterated past its depth, the constant baseline, depth-sampled training and the standard architecture's
same-state head. Every number is over seeds, with its interval; every verdict by a rule."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import pandas as pd

from ictd_interp.analyses.claims.claim import FAILS, HOLDS, Claim
from ictd_interp.analyses.metrics.draws import draw_seed
from ictd_interp.analyses.metrics.intervals import (
    COSINE,
    NONNEGATIVE,
    Interval,
    paired,
    proportion_interval,
    t_interval,
)
from ictd_interp.analyses.metrics.ladder import CE, FLAT, LEVELS, ladder
from ictd_interp.analyses.studies.cells import DONE
from ictd_interp.analyses.studies.results import CONDITION, STATUS
from ictd_interp.analyses.summary.sections import Summary
from ictd_interp.analyses.summary.tables import summary_column

BEATS_CONSTANT = summary_column("baselines.estimators.constant.model_minus_baseline.verdict")
CONSTANT_MSVE = summary_column("baselines.estimators.constant.msve.mean")
EVAL_MSVE = summary_column("metrics.eval_msve")
LEVEL = summary_column("in_context.level")
ITERATED = ("4x", "16x")  # the depth multiples the iterated row reads
WITH_DEPTH = {m: summary_column(f"in_context.ladder.with_depth.{m}") for m in ITERATED}
MSVE_WITH_DEPTH = {m: summary_column(f"in_context.ladder.msve_with_depth.{m}") for m in ("1x", *ITERATED)}
RUNS_TD = LEVELS[3]


def _done_cells(results: pd.DataFrame, condition: str) -> pd.DataFrame:
    return results[(results[STATUS] == DONE) & (results[CONDITION] == condition)].drop_duplicates("cell")


def iterated(results: pd.DataFrame, condition: str) -> Claim:
    cells = _done_cells(results, condition)
    verdicts = {m: cells.get(WITH_DEPTH[m], pd.Series(dtype=object)).tolist() for m in ITERATED}
    msve = {
        m: cells.get(MSVE_WITH_DEPTH[m], pd.Series(dtype=float)).astype(float).to_numpy() for m in ("1x", *ITERATED)
    }
    return iterated_claim(verdicts, msve, condition)


# The iterated rows on shipped models of the recipes that run TD: claim id -> (the recipe, its budget field)
SHIPPED_ITERATED = {
    "finding_iteration_deep": ("the deep recipe", "deep_models"),
    "finding_iteration_deep_long": ("the deep-long recipe, n = 100", "deep_long_models"),
    "finding_iteration_deep_spectral": ("the deep-spectral recipe, n = 100, 48 layers", "deep_spectral_models"),
    "finding_iteration_horizon": ("the deep-g97-384 recipe, n = 100, γ = 0.97", "horizon_models"),
}


def iterated_shipped(names: tuple[str, ...], claim_id: str = "finding_iteration_deep") -> Claim:
    """The iterated row on shipped models of one recipe (``SHIPPED_ITERATED``): each one's ladder at its trained n,
    on the ladder's own draw of its evaluation seed (the tasks of its card and ``analyze``); its verdicts at 4x and
    16x its depth, as ``iterated`` reads a study's."""
    from ictd_interp.analyses.analyze import resolve

    verdicts: dict[str, list[str]] = {m: [] for m in ITERATED}
    msve: dict[str, list[float]] = {m: [] for m in ("1x", *ITERATED)}
    ce: list[float] = []
    for name in names:
        model, config, _, _ = resolve(name)
        lad = ladder(model, config.tasks, draw_seed(config.eval_seed, "ladder"), learns_in_context=None, top=False)
        for m in ITERATED:
            verdicts[m].append(lad.with_depth[m])
        for m in msve:
            msve[m].append(lad.msve_with_depth[m])
        ce.append(lad.baselines[CE])
    arrays = {m: np.asarray(v, dtype=float) for m, v in msve.items()}
    recipe = SHIPPED_ITERATED[claim_id][0]
    claim = iterated_claim(verdicts, arrays, f"{recipe}: " + ", ".join(names), claim_id)
    claim.numbers.append(f"CE on the same tasks: {t_interval(np.asarray(ce), bounds=NONNEGATIVE).text('.3f')}")
    return claim


def iterated_claim(
    verdicts: dict[str, list[str]], msve: dict[str, np.ndarray], condition: str, claim_id: str = "finding_iteration"
) -> Claim:
    """The iterated row from each seed's verdict at 4x and 16x its depth (``ladder.depth_verdict``, at the trained
    n) and the MSVE at each depth: holds when every seed falls or stays flat at both, fails when every seed rises at
    one of them, otherwise the counts."""
    n = len(verdicts[ITERATED[0]])
    ok = sum(all(verdicts[m][i] in ("falls", "flat") for m in ITERATED) for i in range(n))
    rising = sum(any(verdicts[m][i] == "rises" for m in ITERATED) for i in range(n))
    verdict = HOLDS if n and ok == n else FAILS if n and rising == n else f"not shown: {ok} of {n} seeds falls or flat"
    tallies = "; ".join(
        f"{m}: " + ", ".join(f"{v} {verdicts[m].count(v)}" for v in sorted(set(verdicts[m]))) for m in ITERATED
    )
    return Claim(
        claim_id,
        "This project: running the TD-trained layer deeper than it was trained does not make it worse (what a TD "
        "iteration does; a stopped-early estimator gets worse).",
        f"Per seed ({condition or 'the trained models'}), the MSVE on the verdict ladder's held-out tasks at the "
        f"trained context length, at {', '.join(ITERATED)} the trained depth against the trained depth's "
        "(`ictd_interp.analyses.metrics.ladder`).",
        f"per seed, the paired 95% t interval over tasks of MSVE(k × depth) − MSVE(depth): falls / rises when it lies "
        f"below / above ∓{FLAT:.0%} of the trained depth's MSVE, flat within; holds when every seed falls or is flat "
        "at 4x and 16x; fails when every seed rises at one of them.",
        verdict,
        [
            "MSVE over seeds: " + ", ".join(f"{m} {t_interval(msve[m], bounds=NONNEGATIVE).text('.3f')}" for m in msve),
            f"per-seed verdicts: {tallies}",
        ],
        {"seeds": n, "falls_or_flat": ok, "rises": rising, "verdicts": verdicts},
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
        "(`ictd_interp.analyses.metrics.baselines`).",
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
    def levels(condition: str) -> list[str]:
        return _done_cells(results, condition)[LEVEL].fillna("no verdict").tolist()

    return depth_sampling_claim(levels(fixed), levels(sampled), fixed, sampled)


def depth_sampling_claim(fixed: list[str], sampled: list[str], fixed_name: str, sampled_name: str) -> Claim:
    """The depth-sampling row from each seed's ladder level, depth-sampled against its fixed-depth control: holds
    when more sampled seeds run TD than fixed ones and the sampled share's Wilson interval lies above the fixed
    one's; fails when no more do; otherwise not shown."""
    k, n = fixed.count(RUNS_TD), len(fixed)
    k_s, n_s = sampled.count(RUNS_TD), len(sampled)
    share, share_s = proportion_interval(k, n), proportion_interval(k_s, n_s)
    verdict = HOLDS if k_s / n_s > k / n and share_s.lo > share.hi else FAILS if k_s / n_s <= k / n else "not shown"

    def tally(levels: list[str]) -> str:
        return ", ".join(f"{level} {levels.count(level)}" for level in sorted(set(levels)))

    return Claim(
        "finding_depth_sampling",
        "This project: training the tied layer at depths drawn each step makes it run TD (more seeds reach the "
        "ladder's 'runs TD' than at its fixed depth).",
        f"The quick preset with `--train-depths` ({sampled_name}) against its fixed depth ({fixed_name}), same seeds, "
        "each judged on the verdict ladder (`ictd_interp.analyses.metrics.ladder`).",
        "holds when the share of depth-sampled seeds that run TD is larger and its 95% Wilson interval lies above "
        "the fixed depth's; fails when it is not larger; otherwise not shown.",
        verdict,
        [
            f"depth-sampled: {k_s}/{n_s} run TD ({tally(sampled)}); fixed depth: {k}/{n} ({tally(fixed)})",
        ],
        {"sampled": [k_s, n_s], "fixed": [k, n], "sampled_levels": sampled, "fixed_levels": fixed},
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
