"""The task distribution: one object for training, evaluation and analyses, on any MRP family."""

import pytest
import torch

from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.tasks.mrp import boyan_chains
from ictd_interp.tasks.sampling import sample_from, sample_tasks
from ictd_interp.tasks.sources import loop_mrps


@pytest.mark.parametrize("kind,d", [("uniform", 3), ("onehot", 6)])
def test_boyan_draws_exactly_what_sample_tasks_draws(kind, d):
    """Runs and shipped models trained before the distribution object existed stay reproducible: the
    split draws (``draw_tasks``/``tasks_from_draws``) build what the generic path draws and builds."""
    a = sample_from(TaskDistribution(n_states=6, d_features=d, context_len=9, feature_kind=kind), 5, seed=3)
    b = sample_tasks(5, 6, d, 9, 0.9, feature_kind=kind, seed=3)
    assert torch.equal(a.prompt, b.prompt) and torch.equal(a.states, b.states) and torch.equal(a.mrp.P, b.mrp.P)
    assert torch.equal(a.mrp.r, b.mrp.r) and torch.equal(a.mrp.mu0, b.mrp.mu0)


def test_loop_family_draws_loop_mrps():
    tasks = sample_from(TaskDistribution(family="loop", n_states=6, d_features=3, context_len=9), 4, seed=0)
    expected = loop_mrps(4, 6, 0.9, generator=torch.Generator().manual_seed(0))
    assert torch.equal(tasks.mrp.P, expected.P) and torch.equal(tasks.mrp.r, expected.r)
    assert not torch.equal(tasks.mrp.P, boyan_chains(4, 6, 0.9, torch.Generator().manual_seed(0)).P)


def test_a_mixture_task_is_its_picked_familys_draw():
    """The picks first, then each family's MRPs for its tasks in ``MIXED``'s order, from one generator: rebuilt by
    hand; over 4,000 tasks each family's share is 1/4 within four standard errors."""
    from ictd_interp.tasks.families import MIXED, mixture
    from ictd_interp.tasks.sources import random_mrps

    dist = TaskDistribution(family="mixture", n_states=6, d_features=3, context_len=9, gamma=0.8)
    mrp = mixture(dist, 40, torch.Generator().manual_seed(5))
    gen = torch.Generator().manual_seed(5)
    picks = torch.randint(4, (40,), generator=gen)
    makers = [
        lambda k: boyan_chains(k, 6, 0.8, gen),
        lambda k: loop_mrps(k, 6, 0.8, generator=gen),
        lambda k: random_mrps(k, 6, 0.8, generator=gen),
        lambda k: random_mrps(k, 6, 0.8, density=0.2, generator=gen),
    ]
    assert MIXED == ("boyan", "loop", "random", "random-sparse") and mrp.gamma == 0.8
    for k, make in enumerate(makers):
        where = (picks == k).nonzero().flatten()
        assert len(where) > 0
        expected = make(len(where))
        assert torch.equal(mrp.P[where], expected.P) and torch.equal(mrp.r[where], expected.r)
        assert torch.equal(mrp.mu0[where], expected.mu0.expand(len(where), -1))
    dense = (sample_from(dist, 4000, seed=1).mrp.P > 0).all(-1).all(-1)  # only the dense family has every edge
    assert abs(dense.float().mean().item() - 0.25) < 4 * (0.25 * 0.75 / 4000) ** 0.5


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(family="grid"), "family: must be one of"),
        (
            dict(feature_kind="onehot", d_features=3, n_states=5),
            "d_features: one-hot features need d_features >= n_states",
        ),
        (dict(n_states=1), "the boyan family needs at least 2 states"),
        (dict(terminal="wrap"), "terminal"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TaskDistribution(**kwargs)


def test_gym_one_hot_needs_the_environments_states():
    pytest.importorskip("gymnasium")
    dist = TaskDistribution(family="gym:FrozenLake-v1", d_features=4, feature_kind="onehot")  # 16 states
    with pytest.raises(ValueError, match="4 < 16 states of gym:FrozenLake-v1"):
        sample_from(dist, 2, seed=0)


def test_given_mrps_and_features_draw_only_the_trajectories():
    """``sample_from`` with ``mrp=`` and ``features=`` draws nothing but the trajectories, from the given
    generator's first number on; per-task features stay per task, a shared matrix is shared."""
    from ictd_interp.tasks.trajectory import sample_trajectories

    mrp = loop_mrps(3, 5, 0.8, generator=torch.Generator().manual_seed(1))
    X = torch.rand(3, 5, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    dist = TaskDistribution(family="random", n_states=5, d_features=2, context_len=7, gamma=0.8)
    tasks = sample_from(dist, 3, seed=4, mrp=mrp, features=X)
    assert torch.equal(tasks.states, sample_trajectories(mrp, 7, generator=torch.Generator().manual_seed(4)))
    assert torch.equal(tasks.features, X) and tasks.mrp is mrp
    shared = sample_from(dist, 3, seed=4, mrp=mrp, features=X[0])
    assert torch.equal(shared.features[2], X[0]) and torch.equal(shared.states, tasks.states)


@pytest.mark.parametrize("shape", [(5, 3), (4, 5, 2), (5,)])
def test_given_features_of_the_wrong_shape_are_named(shape):
    mrp = loop_mrps(3, 5, 0.8, generator=torch.Generator().manual_seed(1))
    dist = TaskDistribution(family="random", n_states=5, d_features=2, context_len=7, gamma=0.8)
    with pytest.raises(ValueError, match=r"features: expected shape \(5, 2\)"):
        sample_from(dist, 3, seed=0, mrp=mrp, features=torch.zeros(shape))


def test_a_mistyped_family_or_choice_names_the_closest():
    from ictd_interp.config.fields import check_choice, did_you_mean
    from ictd_interp.config.tasks import check_family

    with pytest.raises(ValueError, match=r"got 'lop'; did you mean 'loop'\?$"):
        check_family("lop")
    with pytest.raises(ValueError, match=r"got 'tdd'; did you mean 'td'\?$"):
        check_choice("objective", "tdd", ("td", "mc"))
    assert did_you_mean("xyzzy", ("td", "mc")) == "" and did_you_mean(3, ("td",)) == ""
