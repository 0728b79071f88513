"""The methods benchmark: the graph adapter against the hooked forward, the planted cases against θ*'s circuit,
the scores on cases worked by hand, the exact methods at the values they must have, and the command."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from ictd_interp.analyses.methods_benchmark import methods as M
from ictd_interp.analyses.methods_benchmark.case_specs import CASES, CaseSpec
from ictd_interp.analyses.methods_benchmark.cases import (
    build_case,
    circuit_source,
    counterfactual_labels,
    problem_of,
    variable_values,
)
from ictd_interp.analyses.methods_benchmark.evaluate import (
    CellResult,
    Cosines,
    DirectionScores,
    FeatureScores,
    VariableScores,
    interchange_r2,
    score_directions,
    score_edges,
    score_method,
)
from ictd_interp.analyses.methods_benchmark.graph import OUTPUT, build_graph, run_graph
from ictd_interp.analyses.methods_benchmark.report import (
    chance_difference,
    chance_verdict,
    direction_verdict,
    seeds_off,
    write_report,
)
from ictd_interp.analyses.methods_benchmark.run import BenchmarkBudget
from ictd_interp.analyses.methods_benchmark.scores import (
    MethodFailed,
    angle_degrees,
    auroc,
    average_precision,
    faithfulness,
    roc_curve,
)
from ictd_interp.analyses.metrics.intervals import t_interval
from ictd_interp.analyses.metrics.site_probes import residual_stack
from ictd_interp.models.standard.theta_star import standard_theta_star
from tests.conftest import make_standard


@pytest.fixture(scope="module")
def distractors():
    return build_case(CASES["distractors"], 0)


@pytest.mark.parametrize("overrides", [{}, {"layer_norm": False, "n_heads": 4, "d_head": 3}, {"d_mlp": 0}])
def test_the_graph_forward_is_the_hooked_forward(overrides):
    model = make_standard(**overrides)
    prompt = torch.randn(3, 9, model.cfg.d_prompt, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    prompt[..., -2:] = 0.0  # value rows are 0 at input
    out, pred = run_graph(model, prompt)
    assert (pred - model(prompt)[:, -1]).abs().max() <= 1e-12
    _, cache = model.run_with_cache(prompt)
    for h in range(model.cfg.n_heads):
        assert (out[f"a1.h{h}"] - cache["result", 1][:, :, h]).abs().max() <= 1e-12
    graph = build_graph(model)
    writers = 1 + model.cfg.n_layers * (model.cfg.n_heads + (0 if model.cfg.attn_only else 1))
    assert len(graph.nodes) == writers and sum(v == OUTPUT for _, v in graph.edges) == writers


@pytest.mark.parametrize("name", list(CASES))
def test_a_planted_case_computes_theta_stars_circuit_and_its_truth_holds(name):
    case = build_case(CASES[name], 1)
    assert case.spec.d_model == case.model.cfg.d_model and case.spec.solve  # what the report prints
    plain = standard_theta_star(circuit_source(case.spec, case.seed))  # θ*'s circuit, or the trained model's
    off = (case.model(case.clean.prompt) - plain(case.clean.prompt)).abs().max()
    if case.spec.leak_heads or case.spec.layer_norm:  # leaks, or the norm the junk moves: close, not equal
        assert 1e-4 < off < (0.05 if case.spec.leak_heads else 0.35)
    else:
        assert off <= 1e-10
    resid = residual_stack(case.model, case.held_out.prompt)
    values = variable_values(case, case.held_out)
    sites = ["blocks.0.hook_resid_pre"] + [f"blocks.{l}.hook_resid_post" for l in range(case.spec.n_layers)]
    for variable, direction in case.truth.directions.items():
        assert direction.norm().item() == pytest.approx(1.0, abs=1e-12)
        for site in case.truth.sites.get(variable, ()):  # none with leaks
            s = sites.index(site)
            assert (resid[s] @ direction - values[variable][s]).abs().max() <= 1e-10
    assert case.truth.edges <= set(build_graph(case.model).edges)
    value_heads = {f"a{layer}.h1" for layer in range(1, case.spec.n_layers)} if case.spec.split_td else set()
    assert case.truth.nodes == {"embed"} | {f"a{layer}.h0" for layer in range(case.spec.n_layers)} | value_heads


def test_exact_patching_sees_exactly_the_planted_edges_where_nothing_cancels(distractors):
    scores = M.edge_patching(problem_of(distractors)).scores
    false = [v for e, v in scores.items() if e not in distractors.truth.edges]
    assert max(false) <= 1e-12 and min(scores[e] for e in distractors.truth.edges) > 1e-3
    assert len(false) == 118 - 9
    row = score_edges(distractors, M.acdc(problem_of(distractors)))
    assert row.auroc == 1.0 and row.precision == 1.0 and row.recall == 1.0
    assert row.faithfulness == pytest.approx(1.0, abs=1e-10)


def test_cancelling_heads_fool_single_edge_patching():
    case = build_case(CASES["cancelling"], 0)
    scores = M.edge_patching(problem_of(case)).scores
    pair = [("embed", "a0.h2"), ("a0.h2", OUTPUT), ("a0.h3", OUTPUT)]
    assert all(scores[e] > 1e-3 for e in pair)  # one head of the pair alone changes the answer
    r = M.runs(case)
    both = M.patched_prediction(case, r, {("a0.h2", OUTPUT), ("a0.h3", OUTPUT)})
    assert (both - r.pred).abs().max() <= 1e-10  # the two together add nothing


def test_auroc_and_average_precision_on_cases_worked_by_hand():
    assert auroc({"a": 0.9, "b": 0.1}, {"a"}) == 1.0
    assert auroc({"a": 0.1, "b": 0.9}, {"a"}) == 0.0
    assert auroc({"a": 0.5, "b": 0.5}, {"a"}) == 0.5
    # two true (0.9, 0.7) against two false (0.8, 0.1): pairs won 1 + 1 + 0 + 1 = 3 of 4
    assert auroc({"t1": 0.9, "f1": 0.8, "t2": 0.7, "f2": 0.1}, {"t1", "t2"}) == 0.75
    # ranks T F T F: precision 1/1 at the first true, 2/3 at the second
    assert average_precision({"t1": 0.9, "f1": 0.8, "t2": 0.7, "f2": 0.1}, {"t1", "t2"}) == pytest.approx(5 / 6)
    assert average_precision({"t": 0.5, "f": 0.5}, {"t"}) == 0.5  # a tie counts against the method
    assert roc_curve({"t1": 0.9, "f1": 0.8, "t2": 0.7}, {"t1", "t2"}) == ([0.0, 0.0, 1.0, 1.0], [0.0, 0.5, 0.5, 1.0])
    with pytest.raises(ValueError, match="needs true and false"):
        auroc({"a": 1.0}, {"a"})


def test_angles_and_faithfulness_by_hand():
    assert angle_degrees(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0])) == pytest.approx(45.0)
    assert angle_degrees(torch.tensor([-2.0, 0.0]), torch.tensor([1.0, 0.0])) == pytest.approx(0.0)
    assert angle_degrees(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.0])) == pytest.approx(90.0)
    full, corrupted = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 0.0])
    assert faithfulness(torch.tensor([1.5, 1.5]), full, corrupted) == pytest.approx(0.75)
    assert faithfulness(full, full, corrupted) == 1.0 and faithfulness(corrupted, full, corrupted) == 0.0


def _cell(case: str, seed: int, angle: float, worst: float, mcc: float, chance: float) -> CellResult:
    direction = DirectionScores(
        {"value": VariableScores(angle, worst, 1.0, 1.0)},
        Cosines(["value @ blocks.0.hook_resid_post"], ["value"], [[0.9]]),
    )
    feature = lambda m: FeatureScores(m, 0.3, [m], 18, 36)  # noqa: E731
    return CellResult(
        case, seed, 10, 9, {"das": direction, "sae-features": feature(mcc), "random-dictionary": feature(chance)}
    )


def test_direction_and_feature_verdicts_follow_the_written_rules_on_cells_made_by_hand():
    # angles 1, 2, 3 degrees: mean 2, sd 1, t(0.975, 2) = 4.303, interval 2 +- 2.48 cut at 0 -> [0, 4.48] < 5: close
    close = [_cell("a", s, a, 2 * a, 0.8, 0.7) for s, a in enumerate((1.0, 2.0, 3.0))]
    assert direction_verdict(close, "a", "das", "value") == "close" and seeds_off(close, "a", "das", "value") == "0/3"
    # one seed at 30 degrees: mean 11, interval contains 5: undecided, one seed counted off
    mixed = close[:2] + [_cell("a", 2, 30.0, 80.0, 0.8, 0.7)]
    assert direction_verdict(mixed, "a", "das", "value") == "undecided"
    assert seeds_off(mixed, "a", "das", "value") == "1/3"
    # mean 4 below 5, but sd 4.36: interval 4 +- 10.8 crosses 5: undecided, not close; an angle of exactly 5 is off
    wide = [_cell("a", s, a, a, 0.8, 0.7) for s, a in enumerate((1.0, 2.0, 9.0))]
    assert direction_verdict(wide, "a", "das", "value") == "undecided"
    assert seeds_off(wide[:2] + [_cell("a", 2, 5.0, 5.0, 0.8, 0.7)], "a", "das", "value") == "1/3"
    nan = [_cell("a", s, a, a, 0.8, 0.7) for s, a in enumerate((1e-6, float("nan"), 1e-6))]
    assert direction_verdict(nan, "a", "das", "value") != "exact" and seeds_off(nan, "a", "das", "value") == "1/3"
    far = [_cell("a", s, a, a, 0.8, 0.7) for s, a in enumerate((40.0, 41.0, 42.0))]
    assert direction_verdict(far, "a", "das", "value") == "misses"
    exact = [_cell("a", s, 1e-6, 2e-6, 0.8, 0.7) for s in range(3)]
    assert direction_verdict(exact, "a", "das", "value") == "exact"
    # MCC less the random dictionary's, seed by seed: the baseline moves between seeds (0.5, 0.7, 0.9) and the
    # method sits 0.1, 0.12, 0.08 above it -> mean 0.1, sd 0.02, +- 0.0497: above chance (unpaired, the two sets of
    # scores overlap and could not decide)
    paired = [_cell("a", s, 1.0, 1.0, b + d, b) for s, (b, d) in enumerate(((0.5, 0.1), (0.7, 0.12), (0.9, 0.08)))]
    diff = chance_difference(paired, "sae-features", "a")
    assert diff.mean == pytest.approx(0.1) and diff.hi - diff.mean == pytest.approx(4.303 * 0.02 / 3**0.5, rel=1e-3)
    assert chance_verdict(diff) == "above chance" and chance_difference(paired, "random-dictionary", "a") is None
    noisy = [_cell("a", s, 1.0, 1.0, 0.8 + d, 0.8) for s, d in enumerate((0.1, -0.12, 0.05))]
    assert chance_verdict(chance_difference(noisy, "sae-features", "a")) == "not above chance"
    assert chance_verdict(chance_difference(paired[:1], "sae-features", "a")) == "no interval against chance"
    narrow = [
        replace(c, scores={**c.scores, "sae-features": replace(c.scores["sae-features"], latents=9)}) for c in paired
    ]  # fewer latents than the baseline: not compared
    assert chance_difference(narrow, "sae-features", "a") is None


def test_a_report_without_edge_methods_has_no_edge_section(tmp_path):
    cells = [_cell(c, s, 1.0 + s, 2.0 + s, 0.8 + 0.01 * s, 0.7) for c in ("rotated", "superposed") for s in range(3)]
    report = write_report(cells, BenchmarkBudget("tiny", seeds=3, n_tasks=8), tmp_path).read_text()
    assert "## Edge methods" not in report and "roc.png" not in report and "| rotated | value |" in report
    assert "| sae-features | superposed | 18 / 36 | 0.810 [" in report and "**partial; above chance**" in report
    assert (tmp_path / "figures" / "directions_das.png").exists() and not (tmp_path / "figures" / "roc.png").exists()


def test_a_random_ranking_scores_one_half_within_its_interval(distractors):
    values = [
        auroc(M.random_ranking(problem_of(build_case(CASES["distractors"], s))).scores, distractors.truth.edges)
        for s in range(12)
    ]
    iv = t_interval(values)
    assert iv.lo <= 0.5 <= iv.hi and iv.hi - iv.lo < 0.3


def test_a_probe_recovers_the_rotation_and_a_shuffled_rotation_fails(distractors):
    row = score_method(M.METHODS["linear-probe"], distractors).variables
    assert row["reward"].max_angle <= 1e-5 and row["value"].max_angle <= 1e-5
    assert row["value"].r2 == pytest.approx(1.0, abs=1e-10) and row["value"].iia == pytest.approx(1.0, abs=1e-10)
    other = build_case(CASES["distractors"], 7)  # the same circuit behind another rotation
    assert angle_degrees(other.truth.directions["value"], distractors.truth.directions["value"]) > 10.0
    shuffled = M.DirectionOutput(
        {
            k: v[torch.randperm(len(v), generator=torch.Generator().manual_seed(0))]
            for k, v in M.linear_probe(problem_of(distractors)).directions.items()
        }
    )
    assert score_directions(distractors, shuffled).variables["value"].angle > 10.0


def test_interchange_along_the_true_direction_is_the_counterfactual(distractors):
    site = "blocks.1.hook_resid_post"
    assert interchange_r2(distractors, "value", site, distractors.truth.directions["value"]) == pytest.approx(
        1.0, abs=1e-10
    )
    assert interchange_r2(distractors, "value", site, distractors.truth.directions["reward"]) < 0.9
    labels = counterfactual_labels(distractors, distractors.held_out, "value", site)
    assert (labels - distractors.model(distractors.held_out.prompt)[:, -1]).abs().max() > 1e-3


def test_methods_and_cases_are_validated():
    with pytest.raises(ValueError, match="kind must be"):
        M.Method("x", "nodes", lambda case: None)
    with pytest.raises(ValueError, match="already registered"):
        M.register_method(M.Method("acdc", "edges", lambda case: None))
    with pytest.raises(ValueError, match="junk_dims"):
        CaseSpec("bad", junk_heads=1)
    with pytest.raises(ValueError, match="no score for"):
        score_edges(build_case(CASES["rotated"], 0), M.EdgeOutput({}))


def test_the_trained_case_carries_the_shipped_models_layer_and_refuses_a_misfit():
    """The trained case's TD heads are depth3-td-s0's tied layer (the standard block equals that model with its
    bootstrap path cut, 1e-10), and a source that does not fit the spec is named."""
    from ictd_interp import HookedICTDTransformer
    from ictd_interp.hooks.ablation import ablate_target_path

    case = build_case(CASES["trained"], 0)
    trained = HookedICTDTransformer.from_pretrained("depth3-td-s0", dtype="float64")
    with trained.hooks(fwd_hooks=ablate_target_path(trained)):
        cut = trained(case.clean.prompt)
    assert (case.model(case.clean.prompt) - cut).abs().max() <= 1e-10 and cut.abs().max() > 1e-2
    star = standard_theta_star(circuit_source(CaseSpec("star", d_features=4)))
    assert (star(case.clean.prompt) - cut).abs().max() > 1e-3  # not θ*'s circuit
    with pytest.raises(ValueError, match="depth3-td-s0.*n_layers=3"):
        circuit_source(CaseSpec("bad", d_features=4, n_layers=2, source="depth3-td-s0"))


def test_every_score_refuses_non_finite_input_by_name():
    import math

    import torch

    from ictd_interp.analyses.methods_benchmark.scores import (
        NonFinite,
        angle_degrees,
        auroc,
        average_precision,
        correlations,
        faithfulness,
        matched_correlations,
        roc_curve,
    )

    nan, inf = math.nan, math.inf
    for bad in (nan, inf, -inf):
        scores = {"a": 1.0, "b": bad, "c": 0.0}
        for score in (auroc, average_precision, roc_curve):
            with pytest.raises(NonFinite, match=f"{score.__name__}: 1 of 3 scores are not finite .first: b"):
                score(scores, {"a"})
    with pytest.raises(NonFinite, match="angle_degrees: the direction found holds 1 non-finite"):
        angle_degrees(torch.tensor([1.0, nan]), torch.tensor([1.0, 0.0]))  # min(1, nan) read 0°: exact
    with pytest.raises(NonFinite, match="faithfulness: the circuit's predictions holds"):
        faithfulness(torch.tensor([inf, 1.0]), torch.tensor([1.0, 1.0]), torch.tensor([0.0, 0.0]))
    with pytest.raises(NonFinite, match="correlations: the second sample holds"):
        correlations(torch.ones(4, 2), torch.tensor([[nan], [1.0], [2.0], [3.0]]))
    with pytest.raises(NonFinite, match="correlations"):
        matched_correlations(torch.randn(5, 2), torch.full((5, 2), inf))
    assert auroc({"a": 1.0, "b": 0.0}, {"a"}) == 1.0 and angle_degrees(torch.ones(2), torch.ones(2)) < 1e-6


def test_a_method_that_edits_the_case_in_place_fails_and_the_next_method_sees_the_case_as_built():
    from ictd_interp.analyses.methods_benchmark.evaluate import score_method
    from ictd_interp.analyses.methods_benchmark.scores import MethodFailed

    case = build_case(CASES["distractors"], 0)
    before = score_method(M.METHODS["activation-patching"], case).auroc

    def vandal(c):
        with torch.no_grad():
            next(c.model.parameters()).mul_(0.5)  # an edit a later method would inherit
        return M.METHODS["activation-patching"].run(c)

    with pytest.raises(MethodFailed, match="'vandal' changed its model's weights or its tasks in place"):
        score_method(M.Method("vandal", M.EDGES, vandal), case)
    assert score_method(M.METHODS["activation-patching"], case).auroc == before  # the case was never handed out


def test_a_method_gets_the_questions_never_the_answer():
    """The problem a method receives holds no edges, directions, features, rotation or reference circuit; a method
    that reaches for them, or that raises, fails by name and is never scored."""

    case = build_case(CASES["rotated"], 0)
    problem = problem_of(case)
    assert not any(hasattr(problem, name) for name in ("truth", "rotation", "reference", "held_out", "spec"))
    assert problem.variable_sites == case.truth.sites and problem.model is not case.model
    truth = list(case.truth.directions.values())
    tensors = [problem.fit_values[k] for k in problem.fit_values] + list(problem.fit_counterfactuals.values())
    assert not any(t.shape == d.shape for t in tensors for d in truth)  # values and labels, never a direction

    def cheat(p):
        return M.DirectionOutput({("value", s): p.truth.directions["value"] for s in p.variable_sites["value"]})

    with pytest.raises(MethodFailed, match="'cheat' raised AttributeError: 'Problem' object has no attribute 'truth'"):
        score_method(M.Method("cheat", M.DIRECTIONS, cheat), case)


def test_outputs_that_cannot_be_scored_fail_by_name_and_leave_the_process_as_it_was():
    """A zero direction, a NaN one, a wrong output type, a missing edge, tasks edited in place, an encoder that
    raises, and a method that switches gradients off: each fails on its cell, and the next method scores as
    before."""
    from ictd_interp.analyses.methods_benchmark.evaluate import score_method

    case = build_case(CASES["distractors"], 0)
    before = score_method(M.METHODS["edge-attribution-patching"], case)
    sites = case.truth.sites["value"]
    zero = lambda p: M.DirectionOutput({("value", s): torch.zeros(p.model.cfg.d_model) for s in sites})  # noqa: E731
    nan = lambda p: M.DirectionOutput({("value", s): torch.full((p.model.cfg.d_model,), float("nan")) for s in sites})  # noqa: E731
    wrong = lambda p: M.DirectionOutput()  # noqa: E731
    partial = lambda p: M.EdgeOutput({next(iter(build_graph(p.model).edges)): 1.0})  # noqa: E731

    def tasks_edited(p):
        p.corrupted.prompt.copy_(p.clean.prompt.roll(1, 0))
        return M.METHODS["random"].run(p)

    def no_grad(p):
        torch.set_grad_enabled(False)
        return M.METHODS["random"].run(p)

    cases = {
        "zero": (M.DIRECTIONS, zero, "is zero or not finite"),
        "nan": (M.DIRECTIONS, nan, "is zero or not finite"),
        "wrong": (M.EDGES, wrong, "its kind \\(edges\\) returns EdgeOutput, got DirectionOutput"),
        "partial": (M.EDGES, partial, "cannot be scored \\(ValueError: edge method: no score for"),
        "edited": (M.EDGES, tasks_edited, "changed its model's weights or its tasks in place"),
    }
    for name, (kind, run, message) in cases.items():
        with pytest.raises(MethodFailed, match=f"'{name}'.*{message}"):
            score_method(M.Method(name, kind, run), case)
    score_method(M.Method("no-grad", M.EDGES, no_grad), case)  # scored: switching gradients off is put back
    assert torch.is_grad_enabled()
    assert score_method(M.METHODS["edge-attribution-patching"], case) == before


def test_transformer_lens_placebo_moves_as_far_and_buys_less_than_the_true_direction(distractors, monkeypatch):
    """TransformerLens 4.3's norm-matched placebo moves every position exactly as far as the swap along the true
    value direction, along a random direction; it scores below the true direction's IIA of 1 at every site (at
    seed 0: 0.67, 0.36 and −0.34 after blocks 0, 1, 2), and is None where TransformerLens lacks the module."""
    import sys

    from ictd_interp.analyses.methods_benchmark.evaluate import interchange_r2, placebo_r2

    u = distractors.truth.directions["value"]
    try:
        from transformer_lens.tools.analysis.interchange import NormMatchedPlacebo, SubspaceInterchange, random_basis
    except ImportError:  # TransformerLens 3.9 (tests/slow/test_transformer_lens_3.py runs this tier there)
        assert placebo_r2(distractors, "value", "blocks.1.hook_resid_post", u, seed=0) is None
        return
    base, source = torch.randn(2, 3, 5, u.shape[0], dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    swap = SubspaceInterchange(u[:, None])
    moved = NormMatchedPlacebo(swap, random_basis(u.shape[0], 1, 0).double())(base, source) - base
    assert (moved.norm(dim=-1) - (swap(base, source) - base).norm(dim=-1)).abs().max() <= 1e-12
    for site, expected in zip([f"blocks.{l}.hook_resid_post" for l in range(3)], (0.667, 0.362, -0.336)):
        assert interchange_r2(distractors, "value", site, u) == pytest.approx(1.0, abs=1e-10)
        assert placebo_r2(distractors, "value", site, u, seed=0) == pytest.approx(expected, abs=1e-3)
    monkeypatch.setitem(sys.modules, "transformer_lens.tools.analysis.interchange", None)
    assert placebo_r2(distractors, "value", "blocks.1.hook_resid_post", u, seed=0) is None


def test_a_methods_supervision_is_its_own_copy_and_exit_or_a_changed_rng_reaches_no_one_else():
    """``fit_values`` and ``fit_counterfactuals`` are copies (an honest in-place standardisation once leaked into the
    next method); ``sys.exit`` in a method fails that method by name; numpy's and Python's random states, the
    thread count and the deterministic flag are put back after it."""
    import random
    import sys

    import numpy as np

    from ictd_interp.analyses.methods_benchmark.evaluate import score_method
    from ictd_interp.analyses.methods_benchmark.guard import guarded
    from ictd_interp.analyses.methods_benchmark.scores import MethodFailed

    case = build_case(CASES["rotated"], 0)
    first, second = problem_of(case), problem_of(case)
    name = next(iter(first.fit_values))
    kept = second.fit_values[name].clone()
    first.fit_values[name].sub_(first.fit_values[name].mean()).div_(2.0)  # standardised in place
    next(iter(first.fit_counterfactuals.values())).mul_(0.0)
    assert torch.equal(second.fit_values[name], kept) and torch.equal(problem_of(case).fit_values[name], kept)
    assert next(iter(second.fit_counterfactuals.values())).abs().sum() > 0

    def quitter(problem):
        sys.exit(3)

    with pytest.raises(MethodFailed, match="'quitter' raised SystemExit: 3"):
        score_method(M.Method("quitter", M.EDGES, quitter), case)

    def meddler(problem):
        np.random.seed(123), random.seed(123), torch.set_num_threads(torch.get_num_threads() + 1)
        torch.use_deterministic_algorithms(True)
        return M.METHODS["random"].run(problem)

    other, threads = build_case(CASES["distractors"], 0), torch.get_num_threads()
    np.random.seed(7), random.seed(7)
    np_draw, py_draw = np.random.rand(), random.random()
    np.random.seed(7), random.seed(7)
    guarded(M.Method("meddler", M.EDGES, meddler), other)  # the method's run alone: scoring draws its own
    assert (np.random.rand(), random.random()) == (np_draw, py_draw)
    assert torch.get_num_threads() == threads and not torch.are_deterministic_algorithms_enabled()


def test_a_request_records_each_plugins_contents_and_an_edited_plugin_is_imported_anew(tmp_path):
    from ictd_interp.analyses.methods_benchmark.plugins import load_plugin
    from ictd_interp.analyses.methods_benchmark.run import BUDGETS, _request

    plugin = tmp_path / "mine.py"
    source = (
        "from ictd_interp.analyses.methods_benchmark.methods import EDGES, Method, register_method\n"
        "def mine(problem):\n    return {}\n"
        "register_method(Method('mine-plugin', EDGES, mine, 'a plugin'))\n"
    )
    plugin.write_text(source)
    try:
        load_plugin(plugin)
        first, request = M.METHODS["mine-plugin"].run, _request(BUDGETS["quick"], ["mine-plugin"], [str(plugin)])
        plugin.write_text(source.replace("return {}", "return {'edited': 1}"))
        load_plugin(plugin)
        assert M.METHODS["mine-plugin"].run is not first and M.METHODS["mine-plugin"].run(None) == {"edited": 1}
        edited = _request(BUDGETS["quick"], ["mine-plugin"], [str(plugin)])
        assert request["plugins"] == edited["plugins"] and request["plugin_sha256"] != edited["plugin_sha256"]
    finally:
        M.METHODS.pop("mine-plugin", None)


def test_the_private_split_draws_its_cases_from_a_key_no_method_sees(tmp_path):
    """Seeds come from HMAC(key, case:k), differ from the public ones and between keys; a method's problem is named
    ``sealed`` and carries a key-drawn seed, so rebuilding the case from it fails; the cell records only k; a
    private split without a key, a public one with a key, a short key and a missing file are refused."""
    from ictd_interp.analyses.methods_benchmark.run import run_cell
    from ictd_interp.analyses.methods_benchmark.sealed import SEALED, Split

    key = tmp_path / "key"
    key.write_bytes(bytes(range(32)))
    split = Split.read("private", str(key))
    seeds = [split.seed("dormant", k) for k in range(3)]
    assert len(set(seeds)) == 3 and not set(seeds) & {0, 1, 2}
    (tmp_path / "other").write_bytes(bytes(range(1, 33)))
    assert Split.read("private", str(tmp_path / "other")).seed("dormant", 0) != seeds[0]
    case = build_case(CASES["dormant"], seeds[0])
    problem = problem_of(case, split.problem_seed("dormant", 0))
    assert problem.name == SEALED and problem.seed not in (seeds[0], 0)
    held = [m.cfg.seed for m in problem.model.modules() if hasattr(m, "cfg")]  # the config a model carries too
    assert held and seeds[0] not in held and str(seeds[0]) not in repr(problem)
    with pytest.raises(KeyError):
        build_case(CASES[problem.name], problem.seed)
    cell = run_cell("dormant", seeds[0], 8, ["random"], [], (0, split.problem_seed("dormant", 0)))
    assert cell["seed"] == 0 and str(seeds[0]) not in str(cell)
    assert split.fingerprint() and split.fingerprint() not in str(bytes(range(32)))
    for name, path, match in [
        ("private", None, "--key-file: the private split draws"),
        ("public", str(key), "only the private split takes a key"),
        ("private", str(tmp_path / "missing"), "no such file"),
    ]:
        with pytest.raises((ValueError, FileNotFoundError), match=match):
            Split.read(name, path)
    (tmp_path / "short").write_bytes(b"abc")
    with pytest.raises(ValueError, match="3 bytes; a key needs at least 16"):
        Split.read("private", str(tmp_path / "short"))


def test_transformer_lens_own_attribution_patching_refuses_the_benchmarks_prompts():
    """TransformerLens 4.3's ``attribution_patch`` takes token ids ``[batch, seq]``; the benchmark's prompts are
    continuous ``[batch, pos, d_prompt]``, so it refuses them (docs/methods_benchmark.md names it among the
    libraries that cannot take these models; the graph adapter's EAP stands in)."""
    attribution = pytest.importorskip("transformer_lens.tools.analysis.attribution_patching")
    case = build_case(CASES["rotated"], 0)
    with pytest.raises(ValueError, match="2D"):
        attribution.attribution_patch(
            case.model.eval(), case.clean.prompt, case.corrupted.prompt, lambda values: values[:, -1].mean()
        )


def test_the_leaderboard_ranks_by_mean_auroc_ties_share_a_rank_and_a_method_without_one_comes_last():
    from ictd_interp.analyses.methods_benchmark.leaderboard import lines, ranked

    def row(method, case, mean):
        return {"method": method, "case": case, "reference": method == "truth", "auroc": mean and {"mean": mean}}

    table = [row("a", "x", 0.5), row("b", "x", None), row("c", "x", 0.9), row("truth", "x", 1.0), row("d", "x", 0.9)]
    assert [m for m, _ in ranked(table)] == ["truth", "c", "d", "a", "b"]
    table = [{**r, "split": "public"} for r in table]
    body = [line for line in lines(table) if line.startswith("| ") and not line.startswith("| rank")]
    assert [line.split(" | ")[0] for line in body] == ["| 1", "| 2", "| 2", "| 4", "| 5"]
    assert "*truth*" in body[0] and "| — |" in body[-1]


def test_the_methods_of_a_run_are_every_cells_not_the_first_ones():
    """The command's closing line names a feature method scored only where features are planted."""
    from ictd_interp.analyses.methods_benchmark.evaluate import CellResult, EdgeScores, Roc
    from ictd_interp.analyses.methods_benchmark.selection import methods_of

    ok = EdgeScores(auroc=1.0, auprc=1.0, roc=Roc([0.0, 1.0], [0.0, 1.0]))
    cells = [CellResult("rotated", 0, 4, 2, {"good": ok}), CellResult("superposed", 0, 4, 2, {"good": ok, "pca": ok})]
    assert methods_of(cells) == ["good", "pca"]


def test_a_direction_figure_with_many_axes_keeps_its_axis_names_apart():
    """Thirteen axes (the `entangled` case's width): the names along the bottom neither overlap nor leave the
    canvas."""
    from ictd_interp.analyses.figures.style import text_outside
    from ictd_interp.analyses.methods_benchmark.evaluate import CellResult, Cosines, DirectionScores
    from ictd_interp.analyses.methods_benchmark.report_figures import direction_figure

    axes = ["φ1", "φ2", "φ3", "reward", "target", "value"] + [f"junk {k}" for k in range(1, 8)]
    labels = ["value @ blocks.0.hook_resid_post", "reward @ blocks.0.hook_resid_pre"]
    cosines = Cosines(labels, axes, [[float(i == 5) for i in range(13)], [float(i == 3) for i in range(13)]])
    cell = CellResult("entangled", 0, 4, 2, {"probe": DirectionScores({}, cosines)})
    fig = direction_figure([cell], "probe", "entangled")
    fig.canvas.draw()
    ax, names = fig.axes[0], fig.axes[0].get_xticklabels()
    ticks = ax.transData.transform([(x, 0) for x in ax.get_xticks()])[:, 0]
    for a, b, step in zip(names, names[1:], np.diff(ticks)):  # 2 px apart at least, across the text's direction
        if a.get_rotation() == 0:
            assert a.get_window_extent().x1 + 2 < b.get_window_extent().x0, (a.get_text(), b.get_text())
        else:
            height = a.get_fontsize() * fig.dpi / 72
            assert step * math.sin(math.radians(a.get_rotation())) > height + 2, (a.get_text(), b.get_text())
    assert len(names) == 13 and text_outside(fig) == []


def test_one_seed_judges_no_method_and_says_so_not_that_none_recovers():
    """Every method scored 1.000 on one seed: with no interval the reading says no method is judged, not that no
    method recovers the circuit; two seeds at 1.000 recover it."""
    from ictd_interp.analyses.methods_benchmark.evaluate import CellResult, EdgeScores, Roc
    from ictd_interp.analyses.methods_benchmark.report import reading

    ok = EdgeScores(auroc=1.0, auprc=1.0, roc=Roc([0.0, 1.0], [0.0, 1.0]))
    one = [CellResult("rotated", 0, 4, 2, {"good": ok, "other": ok})]
    assert "one seed: no method is judged" in reading(one) and "no edge method recovers" not in reading(one)
    two = one + [CellResult("rotated", 1, 4, 2, {"good": ok, "other": ok})]
    assert "good, other recover the circuit" in reading(two)
