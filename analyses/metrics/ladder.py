"""The verdict ladder: does a trained model run TD on its context, or is it a stopped-early estimator? Its error
across context lengths and depths, against the strongest in-context estimators on the same contexts
(docs/theory.md §7b).

One set of held-out tasks (``LADDER_TASKS`` MRPs and features, one trajectory each, drawn once at the longest
length) is cut to every context length ``n`` of the ladder (the trained ``n``, then ``LONGER`` where the
architecture allows): the same MRPs at every ``n``, so differences across ``n`` are paired per task. At each ``n``
the model runs at ``DEPTHS`` times its trained depth (a tied model repeats its layer, a per-layer one its last) and
``ESTIMATORS`` answer from the same context. The levels, each with its rule (paired 95% t intervals over tasks):

* **learns in context** — today's verdict (``baselines.REQUIRED``): below the constant and first-visit Monte Carlo at
  the trained ``n`` and depth.
* **beats Monte Carlo** — and, at the trained depth and every ``n`` of the ladder, below first-visit *and*
  every-visit Monte Carlo.
* **runs TD** — learns in context, and (a) at every ``n`` running deeper never takes the error past both its own and
  CE's: at each depth multiple either the per-task change from the trained depth has its upper end at most ``FLAT``
  times the trained depth's MSVE, or the excess over CE has its upper end at most ``CE_MARGIN`` times CE's MSVE (a
  model that runs TD approaches CE as it runs deeper, and on short contexts it may approach it from below, where
  stopping early shrinks the estimate toward the value level); (b) the error
  falls as ``n`` grows (at the deepest depth, each step of ``n`` below 0); (c) at the longest
  ``n`` and the deepest depth the excess over the tabular TD fixed point of the context (CE, the limit of softmax
  TD) has its upper end at most ``CE_MARGIN`` times CE's MSVE.

**The top rung** (no level rests on it): the Bayes-optimal estimate under the training prior, the posterior mean of
``v_pi`` given the context (``bayes``; Boyan chains only), beside CE in every rung, and each rung's share of the gap
from the constant to it that the model closes, ``(constant − model) / (constant − Bayes)`` per task set, with a
delta-method 95% interval: 1 would be the best any estimator can do on these contexts in expectation; CE's own share
is printed beside it.

A stopped-early estimator passes the first level and fails (a): its error rises 3-8x run deeper, and its limit, CE
with a discount other than γ, is worse than the constant. θ* of 12 layers fails the first level at n = 30 and passes
(a)-(c): run deeper it reaches CE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from ictd_interp.analyses.metrics import baselines, bayes
from ictd_interp.analyses.metrics.baselines import error_parts
from ictd_interp.analyses.metrics.intervals import Interval, Paired, paired, ratio_interval, t_interval
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.models.registry import HookedModel, holds_theta_star
from ictd_interp.models.stylised.state_space import state_space_unavailable
from ictd_interp.tasks.sampling import TaskBatch, sample_from
from ictd_interp.training.evaluation import DETAIL

LONGER = (100, 400)  # context lengths past the trained one
POSITIONAL_MAX_N = 100  # longest n run through the positional forward (cost n^2 per layer); the state space: any
DEPTHS = (1, 2, 4, 16)  # multiples of the trained depth
FLAT = 0.05  # "does not rise": the change's upper end at most 5% of the trained depth's MSVE
CE_MARGIN = 0.5  # "near CE": the excess over CE's MSVE at most 50% of it, at the longest n and deepest depth
LADDER_TASKS = 256
ESTIMATORS: dict[str, Callable[[TaskBatch, float], Tensor]] = {
    "constant": baselines.constant,
    "first_visit_mc": baselines.first_visit_mc,
    "tabular_mc": baselines.tabular_mc,
    "lstd_bias": baselines.lstd_bias,
    "tabular_td": baselines.td_fixed_point_states,  # CE, solved on the states: any n
}
MC = ("first_visit_mc", "tabular_mc")
CE = "tabular_td"
TOP = "bayes"  # the top rung, where the training prior has a posterior (bayes.available)
SHORT = {
    "constant": "constant",
    "first_visit_mc": "first-visit MC",
    "tabular_mc": "every-visit MC",
    "lstd_bias": "LSTD + bias",
    "tabular_td": "CE (tabular TD)",
    TOP: "Bayes",
}
DRAWN = ("constant", "tabular_mc", CE, TOP)  # the estimators the ladder's figure draws beside the model
LEVELS = ("does not learn in context", "learns in context", "beats Monte Carlo", "runs TD")
UNDECIDED = "undecided"  # the first level's sample cannot tell (``in_context``): no level is claimed, none denied


@dataclass(kw_only=True)
class Rung:
    """One context length: the model's MSVE at each depth, every estimator's, and the paired comparisons."""

    n: int
    depths: list[int]
    msve: list[Interval]  # the model at each depth
    estimators: dict[str, Interval]
    minus_estimator: dict[str, Paired]  # model at the trained depth − estimator
    change_with_depth: list[Paired]  # MSVE(depth) − MSVE(trained depth), for depths[1:]
    rises_with_depth: bool  # past both its trained depth's error (+FLAT) and CE's neighbourhood (+CE_MARGIN)
    beats_mc: bool
    deepest_minus_ce: Paired
    # the share of the gap from the constant to Bayes closed: by the model at its trained depth, at its deepest, by CE
    gap_closed: Optional[Interval] = None
    gap_closed_deepest: Optional[Interval] = None
    gap_closed_ce: Optional[Interval] = None


@dataclass(kw_only=True)
class Ladder:
    """The model's ladder (this module's docstring): its level, the conditions it rests on, every rung."""

    level: str
    learns_in_context: bool
    beats_mc: bool
    flat_with_depth: bool
    falls_with_context: bool
    near_ce: bool
    n_tasks: int
    context_change: list[Paired]  # MSVE(n_{i+1}) − MSVE(n_i) at the deepest depth
    rungs: list[Rung] = field(metadata=DETAIL)
    # at the trained n, per depth multiple ("2x", "4x", "16x"): falls | flat | rises | undecided (``depth_verdict``)
    with_depth: dict[str, str] = field(default_factory=dict)
    msve_with_depth: dict[str, float] = field(default_factory=dict)  # at the trained n, "1x" ... "16x"
    baselines: dict[str, float] = field(default_factory=dict)  # at the trained n, each estimator's MSVE on these tasks
    # at the trained n: Bayes's and CE's MSVE and the gap closed (``gap_closed``); empty without the top rung
    top: dict[str, float] = field(default_factory=dict)
    no_top: Optional[str] = None  # why the ladder has no top rung (``bayes.available``)
    rule: str = (
        "levels: learns in context (below the constant and first-visit MC at the trained n and depth); beats Monte "
        "Carlo (also below first-visit and every-visit MC at every n, trained depth); runs TD (learns in context, "
        f"deeper never takes the error more than {FLAT:.0%} above its own and more than {CE_MARGIN:.0%} above CE's at "
        f"any n, the error at {DEPTHS[-1]}x depth falls with "
        f"n, and at the longest n and {DEPTHS[-1]}x depth the excess over CE is at most {CE_MARGIN:.0%} of CE's "
        "MSVE); paired 95% t intervals over tasks"
    )


def ladder_lengths(model: HookedModel, trained_n: int) -> list[int]:
    """The trained ``n`` and the ``LONGER`` ones this model can take (positions, and the positional forward's cost)."""
    longest = None if _state_space(model) else POSITIONAL_MAX_N
    out = [trained_n]
    for n in LONGER:
        if n > trained_n and (longest is None or n <= longest) and _fits(model, n):
            out.append(n)
    return out


def _fits(model: HookedModel, n: int) -> bool:
    try:
        model.cfg.check_positions(n + 1)
    except ValueError:
        return False
    return True


def _state_space(model: HookedModel) -> bool:
    return holds_theta_star(model) and state_space_unavailable(model.cfg) is None


def prefix(tasks: TaskBatch, n: int) -> TaskBatch:
    """The same tasks with only the first ``n`` transitions of their trajectories."""
    return TaskBatch(tasks.mrp, tasks.features, tasks.states[:, : n + 1])


@torch.no_grad()
def model_values(model: HookedModel, tasks: TaskBatch, depth: int) -> Tensor:
    """The model's value row at ``depth``: the exact state-space forward where it applies, else the positional one."""
    from ictd_interp.analyses.metrics.extrapolation import values_at_depth

    if _state_space(model):
        return model.state_space_values(tasks, depth=depth)
    return values_at_depth(model, tasks, depth)


def estimators_for(dist: TaskDistribution) -> dict[str, Callable[[TaskBatch, float], Tensor]]:
    """``ESTIMATORS``, and the top rung where the family's prior has a posterior."""
    top = {TOP: bayes.bayes_posterior_mean} if bayes.available(dist.family) is None else {}
    return ESTIMATORS | top


def gap_closed(err: np.ndarray, est_err: dict[str, np.ndarray]) -> Optional[Interval]:
    """``(constant − err) / (constant − Bayes)`` over the tasks (a ratio of means, its delta-method interval); None
    without the top rung."""
    if TOP not in est_err:
        return None
    return ratio_interval(est_err["constant"] - err, est_err["constant"] - est_err[TOP])


def rung(
    model: HookedModel, tasks: TaskBatch, gamma: float, estimators: Optional[dict[str, Callable]] = None
) -> tuple[Rung, np.ndarray]:
    """One context length of the ladder, and the model's per-task MSVE at the deepest depth; ``estimators``:
    ``ESTIMATORS`` unless given (``estimators_for``)."""
    trained = model.cfg.n_layers
    depths = [m * trained for m in DEPTHS]
    model_err = [error_parts(model_values(model, tasks, d), tasks)["msve"] for d in depths]
    est_err = {name: error_parts(fn(tasks, gamma), tasks)["msve"] for name, fn in (estimators or ESTIMATORS).items()}
    minus = {name: paired(model_err[0], err) for name, err in est_err.items()}
    change = [paired(err, model_err[0]) for err in model_err[1:]]
    band, near = FLAT * float(np.mean(model_err[0])), CE_MARGIN * float(np.mean(est_err[CE]))
    rises = any(
        not _below(c, band) and not _below(paired(err, est_err[CE]), near) for c, err in zip(change, model_err[1:])
    )
    found = Rung(
        n=tasks.states.shape[1] - 1,
        depths=depths,
        msve=[t_interval(err) for err in model_err],
        estimators={name: t_interval(err) for name, err in est_err.items()},
        minus_estimator=minus,
        change_with_depth=change,
        rises_with_depth=rises,
        beats_mc=all(minus[name].verdict == "lower" for name in MC),
        deepest_minus_ce=paired(model_err[-1], est_err[CE]),
        gap_closed=gap_closed(model_err[0], est_err),
        gap_closed_deepest=gap_closed(model_err[-1], est_err),
        gap_closed_ce=gap_closed(est_err[CE], est_err),
    )
    return found, model_err[-1]


def ladder(
    model: HookedModel, dist: TaskDistribution, seed: int, learns_in_context: Optional[bool], top: bool = True
) -> Ladder:
    """The ladder of ``model`` trained on ``dist`` (its trained ``n`` is ``dist.context_len``), on ``LADDER_TASKS``
    tasks drawn from ``seed``; ``learns_in_context`` is today's verdict (``in_context``), the first level (None: its
    sample cannot decide, and the level is ``UNDECIDED``); ``top`` False leaves the top rung out (no level rests on
    it; it is the ladder's dearest estimator)."""
    lengths = ladder_lengths(model, dist.context_len)
    longest = sample_from(dist, LADDER_TASKS, seed=seed, length=max(lengths))
    estimators = estimators_for(dist) if top else ESTIMATORS
    rungs, deepest_err = zip(*(rung(model, prefix(longest, n), dist.gamma, estimators) for n in lengths))
    context_change = [paired(b, a) for a, b in zip(deepest_err, deepest_err[1:])]
    last, first = rungs[-1], rungs[0]
    ce_msve = last.estimators[CE].mean
    conditions = {
        "beats_mc": all(r.beats_mc for r in rungs),
        "flat_with_depth": not any(r.rises_with_depth for r in rungs),
        "falls_with_context": all(c.verdict == "lower" for c in context_change),
        "near_ce": _below(last.deepest_minus_ce, CE_MARGIN * ce_msve),
    }
    return Ladder(
        level=level(learns_in_context, **conditions),
        learns_in_context=bool(learns_in_context),
        **conditions,
        n_tasks=LADDER_TASKS,
        context_change=context_change,
        with_depth={
            f"{m}x": depth_verdict(c.difference, FLAT * first.msve[0].mean)
            for m, c in zip(DEPTHS[1:], first.change_with_depth)
        },
        msve_with_depth={f"{m}x": i.mean for m, i in zip(DEPTHS, first.msve)},
        baselines={name: i.mean for name, i in first.estimators.items()},
        top=top_of(first),
        no_top=bayes.available(dist.family),
        rungs=list(rungs),
    )


def top_of(r: Rung) -> dict[str, float]:
    """The top rung's numbers at one context length, flat (what study tables read)."""
    if r.gap_closed is None:
        return {}
    return {
        "bayes": r.estimators[TOP].mean,
        "ce": r.estimators[CE].mean,
        "gap_closed": r.gap_closed.mean,
        f"gap_closed_{DEPTHS[-1]}x": r.gap_closed_deepest.mean,
        "gap_closed_ce": r.gap_closed_ce.mean,
    }


def depth_verdict(change: Interval, band: float) -> str:
    """The change of MSVE run deeper (per task, its t interval) against ``±band``: ``falls`` / ``rises`` when the
    interval lies below ``-band`` / above ``+band``, ``flat`` when it lies within, else ``undecided``; a non-finite
    error ``rises``."""
    if change.n_nonfinite:
        return "rises"
    if change.hi < -band:
        return "falls"
    if change.lo > band:
        return "rises"
    return "flat" if change.lo >= -band and change.hi <= band else "undecided"


def _below(diff: Paired, bound: float) -> bool:
    return not diff.difference.n_nonfinite and diff.difference.hi <= bound


def level(
    learns_in_context: Optional[bool], beats_mc: bool, flat_with_depth: bool, falls_with_context: bool, near_ce: bool
) -> str:
    """The highest level whose conditions hold (this module's docstring); "runs TD" need not beat Monte Carlo at the
    trained depth (θ* of 12 layers does not at n = 100: it gets there deeper). ``learns_in_context`` None: the first
    level's sample cannot decide, ``UNDECIDED``."""
    if learns_in_context is None:
        return UNDECIDED
    if not learns_in_context:
        return LEVELS[0]
    if flat_with_depth and falls_with_context and near_ce:
        return LEVELS[3]
    return LEVELS[2] if beats_mc else LEVELS[1]


def ladder_table(lad: Optional[Ladder]) -> list[str]:
    """summary.md's ladder: one row per context length, the model at each depth beside every estimator."""
    if lad is None:
        return []
    first = lad.rungs[0]
    names = list(first.estimators)
    top = first.gap_closed is not None
    heads = [f"model ×{m}" for m in DEPTHS] + [SHORT[name] for name in names]
    heads += ["gap closed ×1", f"gap closed ×{DEPTHS[-1]}", "CE's gap closed"] if top else []
    lines = ["| n | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for r in lad.rungs:
        cells = [f"{i.mean:.3g}" for i in r.msve] + [f"{r.estimators[name].mean:.3g}" for name in names]
        cells += [g.text(".2f") for g in (r.gap_closed, r.gap_closed_deepest, r.gap_closed_ce)] if top else []
        lines.append(f"| {r.n} | " + " | ".join(cells) + " |")
    return lines + [
        "",
        f"MSVE on the ladder's own draw of {lad.n_tasks} held-out tasks, drawn once at n = {lad.rungs[-1].n} and cut "
        f"to each n (the same MRPs; not the tasks of the sections that name another sample); model ×k: run to k × "
        f"{first.depths[0]} layers."
        + (
            " Bayes: the posterior mean of v under the training prior, the best any estimator can do on these "
            "contexts in expectation; gap closed: (constant − MSVE) / (constant − Bayes's MSVE), 95% delta-method "
            "interval over tasks."
            if top
            else f" No Bayes column: {lad.no_top}."
            if lad.no_top
            else ""
        ),
    ]


def ladder_sentence(lad: Ladder) -> str:
    """The level in words, with the numbers that decide it: the first rung where deeper raises the error, the first
    where a Monte Carlo estimator wins, and the deepest error at the longest n beside CE's."""
    parts = []
    rises = next((r for r in lad.rungs if r.rises_with_depth), None)
    if rises is not None:
        parts.append(
            f"run to {rises.depths[-1]} layers its MSVE at n = {rises.n} goes {rises.msve[0].mean:.3g} → "
            f"{rises.msve[-1].mean:.3g} against CE's {rises.estimators[CE].mean:.3g} (it rises with depth, past CE)"
        )
    loses = next((r for r in lad.rungs if not r.beats_mc), None)
    if loses is not None:
        mc = min(MC, key=lambda name: loses.estimators[name].mean)
        parts.append(
            f"at n = {loses.n} {SHORT[mc]} scores {loses.estimators[mc].mean:.3g} against its {loses.msve[0].mean:.3g}"
        )
    last = lad.rungs[-1]
    parts.append(
        f"at n = {last.n} and {last.depths[-1]} layers its MSVE is {last.msve[-1].mean:.3g} against CE's "
        f"{last.estimators[CE].mean:.3g} (excess {last.deepest_minus_ce.difference.text('+.3g')})"
        + (f" and Bayes's {last.estimators[TOP].mean:.3g}" if TOP in last.estimators else "")
    )
    if first_gap := lad.rungs[0].gap_closed:
        r = lad.rungs[0]
        parts.append(
            f"at n = {r.n} it closes {first_gap.text('.2f')} of the gap from the constant to Bayes (CE: "
            f"{r.gap_closed_ce.mean:.2f})"
        )
    return f"Ladder (its own draw of {lad.n_tasks} tasks): **{lad.level}** — " + "; ".join(parts) + "."


def ladder_brief(lad: Ladder) -> str:
    """The level and the numbers it ends on, for one console line: at the longest ``n`` and the deepest depth, the
    model's MSVE beside every-visit Monte Carlo's and CE's."""
    last = lad.rungs[-1]
    return (
        f"{lad.level} (n = {last.n}, {last.depths[-1]} layers: MSVE {last.msve[-1].mean:.3g}; every-visit MC "
        f"{last.estimators['tabular_mc'].mean:.3g}, CE {last.estimators[CE].mean:.3g})"
    )
