"""The verdict ladder separates a model that runs TD from a stopped-early estimator, by its written rule."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from ictd_interp import HookedICTDTransformer, TrainConfig
from ictd_interp.analyses.metrics import ladder as L
from ictd_interp.tasks.sampling import sample_from

DIST = TrainConfig.from_preset("quick").tasks


def test_theta_star_run_deep_enough_runs_td_and_the_shipped_quick_model_does_not():
    """θ* of 48 layers reaches CE when run deeper; quick-td-s0 learns in context at n = 30, but its error rises run
    deeper (0.41 -> 1.7 at 16x) and every-visit Monte Carlo beats it at n = 100."""
    cfg = TrainConfig.from_preset("quick").model
    star = L.ladder(HookedICTDTransformer.from_theta_star(replace(cfg, n_layers=48)), DIST, 5, True)
    assert (star.level, star.flat_with_depth, star.falls_with_context, star.near_ce) == ("runs TD", True, True, True)
    assert [r.n for r in star.rungs] == [30, 100, 400]
    assert [r.depths for r in star.rungs][0] == [48, 96, 192, 768]
    quick = L.ladder(HookedICTDTransformer.from_pretrained("quick-td-s0"), DIST, 5, True)
    assert quick.level == "learns in context"
    assert not quick.flat_with_depth and not quick.beats_mc and not quick.near_ce
    first = quick.rungs[0]
    assert first.msve[-1].mean > 3 * first.msve[0].mean  # the rise the issue measured
    assert quick.rungs[1].minus_estimator["tabular_mc"].verdict == "higher"
    assert "rises with depth" in L.ladder_sentence(quick) and "every-visit MC" in L.ladder_sentence(quick)
    # the first level is today's verdict, passed in: without it nothing higher is claimed
    assert L.ladder(HookedICTDTransformer.from_pretrained("quick-td-s0"), DIST, 5, False).level == L.LEVELS[0]


def test_levels_by_hand():
    assert L.level(False, True, True, True, True) == "does not learn in context"
    assert L.level(True, False, False, True, True) == "learns in context"
    assert L.level(True, True, False, True, True) == "beats Monte Carlo"
    assert L.level(True, True, True, False, True) == "beats Monte Carlo"
    assert L.level(True, True, True, True, False) == "beats Monte Carlo"
    assert L.level(True, False, True, True, True) == "runs TD"  # θ* of 12 layers: TD, not yet past MC at its depth


def test_a_diverging_update_rises_with_depth_and_is_never_near_ce():
    """θ* with step 2.5: the update overshoots (spectral radius above 1), so running deeper blows the error up."""
    cfg = replace(TrainConfig.from_preset("quick").model, n_layers=4)
    wild = HookedICTDTransformer.from_theta_star(cfg, alpha=2.5)
    tasks = sample_from(DIST, 16, seed=3)
    found, _ = L.rung(wild, tasks, DIST.gamma)
    assert found.rises_with_depth
    assert not L._below(found.deepest_minus_ce, 1e9)


def test_prefix_keeps_the_tasks_and_cuts_the_trajectory():
    tasks = sample_from(DIST, 4, seed=1, length=50)
    short = L.prefix(tasks, 30)
    assert short.states.shape == (4, 31) and torch.equal(short.states, tasks.states[:, :31])
    assert short.mrp is tasks.mrp and torch.equal(short.features, tasks.features)
    # the prefix is what drawing 30 transitions from the same seed gives (one trajectory drawn step by step)
    drawn = sample_from(DIST, 4, seed=1, length=30)
    assert torch.equal(drawn.features, tasks.features)


def test_rung_numbers_are_recomputed_from_the_estimators():
    """Every number of a rung is a plain MSVE of values an independent call computes."""
    model = HookedICTDTransformer.from_pretrained("quick-td-s0")
    tasks = sample_from(DIST, 32, seed=2, length=100)
    found, deepest = L.rung(model, tasks, DIST.gamma)
    ce = L.baselines.td_fixed_point(tasks, DIST.gamma)  # on positions: the same fixed point
    assert found.estimators["tabular_td"].mean == pytest.approx(float((ce - tasks.v_true).pow(2).mean()), rel=1e-9)
    deep = model.state_space_values(tasks, depth=16 * 12)
    assert np.allclose(deepest, (deep - tasks.v_true).pow(2).mean(-1).numpy(), rtol=1e-12)
    with torch.no_grad():
        positional = (model(tasks.prompt).double() - tasks.v_true).pow(2).mean()  # the float32 positional forward
    assert found.msve[0].mean == pytest.approx(float(positional), rel=1e-4)


def test_the_top_rung_is_bayes_on_boyan_chains_only_with_the_gap_closed_by_hand():
    """The gap share is (constant − model) / (constant − Bayes) on the same tasks; CE's share is computed the same
    way; a family without a derived posterior gets no Bayes column."""
    model = HookedICTDTransformer.from_pretrained("quick-td-s0")
    tasks = sample_from(DIST, 24, seed=4)
    found, _ = L.rung(model, tasks, DIST.gamma, L.estimators_for(DIST))
    err = {
        k: (v - tasks.v_true).pow(2).mean(-1).numpy()
        for k, v in {
            "const": L.baselines.constant(tasks, DIST.gamma),
            "bayes": L.bayes.bayes_posterior_mean(tasks, DIST.gamma),
            "ce": L.baselines.td_fixed_point(tasks, DIST.gamma),
        }.items()
    }
    assert found.estimators["bayes"].mean == pytest.approx(err["bayes"].mean(), rel=1e-12)
    want = (err["const"].mean() - err["ce"].mean()) / (err["const"].mean() - err["bayes"].mean())
    assert found.gap_closed_ce.mean == pytest.approx(want, rel=1e-9)
    assert found.gap_closed_ce.lo < want < found.gap_closed_ce.hi
    assert "bayes" not in L.estimators_for(replace(DIST, family="loop"))


def test_ratio_interval_by_hand():
    num, den = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])
    got = L.ratio_interval(num, den)
    # R = 1; num − R den = (−1, 0, 1): s = 1, half-width t(0.975, 2) / √3 / 2
    assert got.mean == 1.0 and got.hi - 1.0 == pytest.approx(4.302652729911275 / np.sqrt(3) / 2, rel=1e-9)
    assert np.isnan(L.ratio_interval(num, np.zeros(3)).lo)
    assert L.ratio_interval(np.array([1.0, np.nan]), np.ones(2)).n_nonfinite == 1


def test_the_ladder_figure_draws_each_rung_the_estimators_and_a_diverging_model():
    """One panel per n with the model's means and CE, every-visit MC and the constant as lines at their MSVE; a model
    that diverges run deeper is marked on the top edge, never drawn off the canvas; the console line names it."""
    from ictd_interp.analyses.figures.ladder_plot import OFF_SCALE
    from ictd_interp.analyses.figures.style import text_outside
    from ictd_interp.analyses.metrics.intervals import Interval
    from ictd_interp.analyses.reports.shared_figures import ladder_of

    cfg = TrainConfig.from_preset("quick").model
    lad = L.ladder(HookedICTDTransformer.from_theta_star(replace(cfg, n_layers=12)), DIST, 5, True)
    fig = ladder_of(lad)
    assert [ax.get_title() for ax in fig.axes] == ["n = 30", "n = 100", "n = 400"] and text_outside(fig) == []
    assert fig.texts[0].get_text().startswith(f"The verdict ladder: {lad.level} (MSVE on 256 held-out tasks")
    for ax, r in zip(fig.axes, lad.rungs):
        (model,) = [line for line in ax.get_lines() if line.get_marker() == "o"]
        np.testing.assert_allclose(model.get_ydata(), [i.mean for i in r.msve])
        drawn = {line.get_label(): line.get_ydata()[0] for line in ax.get_lines()}
        for name in ("constant", "tabular_mc", L.CE, L.TOP):
            assert drawn[L.SHORT[name]] == pytest.approx(r.estimators[name].mean)
    huge = Interval(1e12, 1e11, 1e13, 256)
    last = replace(lad.rungs[0], msve=[*lad.rungs[0].msve[:3], huge])
    diverging = ladder_of(replace(lad, rungs=[last]))
    ax = diverging.axes[0]
    top = OFF_SCALE * max(last.estimators[name].mean for name in ("constant", "tabular_mc", L.CE, L.TOP))
    (model,), (triangle,) = ([line for line in ax.get_lines() if line.get_marker() == m] for m in ("o", "^"))
    assert len(model.get_ydata()) == 3 and list(triangle.get_ydata()) == [top]  # the fourth: on the top edge
    assert ax.get_ylim()[1] < 1e11 and text_outside(diverging) == []
    brief = L.ladder_brief(lad)
    assert brief.startswith(lad.level) and f"CE {lad.rungs[-1].estimators[L.CE].mean:.3g}" in brief
