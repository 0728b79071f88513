"""Population NEU: per-task gradients equal autograd through the positional forward, the U-statistic is the
pairwise definition, and the zero predictor meets its closed form within the interval."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from ictd_interp import HookedICTDTransformer
from ictd_interp.analyses.metrics.neu import per_task_updates, population_neu, zero_model, zero_predictor_neu
from ictd_interp.analyses.metrics.neu_intervals import (
    calibrated_interval,
    difference_interval,
    neu_interval,
    tasks_needed,
)
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.tasks.sampling import sample_from
from ictd_interp.training.batches import windows_from_tasks
from ictd_interp.training.objectives import expected_update
from tests.conftest import make_cfg

DIST = TaskDistribution(n_states=5, d_features=3, context_len=8, gamma=0.9)


@pytest.mark.parametrize("tied", [True, False])
def test_per_task_updates_equal_autograd_through_the_hooked_model(tied):
    """The mean of the per-task u_i is the batch's expected update (objectives.expected_update), entry by entry."""
    tasks = sample_from(DIST, 6, seed=0, length=8 + 4)
    cfg = make_cfg(n_layers=3, tied=tied, seed=1, init_scale=0.3)
    batch = windows_from_tasks(tasks, DIST, 5, 0, torch.float64, False)
    for model in (HookedICTDTransformer(cfg), HookedICTDTransformer.from_theta_star(cfg)):
        full = expected_update(model, batch).view(-1, 2, 1, 6, 6)  # per unique layer: A, then V
        reference = torch.cat([full[:, 0, 0, :3, :3].flatten(1), full[:, 1, 0, 5]], 1).flatten()
        mine = per_task_updates(model, tasks, 8, 3).mean(0)
        assert (mine - reference).abs().max() < 1e-12 and reference.abs().max() > 1e-3


def test_the_u_statistic_is_the_mean_over_pairs_of_tasks():
    u = np.random.default_rng(0).normal(size=(64, 5)) + 0.3
    pairs = [u[i] @ u[j] for i in range(64) for j in range(64) if i != j]
    out = neu_interval(u, groups=8)
    assert out.estimate == pytest.approx(np.mean(pairs), rel=1e-12)
    assert out.lo < 5 * 0.09 < out.hi  # ||E u||^2 = 5 * 0.3^2


def test_a_model_against_itself_is_undecided_and_noise_is_not_a_difference():
    u = np.random.default_rng(1).normal(size=(256, 4))
    same = difference_interval(u, u.copy())
    assert same.estimate == 0 and same.verdict == "undecided"
    other = difference_interval(u, np.random.default_rng(2).normal(size=(256, 4)))
    assert other.lo < 0 < other.hi and other.verdict == "undecided"  # both have E u = 0
    shifted = difference_interval(u + 1.0, u)
    assert shifted.verdict == "higher" and shifted.lo > 0  # 4.0 more NEU
    assert tasks_needed(100, 2.0, 1.0) == 400 and tasks_needed(100, 0.5, 1.0) == 100 and tasks_needed(100, 1, 0) is None


@pytest.mark.parametrize(
    "dist",
    [
        TaskDistribution(d_features=4, context_len=10, gamma=0.9),
        TaskDistribution(n_states=6, d_features=6, context_len=20, gamma=0.8, feature_kind="onehot", feature_scale=2.0),
    ],
    ids=["uniform-n10", "onehot-n20"],
)
def test_the_zero_predictor_at_depth_one_meets_its_closed_form(dist):
    """Simulated trajectories (population_neu) against the exact expectation over trajectories (closed form)."""
    model = zero_model(make_cfg(d_features=dist.d_features, n_layers=1, tied=True))
    simulated = population_neu(model, dist, dist.context_len, 1, n_tasks=8192, seed=0)
    closed = zero_predictor_neu(dist, dist.context_len, 1, n_tasks=32768, seed=1)
    assert simulated.lo <= closed.estimate <= simulated.hi
    assert closed.lo > 0 and closed.half_width < 0.2 * closed.estimate  # a quantity measured, not noise


def test_the_zero_predictors_neu_grows_as_L_squared_when_tied_and_L_per_layer():
    tasks = sample_from(DIST, 16, seed=2, length=8 + 4)
    one = per_task_updates(zero_model(make_cfg(n_layers=1, tied=True)), tasks, 8, 1)
    tied = per_task_updates(zero_model(make_cfg(n_layers=1, tied=True)), tasks, 8, 5)
    assert (tied - 5 * one).abs().max() < 1e-13
    per_layer = per_task_updates(zero_model(make_cfg(n_layers=5, tied=False)), tasks, 8, 5)
    assert (per_layer - one.repeat(1, 5)).abs().max() < 1e-13
    closed = [zero_predictor_neu(DIST, 8, L, 512, 0, tied=t).estimate for L, t in ((1, True), (4, True), (4, False))]
    assert closed[1] == pytest.approx(16 * closed[0]) and closed[2] == pytest.approx(4 * closed[0])


