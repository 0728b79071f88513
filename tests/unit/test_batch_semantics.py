"""The two samplers (host generator, device counters) give batches of one meaning: a finite pool's tasks are rows of
the run's pool, picked about uniformly; shuffled rewards are one permutation in time of the same trajectory, shared
by every window; sampled depths are uniform over ``LO..HI``. Not only shapes: each check fails on a sampler that
draws fresh tasks for a pooled run, shuffles windows apart, or skews its depths."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from ictd_interp.config.train import TrainConfig
from ictd_interp.training.batch_recipe import BatchRecipe, batch_refusal
from ictd_interp.training.streams import open_stream

SAMPLERS = ("host", "device")
SMALL = {"tasks_per_batch": 8, "windows_per_task": 4, "context_len": 12}  # every batch here: 8 tasks, 5 windows


def stream(sampler: str, **settings):
    settings = {**SMALL, **settings}
    config = TrainConfig.from_preset("quick", sampler=sampler, **settings)
    return config, open_stream(config, torch.Generator().manual_seed(config.seed), torch.float64)


def feature_rows(config: TrainConfig, batch) -> list[set]:
    """Each task's feature rows (the states its windows visit)."""
    d, w = config.tasks.d_features, batch.n_windows
    rows = batch.prompts.view(-1, w, *batch.prompts.shape[1:])[..., :d].flatten(1, 2)  # [task, window * pos, d]
    return [set(map(tuple, task.tolist())) for task in rows]


def task_rows(tasks: list[set]) -> list[int]:
    """Which pool row each task is on: tasks sharing a feature row share a chain (its features are drawn with it),
    so the rows are the connected components of tasks through shared feature rows."""
    owner: dict[tuple, int] = {}
    parent = list(range(len(tasks)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i, rows in enumerate(tasks):
        for row in rows:
            parent[root(owner.setdefault(row, i))] = root(i)
    return [root(i) for i in range(len(tasks))]


def reward_sequences(config: TrainConfig, batch) -> torch.Tensor:
    """Each task's rewards over its span, read off its windows: positions 0..n-1 of window 0, then every query's."""
    n, w, r = config.tasks.context_len, batch.n_windows, config.tasks.d_features
    prompts = batch.prompts.view(-1, w, *batch.prompts.shape[1:])
    return torch.cat([prompts[:, 0, :n, r], batch.query_reward], dim=1)  # [task, n + w]


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_a_pooled_runs_tasks_are_its_pools_rows_picked_about_uniformly(sampler):
    config, pooled = stream(sampler, task_pool=3)
    batches = [next(pooled)[0] for _ in range(12)]
    tasks = [rows for batch in batches for rows in feature_rows(config, batch)]
    picks = Counter(task_rows(tasks))
    assert len(picks) == 3 and sum((c - 32) ** 2 / 32 for c in picks.values()) < 13.8, picks.values()  # χ², p 0.001
    assert len(set().union(*tasks)) <= 3 * config.tasks.n_states  # no state outside the pool's three chains
    _, other = stream(sampler, task_pool=3, seed=5)  # another seed, another pool
    assert not set().union(*tasks) & set().union(*feature_rows(config, next(other)[0]))
    _, fresh = stream(sampler)
    assert len(Counter(task_rows([r for _ in range(2) for r in feature_rows(config, next(fresh)[0])]))) == 16
    # a pooled task's trajectory is its own: two picks of one row walk it differently
    rows, rewards = task_rows(feature_rows(config, batches[0])), reward_sequences(config, batches[0])
    same = [i for i, r in enumerate(rows) if r == rows[0]]
    assert len(same) >= 2 and not torch.equal(rewards[same[0]], rewards[same[1]])


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_shuffled_rewards_are_one_permutation_of_the_same_trajectory_shared_by_every_window(sampler):
    config, plain = stream(sampler)
    _, shuffled = stream(sampler, shuffle_rewards=True)
    a, b = next(plain)[0], next(shuffled)[0]
    d = config.tasks.d_features  # the first batch's states, in order: only the rewards move
    assert torch.equal(a.prompts[..., :d], b.prompts[..., :d])
    ra, rb = reward_sequences(config, a), reward_sequences(config, b)
    assert torch.equal(ra.sort(dim=1).values, rb.sort(dim=1).values)  # each task's rewards, permuted
    assert (ra != rb).any(dim=1).float().mean() > 0.5
    n, w, r = config.tasks.context_len, b.n_windows, config.tasks.d_features
    windows = b.prompts.view(-1, w, *b.prompts.shape[1:])[..., r]  # [task, window, pos]
    for t in range(w):  # window t shows the sequence's positions t .. t+n-1: one permutation for all windows
        assert torch.equal(windows[:, t, :n], rb[:, t : t + n]), t


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_sampled_depths_are_uniform_over_the_range_and_inside_it(sampler):
    config, depths = stream(sampler, train_depths="4:9", tasks_per_batch=1, windows_per_task=1)
    drawn = [next(depths)[1] for _ in range(600)]
    counts = Counter(drawn)
    assert set(counts) == set(range(4, 10))
    chi2 = sum((c - 100) ** 2 / 100 for c in counts.values())
    assert chi2 < 20.5, counts  # 5 degrees of freedom, p = 0.001
    pairs = Counter(zip(drawn, drawn[1:]))  # each step's depth independent of the last: 36 pairs, about equally often
    chi2 = sum((pairs.get((i, j), 0) - 599 / 36) ** 2 / (599 / 36) for i in range(4, 10) for j in range(4, 10))
    assert chi2 < 66.6, pairs  # 35 degrees of freedom, p = 0.001
    assert next(stream(sampler)[1])[1] is None


def test_in_a_device_stack_each_run_draws_from_its_own_pool_or_none():
    """Runs 0 and 2 pool three tasks each, run 1 none: each pooled run's tasks are rows of its own pool (three
    chains, none shared with the other), the other's all fresh."""
    from ictd_interp.training.device_stream import DeviceBatches

    settings = {**SMALL, "sampler": "device"}
    configs = [TrainConfig.from_preset("quick", seed=s, task_pool=p, **settings) for s, p in ((0, 3), (1, 0), (2, 3))]
    stack = DeviceBatches(configs, torch.float64)
    runs: list[list[set]] = [[], [], []]
    for step in range(12):
        batch = stack.at(step)  # prompts [run, window, pos, d_model]
        for run in range(3):
            runs[run] += feature_rows(configs[run], SimpleNamespace(prompts=batch.prompts[run], n_windows=5))
    assert [len(Counter(task_rows(r))) for r in runs] == [3, 96, 3]
    assert not set().union(*runs[0]) & set().union(*runs[2])


def test_runs_whose_objectives_regress_on_two_kinds_of_value_cannot_share_a_batch():
    configs = [
        TrainConfig.from_preset("quick", family="mdp-chain", objective=o) for o in ("supervised", "supervised-q-star")
    ]
    assert batch_refusal(configs[:1]) is None
    assert batch_refusal(configs) == (
        "their objectives regress on different true values (q_star, v_pi): one batch holds one"
    )
    with pytest.raises(ValueError, match="objectives: their objectives regress on different true values"):
        BatchRecipe.of(configs)
    mixed = [TrainConfig.from_preset("quick", objective=o, mc_horizon=5) for o in ("td", "mc", "supervised")]
    recipe = BatchRecipe.of(mixed)  # one batch with every objective's needs
    assert (recipe.horizon, recipe.with_values, recipe.values, recipe.length) == (5, True, "v_pi", 30 + 16 + 5)
