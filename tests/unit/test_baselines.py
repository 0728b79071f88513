"""Baselines worked out by hand, and intervals that cover what they say they cover."""

import math

import numpy as np
import pytest
import torch

from ictd_interp import MRP
from ictd_interp.analyses.metrics import baselines
from ictd_interp.analyses.metrics.intervals import COSINE, NONNEGATIVE, paired, t_interval
from ictd_interp.tasks.sampling import TaskBatch

GAMMA = 0.5


def hand_tasks() -> TaskBatch:
    """States 0, 1, 0, 2 on a 3-state chain with r = (1, 2, 4); features e_s; one task.
    Rewards R_1..R_3 = r(0), r(1), r(0) = 1, 2, 1."""
    P = torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [1.0, 0.0, 0.0]], dtype=torch.float64)
    mrp = MRP(
        P[None],
        torch.tensor([[1.0, 2.0, 4.0]], dtype=torch.float64),
        torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64),
        GAMMA,
    )
    return TaskBatch(mrp, torch.eye(3, dtype=torch.float64)[None], torch.tensor([[0, 1, 0, 2]]))


def test_constant_and_monte_carlo_by_hand():
    tasks = hand_tasks()
    level = (1 + 2 + 1) / 3 / (1 - GAMMA)  # 8/3
    assert baselines.constant(tasks, GAMMA)[0].tolist() == pytest.approx([level] * 4)
    # returns G_0 = 1 + .5*2 + .25*1 = 2.25, G_1 = 2 + .5*1 = 2.5, G_2 = 1; state 0 visited at t = 0, 2
    mc = baselines.tabular_mc(tasks, GAMMA)[0].tolist()
    assert mc == pytest.approx([(2.25 + 1) / 2, 2.5, (2.25 + 1) / 2, level])  # state 2 only as the query


def test_tabular_td_fixed_point_by_hand():
    """Empirical MRP of the context: from 0 -> 1 once and -> 2 once, reward 1; from 1 -> 0, reward 2;
    state 2 is never a source, so it takes the constant c = 8/3.
    v0 = 1 + .5 (v1 + c) / 2, v1 = 2 + .5 v0  =>  v0 = 1 + .25 (2 + .5 v0) + .25 c  =>  .875 v0 = 1.5 + c/4."""
    tasks = hand_tasks()
    c = 8 / 3
    v0 = (1.5 + c / 4) / 0.875
    assert baselines.td_fixed_point(tasks, GAMMA)[0].tolist() == pytest.approx([v0, 2 + 0.5 * v0, v0, c], abs=1e-12)


def test_lstd_solves_its_normal_equations():
    """``w`` solves ``sum_k x_{k-1} (x_{k-1} - gamma x_k)^T w = sum_k x_{k-1} R_k`` (minimum-norm where state 2,
    never a source, leaves ``A`` singular), and ``v = X w``."""
    tasks = hand_tasks()
    x = tasks.x[0]
    A = sum(torch.outer(x[k], x[k] - GAMMA * x[k + 1]) for k in range(3))
    b = sum(x[k] * tasks.rewards[0, k] for k in range(3))
    w = torch.linalg.lstsq(A, b).solution
    assert baselines.lstd(tasks, GAMMA)[0].tolist() == pytest.approx((x @ w).tolist(), abs=1e-10)


def test_best_softmax_td_is_no_worse_than_theta_star_and_matches_its_values():
    from tests.conftest import make_star, make_tasks

    tasks = make_tasks(n_tasks=8)
    star = make_star(n_layers=3)
    with torch.no_grad():
        theta_star = star(tasks.prompt)
    assert (baselines.softmax_td_values(tasks, 0.9, 3, 1.0, 1.0) - theta_star).abs().max() < 1e-12
    best = baselines.best_softmax_td(tasks, 0.9, 3)
    assert best["msve"] <= float((theta_star - tasks.v_true).pow(2).mean()) + 1e-12


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.3, 8.0), (2.5, 0.125)])
def test_softmax_td_on_counts_equals_the_positional_iteration(alpha, beta):
    """``softmax_td_values`` runs on transition counts; the positional iteration of ``reference.td`` on features
    scaled by sqrt(beta) gives the same values to 1e-12, on the hand task (state 2 is only the query: never a
    source) and on loop chains."""
    from ictd_interp.config.tasks import TaskDistribution
    from ictd_interp.reference.td import softmax_td
    from ictd_interp.tasks.sampling import sample_from

    loops = sample_from(TaskDistribution(family="loop", n_states=6, d_features=3, context_len=25), 8, seed=1)
    for tasks, gamma in ((hand_tasks(), GAMMA), (loops, 0.9)):
        fast = baselines.softmax_td_values(tasks, gamma, 9, alpha, beta)
        slow = softmax_td(math.sqrt(beta) * tasks.x.double(), tasks.rewards.double(), gamma, 9, alpha)[:, -1]
        assert fast.shape == slow.shape and float((fast - slow).abs().max()) <= 1e-12 * float(slow.abs().max())


