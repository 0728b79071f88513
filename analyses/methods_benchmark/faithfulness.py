"""Faithfulness over circuit size (MIB's CPR and CMD) under three ablations, and node-level rankings.

For an edge ranking, ``C_k`` is its top ``k`` edges; among equal scores the false edges come first (a tie never
helps a method: a constant ranking scores as the worst order, never as the graph's order happens to fall). Every
edge outside ``C_k`` carries its sender's *ablated* output: ``resample`` (the sender's output on the corrupted
tasks, other MRPs), ``mean`` (its mean output over the clean tasks, per position) or ``zero``. With ``p_C`` the
query predictions over the tasks, ``p_N`` the full model's and ``p_0`` those with every edge ablated, the share
of the full model's effect the circuit recovers is the least-squares coefficient

    f(C) = <p_C − p_0, p_N − p_0> / ||p_N − p_0||²      (1: the full model's answers; 0: none kept),

the regression counterpart of MIB's normalised metric ``(m(C) − m(∅)) / (m(N) − m(∅))``: signed, above 1 when the
circuit overshoots the full model along its effect, below 0 when it moves the other way. Over the kept share
``s = k / E`` (``SHARES``: 21 points from 0 to 1, trapezoid rule)

    CPR = ∫ f ds   (higher is better),      CMD = ∫ |1 − f| ds   (lower is better, 0 only when f = 1 throughout),

MIB's circuit performance ratio and circuit–model distance (Mueller et al. 2025); they differ exactly where f
exceeds 1. A node's score is the largest score of the edges it sends; node AUROC ranks the nodes against the
circuit's (``GroundTruth.nodes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from ictd_interp.analyses.methods_benchmark.cases import Case
from ictd_interp.analyses.methods_benchmark.graph import Edge, build_graph, run_graph
from ictd_interp.analyses.methods_benchmark.methods import Runs, patched_prediction, runs
from ictd_interp.analyses.methods_benchmark.scores import auroc, check_tensor, faithfulness

ABLATIONS = ("resample", "mean", "zero")
SHARES = [k / 20 for k in range(21)]  # kept shares of the edges at which f is read
EPSILON = 0.025  # a circuit's faithfulness must reach 1 − EPSILON (docs/methods_benchmark.md, "circuit")


@dataclass(frozen=True)
class SizeCurve:
    """``faithfulness[i]`` of the top ``kept[i]`` edges under ``ablation``, and its areas ``cpr`` and ``cmd``."""

    ablation: str
    kept: list[int]
    faithfulness: list[float]
    cpr: float
    cmd: float


def ablated_outputs(r: Runs, ablation: str) -> dict[str, Tensor]:
    """Each node's output as an ablated edge carries it (module docstring)."""
    if ablation == "resample":
        return r.corrupted
    if ablation == "mean":
        return {u: x.mean(0, keepdim=True).expand_as(x) for u, x in r.clean.items()}
    if ablation == "zero":
        return {u: torch.zeros_like(x) for u, x in r.clean.items()}
    raise ValueError(f"ablation: must be one of {ABLATIONS}, got {ablation!r}")


def areas(shares: list[float], values: list[float]) -> tuple[float, float]:
    """``(CPR, CMD)``: the trapezoid areas under ``f`` and under ``|1 − f|`` over ``shares``."""
    cpr = cmd = 0.0
    for (a, fa), (b, fb) in zip(zip(shares, values), zip(shares[1:], values[1:])):
        cpr += (b - a) * (fa + fb) / 2
        cmd += (b - a) * (abs(1 - fa) + abs(1 - fb)) / 2
    return cpr, cmd


def ranked(scores: dict[Edge, float], edges: Sequence[Edge], true: frozenset[Edge]) -> list[Edge]:
    """``edges`` from the highest score down, false edges first among equal scores."""
    return sorted(edges, key=lambda e: (-scores[e], e in true))


def recovered(circuit: Tensor, full: Tensor, none: Tensor) -> float:
    """``f`` of the module docstring: the least-squares share of the full model's effect the circuit recovers."""
    for name, values in (("the circuit's predictions", circuit), ("the full model's", full), ("none kept", none)):
        check_tensor("faithfulness", name, values)
    effect = full - none
    scale = float(effect.pow(2).sum())
    if scale == 0.0:
        raise ValueError("faithfulness: ablating every edge gives the full model's answers; nothing to recover")
    return float(((circuit - none) * effect).sum()) / scale


@torch.no_grad()
def size_curve(case: Case, r: Runs, ranking: Sequence[Edge], ablation: str) -> SizeCurve:
    """Faithfulness of the top ``k`` edges of ``ranking`` at every share of ``SHARES``, under ``ablation``."""
    ablated = ablated_outputs(r, ablation)

    def kept(k: int) -> Tensor:
        return run_graph(case.model, case.clean.prompt, patched={e: ablated[e[0]] for e in ranking[k:]})[1]

    counts = [round(s * len(ranking)) for s in SHARES]
    predictions = {k: kept(k) for k in dict.fromkeys(counts)}  # each size once (small graphs repeat counts)
    values = [recovered(predictions[k], r.pred, predictions[0]) for k in counts]
    cpr, cmd = areas([k / len(ranking) for k in counts], values)
    return SizeCurve(ablation, counts, values, cpr, cmd)


def node_auroc(case: Case, scores: dict[Edge, float]) -> Optional[float]:
    """AUROC of the nodes ranked by the largest score of the edges each sends, against the circuit's nodes (None
    where every node is in the circuit, as in ``rotated``: nothing to rank against)."""
    best: dict[str, float] = {}
    for (u, _), value in scores.items():
        best[u] = max(best.get(u, -float("inf")), value)
    true = set(case.truth.nodes)
    return auroc(best, true) if set(best) - true else None


def size_scores(case: Case, r: Runs, scores: dict[Edge, float]) -> dict[str, Optional[float]]:
    """What ``EdgeScores`` keeps: node AUROC, CPR and CMD under resampling, and CMD under mean and zero
    ablation."""
    ranking = ranked(scores, build_graph(case.model).edges, case.truth.edges)
    curves = {a: size_curve(case, r, ranking, a) for a in ABLATIONS}
    return {
        "node_auroc": node_auroc(case, scores),
        "cpr": curves["resample"].cpr,
        "cmd": curves["resample"].cmd,
        "cmd_mean": curves["mean"].cmd,
        "cmd_zero": curves["zero"].cmd,
    }


@torch.no_grad()
def circuit_check(case: Case) -> tuple[float, float]:
    """The planted edges' faithfulness under joint (resample) ablation of every other edge, and the largest
    faithfulness left when any one of them is ablated too: the planted edges are a circuit at ``EPSILON`` when
    the first is at least ``1 − EPSILON`` and the second below it (no edge can go)."""
    r, edges, true = runs(case), build_graph(case.model).edges, case.truth.edges
    outside = set(edges) - true

    def kept(ablated: set[Edge]) -> float:
        return faithfulness(patched_prediction(case, r, ablated), r.pred, r.pred_corrupted)

    return kept(outside), max(kept(outside | {e}) for e in true)