def test_per_task_updates_refuse_a_short_trajectory_and_a_per_layer_model_at_another_depth():
    tasks = sample_from(DIST, 2, seed=0, length=8)
    with pytest.raises(ValueError, match="trajectories"):
        per_task_updates(zero_model(make_cfg(tied=True)), tasks, 8, 2)
    with pytest.raises(ValueError, match="own depth"):
        per_task_updates(zero_model(make_cfg(n_layers=2)), sample_from(DIST, 2, seed=0, length=12), 8, 3)


def test_a_diverging_model_is_not_finite_and_ranks_above_a_finite_one():
    u = np.random.default_rng(3).normal(size=(128, 4))
    huge = u.copy()
    huge[5] = 1e200  # finite, but its square is not (and beyond OVERFLOW)
    assert neu_interval(huge).n_nonfinite == 1
    assert difference_interval(u, huge).verdict == "lower" and difference_interval(huge, u).verdict == "higher"


def test_the_calibrated_interval_on_a_case_worked_by_hand():
    """u = (2 ± 1, 0) over 4 tasks: mean (2, 0), covariance diag(4/3, 0), so r = sqrt(q (4/3) / 4), q Hotelling's
    quantile for p = 2, N = 4; a single task is refused."""
    u = np.array([[3.0, 0.0], [1.0, 0.0], [3.0, 0.0], [1.0, 0.0]])
    q = 2 * 3 / 2 * stats.f.ppf(0.95, 2, 2)  # Hotelling: p (N - 1) / (N - p) F_{p, N - p}
    r = math.sqrt(q * (4 / 3) / 4)
    lo, hi = calibrated_interval(u)
    assert r > 2 and lo == 0.0 and hi == pytest.approx((2 + r) ** 2, rel=1e-12)  # q = 3 F(2, 2) = 57: r = sqrt(19)
    assert calibrated_interval(u - [2.0, 0.0]) == (0.0, pytest.approx(r**2, rel=1e-12))  # never below 0
    with pytest.raises(ValueError, match="needs at least 2 tasks"):
        calibrated_interval(u[:1])


def test_the_calibrated_interval_covers_at_a_fixed_point_where_the_jackknife_does_not():
    """At E u = 0 with one dominant direction the U-statistic is a centred chi-square: the jackknife's symmetric
    interval misses 0 in about 14% of samples; the calibrated one covers it (and covers away from 0)."""
    rng = np.random.default_rng(0)
    scales = np.r_[1.0, np.full(22, 0.02)]
    for mean, jackknife_covers in ((0.0, False), (0.2, None)):
        mu = np.r_[mean, np.zeros(22)]
        hits = np.array(
            [
                [e.lo <= mean**2 <= e.hi, e.calibrated_lo <= mean**2 <= e.calibrated_hi]
                for e in (neu_interval(mu + rng.standard_normal((512, 23)) * scales) for _ in range(200))
            ]
        )
        assert hits[:, 1].mean() >= 0.95
        if jackknife_covers is False:
            assert hits[:, 0].mean() < 0.9


def test_the_u_test_keeps_its_size_at_zero_and_has_the_power_it_promises():
    """Normal updates with E u = 0: the sign-flip U-test rejects at about 5%; with ||E u||^2 = 0.01 on the tasks
    ``tasks_to_detect`` asks for, at about 80% (100 replicates each: 5% +- 4.4%, 80% +- 8%)."""
    import numpy as np

    from ictd_interp.analyses.metrics.neu_intervals import stationary_z, tasks_to_detect, u_test

    rng = np.random.default_rng(7)
    shift = np.zeros(5)
    shift[0] = 0.1  # ||E u||^2 = 0.01
    need = tasks_to_detect(rng.normal(size=(2000, 5)) * 0.3)
    size = np.mean([u_test(rng.normal(size=(120, 5)) * 0.3, flips=200, seed=k) < 0.05 for k in range(100)])
    power = np.mean([u_test(rng.normal(size=(need, 5)) * 0.3 + shift, flips=200, seed=k) < 0.05 for k in range(100)])
    assert size <= 0.1 and 0.7 <= power <= 0.95
    assert stationary_z(rng.normal(size=(400, 5))) < 4.5 and stationary_z(rng.normal(size=(400, 5)) + 0.5) > 8
