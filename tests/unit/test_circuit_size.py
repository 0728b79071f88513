"""Faithfulness over circuit size (MIB's CPR and CMD) under three ablations, and node-level AUROC."""

import pytest
import torch

from ictd_interp.analyses.methods_benchmark.case_specs import CASES
from ictd_interp.analyses.methods_benchmark.cases import build_case
from ictd_interp.analyses.methods_benchmark.faithfulness import (
    ablated_outputs,
    areas,
    node_auroc,
    ranked,
    recovered,
    size_curve,
)
from ictd_interp.analyses.methods_benchmark.graph import build_graph
from ictd_interp.analyses.methods_benchmark.methods import runs


@pytest.fixture(scope="module")
def distractors():
    return build_case(CASES["distractors"], 0)


def test_the_areas_on_a_curve_worked_by_hand():
    assert areas([0.0, 0.5, 1.0], [0.0, 0.5, 1.0]) == (0.5, 0.5)
    assert areas([0.0, 0.25, 1.0], [0.0, 1.0, 1.0]) == (0.875, 0.125)  # a curve reaching 1 at a quarter
    assert areas([0.0, 1.0], [1.5, 1.5]) == (1.5, 0.5)  # above the full model counts against CMD too


def test_the_true_edges_first_give_the_full_model_once_all_are_kept_and_last_give_nothing(distractors):
    """On ``distractors`` every false edge has no effect: keeping the 9 true edges (of 118) gives the full model's
    answers exactly, at every later size, under every ablation; the reversed ranking keeps nothing of it until
    the true edges come in."""
    case, r = distractors, runs(distractors)
    edges = build_graph(case.model).edges
    true_first = sorted(edges, key=lambda e: e not in case.truth.edges)
    for ablation in ("resample", "mean", "zero"):
        good, bad = size_curve(case, r, true_first, ablation), size_curve(case, r, true_first[::-1], ablation)
        assert good.kept[0] == 0 and good.faithfulness[0] == 0.0 and good.kept[-1] == 118
        assert all(f == pytest.approx(1.0, abs=1e-12) for k, f in zip(good.kept, good.faithfulness) if k >= 9)
        assert all(f == pytest.approx(0.0, abs=1e-12) for k, f in zip(bad.kept, bad.faithfulness) if k <= 109)
        assert good.cmd < 0.1 < 0.9 < bad.cmd and good.cpr > 0.9 > 0.1 > bad.cpr


def test_the_ablations_are_what_they_say(distractors):
    r = runs(distractors)
    mean, zero = ablated_outputs(r, "mean"), ablated_outputs(r, "zero")
    node = next(iter(r.clean))
    torch.testing.assert_close(mean[node][3], r.clean[node].mean(0), rtol=0, atol=1e-15)
    assert float(zero[node].abs().max()) == 0.0 and ablated_outputs(r, "resample") is r.corrupted
    with pytest.raises(ValueError, match="ablation: must be one of"):
        ablated_outputs(r, "noise")


def test_node_auroc_ranks_senders_by_their_best_edge(distractors):
    edges = build_graph(distractors.model).edges
    perfect = {e: float(e in distractors.truth.edges) for e in edges}
    assert node_auroc(distractors, perfect) == 1.0
    assert node_auroc(distractors, {e: 0.0 for e in edges}) == 0.5  # all tied: chance


def test_the_graded_cases_planted_edges_are_a_circuit_and_no_leak_edge_is_silent():
    """``graded``: the planted edges alone reach faithfulness ≥ 1 − ε by joint ablation and fall below it without
    any one of them; every edge out of a leak head into a TD head or the output has a non-zero effect, smaller
    than every true edge's (into a silent head, which writes nothing, an edge has none)."""
    from ictd_interp.analyses.methods_benchmark.case_specs import CaseSpec
    from ictd_interp.analyses.methods_benchmark.cases import problem_of
    from ictd_interp.analyses.methods_benchmark.faithfulness import EPSILON, circuit_check
    from ictd_interp.analyses.methods_benchmark.methods import edge_patching

    case = build_case(CASES["graded"], 0)
    joint, less_one = circuit_check(case)
    assert joint >= 1 - EPSILON > less_one and joint < 1 - 1e-6
    effects = edge_patching(problem_of(case)).scores
    leaks = [e for e in effects if case.truth.roles.get(e[0]) == "leak" and case.truth.roles.get(e[1]) != "silent"]
    assert len(leaks) == 3 * 4 + (3 * 1 + 3 * 2 + 3 * 3) * 4  # to the output; to every later head but the silent
    assert min(effects[e] for e in leaks) > 0 and max(effects[e] for e in leaks) < min(
        effects[e] for e in case.truth.edges
    )
    with pytest.raises(ValueError, match="leak heads need a leak_scale > 0"):
        CaseSpec("x", leak_heads=2)


def test_the_recovered_share_is_signed_and_ties_never_help():
    """f by hand: a circuit that moves twice as far as the full model along its effect recovers 2, one that moves
    the other way −1; then CMD is not 1 − CPR. Equal scores rank the false edges first."""
    none, full = torch.tensor([1.0, 1.0]), torch.tensor([2.0, 1.0])
    assert recovered(torch.tensor([3.0, 1.0]), full, none) == 2.0
    assert recovered(torch.tensor([0.0, 5.0]), full, none) == -1.0
    cpr, cmd = areas([0.0, 0.5, 1.0], [0.0, 2.0, 1.0])
    assert (cpr, cmd) == (1.25, 0.75) and cmd != 1 - cpr
    edges = [("embed", "a"), ("embed", "b"), ("a", "out")]
    assert ranked(dict.fromkeys(edges, 0.0), edges, frozenset({("embed", "a")})) == [edges[1], edges[2], edges[0]]
    with pytest.raises(ValueError, match="nothing to recover"):
        recovered(full, full, full)
