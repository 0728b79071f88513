"""The claims report: its verdict rules worked by hand, the theorem rows on θ*, and a tiny budget end to end
on Ray (resumed, refused when the budget changes). The quick budget in full is a slow test."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ictd_interp.analyses.claims import neu_limit, theory
from ictd_interp.analyses.claims.budget import Budget
from ictd_interp.analyses.claims.claim import FAILS, HOLDS, conditional, thresholds
from ictd_interp.analyses.metrics.intervals import proportion_interval
from tests.support.claims import TINY


def test_wilson_intervals_worked_by_hand():
    # p = 5/10, z = 1.96: centre (0.5 + 0.192) / 1.384 = 0.5, half 1.96 sqrt(0.025 + 0.0096) / 1.384 = 0.2634
    assert (proportion_interval(5, 10).lo, proportion_interval(5, 10).hi) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert proportion_interval(0, 10).hi == pytest.approx(0.2775, abs=1e-4) and proportion_interval(0, 10).lo == 0
    assert proportion_interval(10, 10).lo == pytest.approx(0.7225, abs=1e-4)
    with pytest.raises(ValueError, match="successes"):
        proportion_interval(3, 2)


def test_verdicts_name_the_condition_found():
    assert conditional({"a": True, "b": True}, str) == HOLDS and conditional({"a": False}, str) == FAILS
    assert conditional({"a": True, "b": False}, lambda good: " or ".join(good)) == "holds only when a"
    grid = [(n, L) for n in (10, 30, 100) for L in (1, 3, 12)]
    assert thresholds([(100, 3), (100, 12)], grid, ("n", "L")) == "n ≥ 100 and L ≥ 3"
    assert thresholds([(30, 12), (100, 12)], grid, ("n", "L")) == "n ≥ 30 and L ≥ 12"
    assert thresholds([(10, 12), (100, 1)], grid, ("n", "L")) == "at (n = 10, L = 12), (n = 100, L = 1)"


def test_theorem1_holds_and_its_rule_can_fail(monkeypatch):
    claim = theory.theorem1(TINY)
    assert claim.verdict == HOLDS and claim.data["max_error"] <= 1e-10 and len(claim.data["rows"]) == 4
    original = theory.softmax_td
    monkeypatch.setattr(theory, "softmax_td", lambda *a: original(*a) + 1e-8)  # a reference off by 1e-8
    assert theory.theorem1(TINY).verdict == FAILS


def test_assumption_51_holds_only_with_sharp_one_hot_features():
    from ictd_interp.analyses.claims.claim_figures import draw
    from ictd_interp.analyses.figures.style import text_outside

    claim = theory.assumption(TINY)
    assert claim.verdict == "holds only when onehot features at scale ≥ 5"
    rows = {(r["kind"], r["scale"]): r for r in claim.data["settings"]}
    assert rows[("uniform", 1.0)]["fraction_positive"]["mean"] == 0.0
    assert rows[("onehot", 5.0)]["fraction_positive"]["mean"] == 1.0
    fig = draw(claim)  # from the row's saved data
    assert fig.axes[0].get_xlabel().startswith("feature scale") and text_outside(fig) == []


def test_a_budget_needs_two_seeds_for_an_interval():
    with pytest.raises(ValueError, match="seeds"):
        Budget("one", seeds=(0,))


def test_the_quick_budget_trains_its_quick_studies_through_the_state_space_forward():
    from ictd_interp.analyses.claims.budget import BUDGETS

    quick, full = (BUDGETS[name].studies() for name in ("quick", "full"))
    assert [quick[k]["fixed"]["forward"] for k in ("objectives", "depth_sampling")] == ["state-space"] * 2
    assert [full[k]["fixed"]["forward"] for k in ("objectives", "depth_sampling")] == ["positional"] * 2
    assert "forward" not in quick["control_objectives"]["fixed"]  # control families: the positional forward only
    with pytest.raises(ValueError, match="^forward"):
        Budget("odd", forward="sideways")


def test_a_fraction_of_one_keeps_its_interval_around_it():
    """10/10: the Wilson bound rounds to 0.999...9; the interval must still contain the fraction (the figure
    draws its error bars from it)."""
    iv = proportion_interval(10, 10)
    assert iv.lo <= iv.mean <= iv.hi and iv.mean == 1.0


def test_the_signature_counts_seeds_not_a_tied_models_layers():
    """5 seeds x 3 tied layers: 5 independent units, so 5/5 has the Wilson interval of 5 ([0.566, 1]: lower bound
    n / (n + z^2) = 5 / 8.84), not of 15; a seed with one layer off does not count."""
    import pandas as pd

    from ictd_interp.analyses.claims.trained import SIGNATURE_MATCH, signature
    from ictd_interp.analyses.studies.results import CELL, CONDITION, STATUS

    rows = [
        {
            CONDITION: c,
            CELL: f"{c}-seed-{s}",
            STATUS: "done",
            SIGNATURE_MATCH: c == "objective=td" or (s, layer) != (0, 1),
        }
        for c in ("objective=td", "objective=mc")
        for s in range(5)
        for layer in range(3)
    ]
    claim = signature(pd.DataFrame(rows))
    td, mc = claim.data["objective=td"], claim.data["objective=mc"]
    assert (td["seeds_with_signature"], td["seeds"], mc["seeds_with_signature"], mc["seeds"]) == (5, 5, 4, 5)
    assert td["lo"] == pytest.approx(5 / (5 + 1.959964**2), abs=1e-4)
    # mc's 4 of 5 is not told apart from td's 5 of 5: the signs do not single out TD
    assert (
        claim.verdict == "holds only when the objective is td; not specific to TD" and "5/5 seeds" in claim.numbers[0]
    )


def test_the_signature_is_specific_to_td_only_when_no_other_objective_has_it():
    from ictd_interp.analyses.claims.trained import signature_specificity

    assert signature_specificity({"objective=td": (5, 5), "objective=mc": (0, 5)}) == "; specific to TD"
    assert signature_specificity({"objective=td": (5, 5), "objective=mc": (5, 5)}) == "; not specific to TD"
    assert signature_specificity({"objective=td": (4, 5), "objective=mc": (0, 5)}) == "; not specific to TD"
    assert signature_specificity({"objective=mc": (5, 5)}) == ""


def test_diagonality_is_specific_to_td_only_when_its_growth_exceeds_every_others_by_the_margin():
    """The issue's numbers: td's diagonality grows by +0.405, mc's and supervised's by +0.040 — specific; the same
    growth under mc as under td is not."""
    import numpy as np

    from ictd_interp.analyses.claims.trained import diagonality_specificity

    td = np.array([0.40, 0.41, 0.39, 0.42, 0.405])
    small = np.array([0.04, 0.035, 0.045, 0.04, 0.04])
    suffix, line = diagonality_specificity({"objective=td": td, "objective=mc": small, "objective=supervised": small})
    assert suffix == "; specific to TD" and "td − mc +0.365" in line
    assert diagonality_specificity({"objective=td": td, "objective=mc": td + 0.01})[0] == "; not specific to TD"


def test_welch_interval_by_hand():
    """a = (1, 2, 3), b = (1, 1, 1, 1): var(a)/3 = 1/3, var(b) = 0, so df = 2 and the half width is t(0.975, 2) ×
    sqrt(1/3) = 4.3027 × 0.57735 = 2.4841."""
    from ictd_interp.analyses.metrics.intervals import welch

    w = welch([1.0, 2.0, 3.0], [1.0, 1.0, 1.0, 1.0])
    assert (w.mean, w.lo, w.hi) == pytest.approx((1.0, 1.0 - 2.4841, 1.0 + 2.4841), abs=1e-4)
    with pytest.raises(ValueError, match="welch"):
        welch([1.0], [1.0, 2.0])


def test_the_iterated_row_reads_the_error_at_4x_and_16x_depth():
    import numpy as np

    from ictd_interp.analyses.claims.findings import iterated_claim

    msve = {m: np.full(5, 0.4) for m in ("1x", "4x", "16x")}
    stopped_early = {"4x": ["rises"] * 5, "16x": ["rises"] * 5}
    assert iterated_claim(stopped_early, msve, "td").verdict == FAILS
    td = {"4x": ["flat", "falls", "flat", "flat", "falls"], "16x": ["flat"] * 5}
    assert iterated_claim(td, msve, "td").verdict == HOLDS
    mixed = {"4x": ["flat", "rises", "flat", "flat", "flat"], "16x": ["flat", "flat", "undecided", "flat", "flat"]}
    claim = iterated_claim(mixed, msve, "td")
    assert claim.verdict == "not shown: 3 of 5 seeds falls or flat" and "rises 1" in claim.numbers[1]


def test_depth_sampling_is_judged_against_its_fixed_depth_control_on_the_ladder():
    from ictd_interp.analyses.claims.findings import depth_sampling_claim

    fixed = ["learns in context"] * 5
    assert depth_sampling_claim(fixed, ["runs TD"] * 5, "f", "s").verdict == HOLDS
    assert depth_sampling_claim(fixed, ["does not learn in context"] * 5, "f", "s").verdict == FAILS
    assert depth_sampling_claim(["runs TD"] * 5, ["runs TD"] * 5, "f", "s").verdict == FAILS  # no more than control
    assert depth_sampling_claim(fixed, ["runs TD"] * 2 + fixed[:3], "f", "s").verdict == "not shown"


def test_the_constant_baseline_reads_not_shown_when_no_seed_decides():
    from ictd_interp.analyses.claims.findings import constant_baseline_claim
    from ictd_interp.analyses.metrics.intervals import t_interval

    model, const = t_interval([0.6, 0.65, 0.7]), t_interval([0.55, 0.55, 0.55])
    undecided = constant_baseline_claim(model, const, 0, 0, 5, 5, 256)
    assert undecided.verdict == "not shown: 0 of 5 seeds significantly better, 0 significantly worse, 5 undecided"
    assert "p = 0.0625" in undecided.numbers[0] and "256 evaluation tasks" in undecided.run  # 2 / 2^5
    assert constant_baseline_claim(model, const, 5, 0, 5, 0, 256).verdict == HOLDS
    assert constant_baseline_claim(model, const, 0, 5, 5, 5, 256).verdict == FAILS
    assert "p = 1" in constant_baseline_claim(model, const, 1, 1, 4, 2, 256).numbers[0]  # 2 of 4 worse: no sign


def test_theorem2_counts_a_contraction_only_below_the_limits_tolerance():
    """A radius of 1 − 1e-10 has no depth limit (depth_limit's tolerance is 1e-9): it is not counted as contracting."""
    rows = theory.LimitRows(radius=[[0.9, 1 - 1e-10, 0.95]], neutral=[[False, False, False]], C=[0.05, -0.9, 0.02])
    claim = theory._rate_claim({("uniform", 5.0): rows}, TINY, 100)
    assert "2/3 tasks contract, ρ < 1 − 1e-09" in claim.numbers[1]
    assert claim.verdict == "holds on every task with C > 0" and claim.data["tested"] == 2
    assert "slack 1 − C − ρ is 0.040 at the median (smallest 0.030): a loose bound here" in claim.numbers[0]


def test_theorem3_is_consistent_with_the_limit_only_when_neu_falls_at_every_n():
    """The shipped full-budget grid (docs/claims) re-read: its verdict, and the same grid with θ*'s calibrated
    interval at the largest (n, L) raised above the next-smaller n's, which the rule must refuse."""
    from dataclasses import replace

    grid = _saved_neu_grid()
    claim = neu_limit.theorem3_claim(grid, "depth3-td-s0")
    assert claim.verdict == (
        "consistent with the limit; not a minimiser at L ≤ 1 (at every n measured); "
        "beaten at 4 of 5 n at L = 3; beaten at 4 of 5 n at L = 12"
    )
    assert "Of the 60 comparisons, 53 have an interval; at 95%, about 3 of those" in claim.rule
    assert any("jackknife interval lies below 0 at (n = 1000, L = 96), (n = 1000, L = 384)" in n for n in claim.numbers)
    assert any(n.startswith("the NEU itself is shown to fall at no step; at 10 → 30") for n in claim.numbers)
    far = max(grid.rows, key=lambda r: (r.depth, r.context_len))
    # the rule reads the calibrated interval's upper end: n = 300's is 7.8e-2
    raised = replace(far, theta_star=replace(far.theta_star, calibrated_hi=0.1))
    worse = replace(grid, rows=[raised if r is far else r for r in grid.rows])
    assert (
        neu_limit.theorem3_claim(worse, "depth3-td-s0").verdict == "not shown: the limit rule is not met on this grid"
    )
    flipped = replace(far, theta_star=replace(far.theta_star, estimate=-far.theta_star.estimate))
    same = replace(grid, rows=[flipped if r is far else r for r in grid.rows])
    assert (
        neu_limit.theorem3_claim(same, "depth3-td-s0").verdict == claim.verdict
    )  # a noise draw's sign decides nothing
    assert not any("θ*/zero" in n for n in claim.numbers)
    small_zero = replace(far, zero=replace(far.zero, estimate=1.0))  # bound 4.9e-2 of zero's 1.0: not below 1e-3
    short = replace(grid, rows=[small_zero if r is far else r for r in grid.rows])
    assert neu_limit.theorem3_claim(short, "depth3-td-s0").verdict.startswith("not shown")


def test_a_step_of_n_is_shown_only_when_the_longer_contexts_interval_lies_below_the_shorters():
    from ictd_interp.analyses.metrics.neu_intervals import NeuEstimate

    def est(lo, hi):
        return NeuEstimate(
            estimate=(lo + hi) / 2,
            lo=lo,
            hi=hi,
            half_width=(hi - lo) / 2,
            n_tasks=64,
            calibrated_lo=lo,
            calibrated_hi=hi,
        )

    diverged = NeuEstimate(estimate=math.nan, lo=math.nan, hi=math.nan, half_width=math.nan, n_tasks=64, n_nonfinite=3)
    assert "(NEU at n = 3 not finite: θ* diverges there)" in neu_limit._step_power([diverged, est(0.0, 0.5)], [3, 10])
    text = neu_limit._step_power([est(1.0, 2.0), est(0.0, 0.5), est(0.0, 0.4)], [10, 30, 100])
    assert text == (
        "the NEU itself is shown to fall at 10 → 30; at 30 → 100 (NEU at n = 30 within [0.0e+00, "
        "5.0e-01]) the tasks cannot tell a fall from none: only the bound falls there, and a fall smaller "
        "than the interval's upper end is invisible to this sample"
    )


def _saved_neu_grid():
    from ictd_interp.analyses.claims.figure_data import Theorem3Data
    from ictd_interp.analyses.summary.store import build

    stored = json.loads((Path(__file__).parents[2] / "docs" / "claims" / "claims.json").read_text())
    return build(Theorem3Data, next(c for c in stored["claims"] if c["id"] == "theorem3")["data"]).grid


def test_not_a_minimiser_names_every_depth_beaten_at_most_n():
    rows = [r for r in _saved_neu_grid().rows if r.context_len in (10, 30, 100) and r.depth in (1, 3, 12)]
    beaten = [r for r in rows if r.depth in (1, 12) or (r.depth == 3 and r.context_len > 10)]
    assert neu_limit._not_minimiser(rows, beaten) == (
        "; not a minimiser at L ≤ 1 (at every n measured); beaten at 2 of 3 n at L = 3; beaten at every n at L = 12"
    )
    assert neu_limit._not_minimiser(rows, [r for r in rows if r.depth == 12]) == "; beaten at every n at L = 12"


def test_the_floor_leaves_out_contexts_without_a_limit(monkeypatch):
    """A task whose limit is not finite is not counted among the contexts compared with the tabular fixed point."""
    original = theory.limit_spectrum

    def one_without_limit(star, prefix):
        values, spectrum = original(star, prefix)
        values[0] = float("nan")
        return values, spectrum

    kept = theory._limit_rows("onehot", 5.0, TINY)
    monkeypatch.setattr(theory, "limit_spectrum", one_without_limit)
    cut = theory._limit_rows("onehot", 5.0, TINY)
    for k, c in zip(kept.query_source, cut.query_source):
        assert c == k - 1 or c == k  # task 0 counted before only where its query state was a source
    assert sum(kept.query_source) - sum(cut.query_source) >= 1
    assert all(g is not None and math.isfinite(g) for g in cut.tabular_gap)


def test_the_same_state_row_reads_the_most_td_like_head_itself_when_known():
    from ictd_interp.analyses.claims.findings import same_state_claim

    claim = same_state_claim([0.98, 0.97, 0.99], [0.69, 0.70, 0.68], "3 seeds", [0.10, 0.12, 0.08])
    assert claim.verdict == HOLDS and claim.data["td_head_tabular_minus_td"] == [0.10, 0.12, 0.08]
    assert "the most TD-like head itself, tabular − softmax-TD correlation: +0.10 [+0.05, +0.15]" in claim.numbers[1]
    assert len(same_state_claim([0.98, 0.97], [0.69, 0.70], "2 seeds").numbers) == 1  # heads unknown: no line


def test_the_acting_figure_shows_a_uniform_behaviour_once():
    """The shipped control_acting row: its behaviour is the uniform random policy (the same regret on every task),
    so the figure has one row for both."""
    from ictd_interp.analyses.claims.claim import Claim
    from ictd_interp.analyses.claims.claim_figures import draw

    stored = json.loads((Path(__file__).parents[2] / "docs" / "claims" / "claims.json").read_text())
    claim = Claim(**next(c for c in stored["claims"] if c["id"] == "control_acting"))
    assert claim.data["regret"]["random"] == claim.data["regret"]["behaviour"]
    labels = [t.get_text() for t in draw(claim).axes[0].get_yticklabels()]
    assert "behaviour = uniform random" in labels and "random" not in labels and "behaviour" not in labels


def test_the_iterated_row_on_the_deep_recipe_reads_the_shipped_models_on_their_cards_tasks():
    """The second iterated row runs each shipped deep model's ladder on its card's own draw: its MSVE at the trained
    depth is the card's to the last digit shown; at n = 30 the error rises toward CE (0.368) from below, which the row's
    rule cannot call flat with two seeds' intervals straddling the 5% band."""
    from ictd_interp.analyses.claims.findings import iterated_shipped
    from ictd_interp.io.pretrained import card

    names = ("deep-td-s0", "deep-td-s1")
    row = iterated_shipped(names)
    assert row.id == "finding_iteration_deep" and row.data["seeds"] == 2
    assert row.data["verdicts"] == {"4x": ["undecided"] * 2, "16x": ["undecided"] * 2}
    assert row.verdict == "not shown: 0 of 2 seeds falls or flat"
    at_depth = np.mean([card(n)["in_context"]["ladder"]["rungs"][0]["msve"][0] for n in names])
    assert f"1x {at_depth:.3f} [" in row.numbers[0] and row.numbers[-1].startswith("CE on the same tasks: 0.368")


def test_the_iterated_row_on_the_spectral_penalty_recipe_reads_its_card_and_falls_toward_ce():
    """At n = 100 the 48-layer spectral-penalty layer run 4x deeper falls from its card's error toward CE (0.108 ->
    0.096, CE 0.097): an 11% fall that one seed's interval over 256 tasks does not decide against the 5% band."""
    from ictd_interp.analyses.claims.findings import iterated_shipped
    from ictd_interp.io.pretrained import card

    row = iterated_shipped(("deep-spectral-td-s0",), "finding_iteration_deep_spectral")
    assert row.id == "finding_iteration_deep_spectral" and row.verdict == "not shown: 0 of 1 seeds falls or flat"
    assert "the deep-spectral recipe, n = 100, 48 layers: deep-spectral-td-s0" in row.run
    at_depth = card("deep-spectral-td-s0")["in_context"]["ladder"]["rungs"][0]["msve"][0]
    assert row.numbers[0].startswith(f"MSVE over seeds: 1x {at_depth:.3f} (one value") and "4x 0.096" in row.numbers[0]
    assert row.numbers[-1].startswith("CE on the same tasks: 0.097")


def test_the_iterated_row_holds_on_the_gamma_097_recipe_and_names_it():
    """At γ = 0.97 and 384 layers the shipped layer run 4x and 16x deeper stays within 5% of its own error (flat),
    near CE's 1.191 on the card's tasks: the rule that the 12-layer preset fails and the 48-layer one cannot decide
    holds here."""
    from ictd_interp.analyses.claims.findings import iterated_shipped

    row = iterated_shipped(("deep-g97-384-td-s0",), "finding_iteration_horizon")
    assert row.id == "finding_iteration_horizon" and row.verdict == HOLDS
    assert row.data["verdicts"] == {"4x": ["flat"], "16x": ["flat"]}
    assert "the deep-g97-384 recipe, n = 100, γ = 0.97: deep-g97-384-td-s0" in row.run
    assert row.numbers[-1].startswith("CE on the same tasks: 1.191")
