"""The training batch stream: batches built in blocks are, bit for bit, the batches drawn one at a time
(and those a plain ``window_batch`` + depth draw gives), and a checkpoint's generator state is the one after
the batches handed out, wherever in a block it falls."""

import pytest
import torch

from ictd_interp.config.train import TrainConfig
from ictd_interp.training.batch_stream import BLOCK, BLOCK_BYTES, BatchStream, block_size
from ictd_interp.training.batches import window_batch
from ictd_interp.training.objectives import OBJECTIVES

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
            mc_horizon=OBJECTIVES[cfg.objective].mc_horizon(cfg),
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
