"""The training batch stream: batches built in blocks are, bit for bit, the batches drawn one at a time
(and those a plain ``window_batch`` + depth draw gives), and a checkpoint's generator state is the one after
the batches handed out, wherever in a block it falls."""

import pytest
import torch

from ictd_interp.config.train import TrainConfig
from ictd_interp.training.batch_stream import BLOCK, BLOCK_BYTES, BatchStream, block_size
from ictd_interp.training.batches import window_batch
from ictd_interp.training.objectives import objective

SMALL = dict(n_states=5, d_features=3, context_len=6, tasks_per_batch=3, windows_per_task=2, n_layers=2, tied=True)
CASES = {
    "td": {},
    "supervised (v_pi)": {"objective": "supervised"},
    "mc (longer trajectories)": {"objective": "mc"},
    "one-hot features": {"feature_kind": "onehot", "d_features": 5},
    "sampled depths": {"train_depths": "1:4"},
    "float64": {"dtype": "float64"},
}


def config(**overrides) -> TrainConfig:
    return TrainConfig.from_flat(**{**SMALL, **overrides})


def fields(batch, depth):
    return batch.prompts, batch.query_reward, batch.query_value, batch.query_return, depth


def assert_same(a, b):
    for x, y in zip(fields(*a), fields(*b)):
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y)
        else:
            assert x == y


@pytest.mark.parametrize("case", CASES)
def test_blocks_hand_out_the_batches_and_generator_states_of_one_at_a_time(case):
    cfg = config(**CASES[case])
    dtype = cfg.model.torch_dtype
    blocked = BatchStream(cfg, torch.Generator().manual_seed(3), dtype, block=4)
    single = BatchStream(cfg, torch.Generator().manual_seed(3), dtype, block=1)
    reference = torch.Generator().manual_seed(3)
    for _ in range(11):  # two blocks and a part
        a, b = next(blocked), next(single)
        assert_same(a, b)
        assert torch.equal(blocked.generator_state(), single.generator_state())
        # block 1 is the plain draw: window_batch, then the depth from the same generator
        plain = window_batch(
            cfg.tasks,
            cfg.tasks_per_batch,
            cfg.windows_per_task + 1,
            generator=reference,
            mc_horizon=objective(cfg.objective).mc_horizon(cfg),
            dtype=dtype,
            with_values=cfg.objective == "supervised",
        )
        depth = None if cfg.depth_range is None else 1 + int(torch.randint(4, (1,), generator=reference))
        assert_same((plain.to("cpu", dtype), depth), b)
        assert torch.equal(reference.get_state(), single.generator_state())
    assert blocked._ready  # the last state above was replayed from inside a block


def test_a_stream_restarted_from_a_mid_block_state_continues_the_sequence():
    cfg = config()
    whole = BatchStream(cfg, torch.Generator().manual_seed(0), torch.float32, block=4)
    first = [next(whole) for _ in range(6)]
    cut = BatchStream(cfg, torch.Generator().manual_seed(0), torch.float32, block=4)
    for _ in range(3):
        next(cut)
    restarted = torch.Generator()
    restarted.set_state(cut.generator_state())
    resumed = BatchStream(cfg, restarted, torch.float32, block=4)
    for expected in first[3:]:
        assert_same(next(resumed), expected)


def test_block_size_is_decided_by_family_and_prompt_bytes():
    assert block_size(config(), torch.float32) == BLOCK
    assert block_size(config(family="loop"), torch.float32) == 1  # draws not split from construction
    # 64 tasks x 17 windows x 1001 positions x 7 rows x 4 bytes = 30.5 MB: one block of one batch
    big = config(tasks_per_batch=64, windows_per_task=16, context_len=1000)
    assert block_size(big, torch.float32) == 1 and 64 * 17 * 1001 * 7 * 4 < BLOCK_BYTES < 2 * 64 * 17 * 1001 * 7 * 4
    # 8 tasks x 17 x 31 x 7 x 8 bytes = 236 kB: the full block
    assert block_size(config(tasks_per_batch=8, windows_per_task=16, context_len=30), torch.float64) == BLOCK