def test_msve_splits_into_level_and_shape():
    tasks = hand_tasks()
    values = tasks.v_true + torch.tensor([[1.0, 1.0, 1.0, 1.0]]) + torch.tensor([[0.5, -0.5, 0.5, -0.5]])
    parts = baselines.error_parts(values, tasks)
    assert parts["level"][0] == pytest.approx(1.0) and parts["shape"][0] == pytest.approx(0.25)
    assert parts["msve"][0] == pytest.approx(1.25)


def test_compare_says_which_baselines_the_model_beats():
    from tests.conftest import make_tasks

    tasks = make_tasks(n_tasks=40)
    result = baselines.compare(tasks.v_true + 0.01, tasks, 0.9, 2)  # a near-oracle "model"
    rows = result.estimators
    assert rows["constant"].model_minus_baseline.verdict == "lower" and rows["model"].model_minus_baseline is None
    assert "beats" in result.sentence and result.n_tasks == 40
    assert rows["model"].msve.mean == pytest.approx(1e-4)


def test_t_interval_by_hand_and_non_finite_values_are_counted():
    iv = t_interval([1.0, 2.0, 3.0])  # mean 2, s = 1, t_{2, .975} = 4.302653
    assert (iv.mean, iv.hi - iv.mean) == pytest.approx((2.0, 4.302653 / math.sqrt(3)), rel=1e-6)
    diverged = t_interval([1.0, float("inf"), 2.0])
    assert diverged.n_nonfinite == 1 and math.isnan(diverged.mean) and "1 of 3 diverged" in diverged.text()
    assert paired([1.0, 2.0, 3.0], [2.0, 3.1, 4.0]).verdict == "lower"
    assert paired([1.0, 2.0, 3.0], [1.1, 1.9, 3.0]).verdict == "undecided"


def test_an_interval_is_cut_to_the_range_its_quantity_can_take():
    cosines = [0.99, 1.0, 0.97]  # mean 0.98667, s = 0.015275, half-width 4.302653 s / sqrt(3) = 0.037946
    free, cut = t_interval(cosines), t_interval(cosines, bounds=COSINE)
    assert free.hi == pytest.approx(1.024613, abs=1e-6) and cut.hi == 1.0
    assert cut.lo == free.lo == pytest.approx(0.948721, abs=1e-6) and cut.mean == free.mean
    assert t_interval([0.1, 0.3, 2.0], bounds=NONNEGATIVE).lo == 0.0
    rounded = t_interval([1.0 + 2e-16, 1.0 + 2e-16], bounds=COSINE)  # a mean past the bound by rounding
    assert rounded.lo <= rounded.mean <= rounded.hi and rounded.mean > 1.0


@pytest.mark.parametrize("n_seeds", [2, 3, 5])
def test_t_interval_covers_the_mean_of_normal_data(n_seeds):
    """20,000 simulated studies per size: the t interval covers the true mean >= 0.93 of the time (a
    percentile bootstrap of the mean covers it about 50 %, 75 %, 85 % at 2, 3, 5 seeds)."""
    rng = np.random.default_rng(1)
    samples = rng.normal(3.0, 2.0, size=(20_000, n_seeds))
    covered = np.mean([(lambda iv: iv.lo <= 3.0 <= iv.hi)(t_interval(row)) for row in samples])
    assert covered >= 0.93
    boot = rng.integers(0, n_seeds, size=(1000, n_seeds))
    boot_cover = np.mean(
        [
            np.percentile(row[boot].mean(1), 2.5) <= 3.0 <= np.percentile(row[boot].mean(1), 97.5)
            for row in samples[:2000]
        ]
    )
    assert boot_cover < 0.9  # the interval this replaces was too narrow


def test_tabular_td_on_states_equals_the_positional_solve():
    from ictd_interp.analyses.metrics.baselines import td_fixed_point, td_fixed_point_states
    from tests.conftest import make_tasks

    tasks = make_tasks(n_tasks=32, n_states=8, n=15, seed=3)
    assert ((tasks.states[:, :-1] == tasks.states[:, -1:]).any(1)).float().mean() < 1  # unvisited queries present
    assert (td_fixed_point_states(tasks, 0.9) - td_fixed_point(tasks, 0.9)).abs().max() < 1e-12
