"""Counter-based draws (``ictd_interp.tasks.counter``) and the device stream built on them: the tensors equal a
pure-Python splitmix64, the numbers look uniform and independent, the torch walk equals the NumPy walk, and a run's
batch is the same alone, in a stack and after a resume."""

import pytest
import torch
from scipy import stats

from ictd_interp.config.train import TrainConfig
from ictd_interp.tasks.counter import CHAIN_P, POOL, STEPS, python_uniform, step_keys, uniforms
from ictd_interp.tasks.mrp import boyan_chains
from ictd_interp.tasks.trajectory import trajectories_from_uniforms, trajectory_uniforms, walk
from ictd_interp.training.device_stream import DeviceBatches


def test_the_tensors_are_splitmix64_bit_for_bit():
    seeds = torch.tensor([0, 1, 2**40 + 7, -3], dtype=torch.int64)
    for step, what in ((0, CHAIN_P), (12345, STEPS), (POOL, CHAIN_P)):
        got = uniforms(step_keys(seeds, step, what), 3, 5)
        for r, seed in enumerate(seeds.tolist()):
            expected = [python_uniform(seed, step, what, i) for i in range(15)]
            assert got[r].flatten().tolist() == expected  # exact: the same 53 bits


def test_the_draws_are_uniform_and_streams_independent():
    u = uniforms(step_keys(torch.arange(4), 7, STEPS), 50_000)
    assert stats.kstest(u.flatten().numpy(), "uniform").pvalue > 1e-3
    assert u.min() >= 0 and u.max() < 1
    corr = torch.corrcoef(u)  # four seeds' streams
    assert (corr - torch.eye(4)).abs().max() < 0.02
    next_step = uniforms(step_keys(torch.arange(4), 8, STEPS), 50_000)
    assert abs(float(torch.corrcoef(torch.stack([u[0], next_step[0]]))[0, 1])) < 0.02
    assert stats.kstest(uniforms(step_keys(torch.arange(4), 7, STEPS), 50_000).flatten().numpy(), "norm").pvalue < 1e-6


def test_the_torch_walk_is_the_numpy_walk():
    gen = torch.Generator().manual_seed(0)
    mrp = boyan_chains(64, 9, 0.9, gen)
    u0, u = trajectory_uniforms(gen, 64, 40)
    assert torch.equal(walk(mrp.P, mrp.mu0, u0, u), trajectories_from_uniforms(mrp.P, mrp.mu0, u0, u))


def config(seed=0, **settings):
    small = {"tasks_per_batch": 4, "windows_per_task": 3, "steps": 10, "sampler": "device"}
    return TrainConfig.from_preset("quick", seed=seed, **{**small, **settings})


def test_a_runs_batch_is_the_same_alone_in_a_stack_and_after_a_resume():
    runs = [config(0), config(1, task_pool=3), config(2, shuffle_rewards=True), config(3, task_pool=5)]
    stacked = DeviceBatches(runs, torch.float64).at(6)
    for i, run in enumerate(runs):
        alone = DeviceBatches([run], torch.float64).at(6)
        assert torch.equal(stacked.prompts[i], alone.prompts) and torch.equal(
            stacked.query_reward[i], alone.query_reward
        )
    one = DeviceBatches([runs[0]], torch.float64, stacked=True).at(6)  # a stack of one has its model axis
    assert torch.equal(one.prompts, DeviceBatches([runs[0]], torch.float64).at(6).prompts[None])
    with pytest.raises(ValueError, match="4 runs draw a stack's batch"):
        DeviceBatches(runs, torch.float64, stacked=False)
    stream = DeviceBatches([runs[1]], torch.float64)
    batches = [next(stream)[0] for _ in range(4)]
    resumed = DeviceBatches([runs[1]], torch.float64, step=3)
    assert torch.equal(next(resumed)[0].prompts, batches[3].prompts)
    assert not torch.equal(batches[2].prompts, batches[3].prompts)  # steps draw other tasks
    # the pool: 3 tasks' features across many steps; the shuffled run keeps states and features, not rewards
    d = runs[1].tasks.d_features
    seen = {
        tuple(r)
        for s in range(20)
        for r in DeviceBatches([runs[1]], torch.float64).at(s).prompts[..., :d].reshape(-1, d).tolist()
    }
    assert len(seen) == 3 * runs[1].tasks.n_states
    plain, shuffled = DeviceBatches([config(2)], torch.float64).at(6), stacked.prompts[2]
    assert torch.equal(plain.prompts[..., : d + 0], shuffled[..., :d])
    assert not torch.equal(plain.prompts[..., d], shuffled[..., d])


def test_the_sampler_is_a_setting_refused_where_it_cannot_draw_and_written_only_when_set():
    with pytest.raises(ValueError, match="sampler: 'device' draws the uniforms of a family with split draws"):
        config(family="loop")
    assert "sampler" not in TrainConfig.from_preset("quick").to_dict()  # earlier runs' files unchanged
    assert config().to_dict()["sampler"] == "device"
    assert TrainConfig.from_dict(config().to_dict()) == config()


@pytest.mark.parametrize("objective", ["td", "mc", "supervised"])
def test_a_device_batch_has_a_host_batchs_shapes_and_dtypes(objective):
    from ictd_interp.training.batch_stream import BatchStream

    host_config = config(sampler="host", objective=objective, mc_horizon=5)
    host = next(BatchStream(host_config, torch.Generator().manual_seed(0), torch.float32))[0]
    drawn = DeviceBatches([config(objective=objective, mc_horizon=5)], torch.float32).at(0)
    for name in ("prompts", "query_reward", "query_value", "query_return"):
        a, b = getattr(host, name), getattr(drawn, name)
        assert (a is None) == (b is None) and (a is None or (a.shape, a.dtype) == (b.shape, b.dtype)), name
    assert drawn.n_windows == host.n_windows