def test_a_task_pool_draws_its_tasks_from_that_many_chains_and_shuffled_rewards_keep_their_values():
    from ictd_interp.config.train import TrainConfig
    from ictd_interp.training.batch_stream import BatchStream

    def rows(**settings):
        config = TrainConfig.from_preset("quick", tasks_per_batch=8, **settings)
        stream = BatchStream(config, torch.Generator().manual_seed(0), torch.float64)
        batches = [next(stream)[0] for _ in range(12)]
        return config, torch.cat([b.prompts for b in batches])

    config, plain = rows()
    _, pooled = rows(task_pool=3)
    features = lambda p: {tuple(r) for r in p[..., :4].reshape(-1, 4).tolist()}  # noqa: E731
    assert len(features(pooled)) == 3 * config.tasks.n_states < len(features(plain))  # 3 chains' 10 states each
    _, shuffled = rows(shuffle_rewards=True)
    w, reward = config.windows_per_task + 1, config.tasks.d_features
    first = lambda p: p.view(-1, w, *p.shape[1:])[:, 0]  # noqa: E731 (each task's first window: positions 0..n)
    # the first batch: the same states and features (its reward order is drawn after them), other rewards
    assert torch.equal(first(shuffled)[:8, :, :reward], first(plain)[:8, :, :reward])
    assert not torch.equal(first(shuffled)[:8, :, reward], first(plain)[:8, :, reward])
    # each reward row is the trajectory's rewards r(S_j) in the order drawn
    from ictd_interp.tasks.sampling import sample_from
    from ictd_interp.training.batches import windows_from_tasks

    tasks = sample_from(config.tasks, 4, seed=1, length=config.tasks.context_len + 3)
    order = torch.rand(4, config.tasks.context_len + 4, generator=torch.Generator().manual_seed(2)).argsort(dim=1)
    batch = windows_from_tasks(tasks, config.tasks, 4, 0, torch.float64, False, reward_order=order)
    sequence = torch.gather(tasks.mrp.r, 1, tasks.states)  # r(S_0) ... r(S_{n+3})
    n = config.tasks.context_len
    got = batch.prompts.view(4, 4, n + 1, -1)[:, 0, :n, reward]
    assert torch.equal(got, torch.gather(sequence, 1, order)[:, :n].to(got.dtype))
    with pytest.raises(ValueError, match="shuffle_rewards: a null of the TD objective"):
        TrainConfig.from_preset("quick", shuffle_rewards=True, objective="mc")


@pytest.mark.parametrize("family", ["loop", "mdp-chain"])
def test_a_finite_pool_and_shuffled_rewards_work_on_a_family_without_split_draws(family):
    """Through the registry every family takes every task option: a pool of 3 tasks gives 3 tasks' features only;
    shuffled rewards keep the states and features of the first batch and change its rewards; a stream resumed from
    ``generator_state`` continues with the same batches."""
    extra = {"objective": "td"} if family.startswith("mdp") else {}

    def stream(**settings):
        config = TrainConfig.from_preset("quick", tasks_per_batch=8, family=family, **extra, **settings)
        return config, BatchStream(config, torch.Generator().manual_seed(0), torch.float64)

    def rows(**settings):
        config, s = stream(**settings)
        return config, torch.cat([next(s)[0].prompts for _ in range(6)])

    config, plain = rows()
    d, reward = config.tasks.d_features, config.tasks.d_features
    features = lambda p: {tuple(r) for r in p[..., :d].reshape(-1, d).tolist()}  # noqa: E731
    _, pooled = rows(task_pool=3)
    states = len(features(pooled))
    assert 3 <= states <= 3 * config.tasks.n_states * (config.tasks.n_actions or 1) < len(features(plain))
    _, shuffled = rows(shuffle_rewards=True)
    w = config.windows_per_task + 1
    first = lambda p: p.view(-1, w, *p.shape[1:])[:, 0]  # noqa: E731
    assert torch.equal(first(shuffled)[:8, :, :reward], first(plain)[:8, :, :reward])
    assert not torch.equal(first(shuffled)[:8, :, reward], first(plain)[:8, :, reward])
    _, a = stream(task_pool=3, shuffle_rewards=True)
    [next(a) for _ in range(2)]
    config, b = stream(task_pool=3, shuffle_rewards=True)
    b.generator.set_state(a.generator_state())
    assert torch.equal(next(a)[0].prompts, next(b)[0].prompts)
