"""A run's training batches from its host generator (``sampler = "host"``), in the order it draws them: the batch
of ``training.batch_recipe`` (docs/theory.md §6), its uniforms drawn in order.

Each step's batch (and, for depth-sampled runs, its depth) comes from the run's one data generator, so a
run resumed from a checkpoint's generator state draws exactly the batches an uninterrupted run draws.

Drawing a batch is a few dozen small tensor operations whose cost is mostly their overhead. For Boyan
chains the stream therefore draws the uniforms of ``block`` successive batches in order (each batch's,
then its depth: the same calls on the same generator as drawing them one at a time), builds all their
tasks and windows in one pass (the construction is row-wise, so each batch's rows are the ones it would
have alone) and hands the batches out one per step: the same batches and depths, bit for bit, at less
than half the cost per batch (benchmarks/train_throughput.py, ``data_ms``). Other families (their registry
entry has no ``split_draws``) draw one batch at a time; a finite task pool and shuffled rewards work on every
family. The block size is decided once, when the stream is made (``block_size``).
"""

from __future__ import annotations

from collections import deque
from typing import Optional, Union

import torch
from torch import Tensor

from ictd_interp.config.train import TrainConfig
from ictd_interp.tasks.sampling import TaskBatch, TaskDraws, draw_tasks, sample_from, tasks_from_draws
from ictd_interp.training.batch_recipe import POOL_SEED, BatchRecipe, shuffle_order
from ictd_interp.training.batches import WindowBatch
from ictd_interp.training.objectives import objective

BLOCK = 8  # batches drawn together: as cheap per batch as 16 (docs/performance.md, "Choices measured")
BLOCK_BYTES = 32 * 2**20  # at most this much of prompts built ahead


def block_size(config: TrainConfig, dtype: torch.dtype) -> int:
    """How many batches a stream builds at once: ``BLOCK`` for a family with split draws (Boyan chains), fewer
    when their prompts would exceed ``BLOCK_BYTES``; 1 for the other families."""
    if not config.tasks.split_draws:
        return 1
    t = config.tasks
    prompt_bytes = (
        config.tasks_per_batch
        * (config.windows_per_task + 1)
        * (t.context_len + 1)
        * (t.d_features + 3)
        * dtype.itemsize
    )
    return max(1, min(BLOCK, BLOCK_BYTES // prompt_bytes))


def task_pool(config: TrainConfig, length: int) -> Union[TaskDraws, TaskBatch]:
    """The ``config.task_pool`` distinct tasks a run with a finite pool draws from (seeded by ``config.seed``): their
    draws for a family with split draws, else the tasks themselves (their MRPs and features are what is pooled)."""
    generator = torch.Generator().manual_seed(config.seed + POOL_SEED)
    if config.tasks.split_draws:
        return draw_tasks(config.tasks, config.task_pool, generator, length)
    return sample_from(config.tasks, config.task_pool, generator=generator, length=1)


class BatchStream:
    """``next(stream)``: the next step's ``(batch, depth)`` on the run's device and dtype (depth None
    unless the run samples depths). ``generator_state()``: what a checkpoint saves."""

    def __init__(
        self, config: TrainConfig, generator: torch.Generator, dtype: torch.dtype, block: Optional[int] = None
    ):
        self.config, self.generator, self.dtype = config, generator, dtype
        self.block = block_size(config, dtype) if block is None else block
        self.recipe = BatchRecipe.of([config])
        self.objective = objective(config.objective)  # the trainer reads it
        self._ready: deque[tuple[WindowBatch, Optional[int]]] = deque()
        self._block_start: Optional[Tensor] = None
        self._handed = 0
        self.pool = task_pool(config, self.recipe.length) if config.task_pool else None

    def __iter__(self) -> "BatchStream":
        return self

    def __next__(self) -> tuple[WindowBatch, Optional[int]]:
        if not self._ready:
            self._fill()
        batch, depth = self._ready.popleft()
        self._handed += 1
        return batch.to(self.config.device, self.dtype), depth

    def generator_state(self) -> Tensor:
        """The data generator's state after the batches handed out so far (not after those built ahead):
        the draws of the handed ones replayed from the block's start."""
        if not self._ready:
            return self.generator.get_state()
        replay = torch.Generator()
        replay.set_state(self._block_start)
        for _ in range(self._handed):
            self._draw(replay)
        return replay.get_state()

    def _fill(self) -> None:
        cfg = self.config
        if not cfg.tasks.split_draws or (self.block == 1 and self.pool is None and not cfg.shuffle_rewards):
            self._ready.append(self._drawn_whole(self.generator))
            return
        self._block_start, self._handed = self.generator.get_state(), 0
        drawn, depths = zip(*(self._draw(self.generator) for _ in range(self.block)))
        draws, orders = zip(*drawn)
        tasks = tasks_from_draws(cfg.tasks, TaskDraws.cat(list(draws)))
        windows = self.recipe.windows(tasks, None if orders[0] is None else torch.cat(orders), self.dtype)
        b = cfg.tasks_per_batch
        self._ready.extend((windows.select_tasks(slice(i * b, (i + 1) * b)), depth) for i, depth in enumerate(depths))

    def _drawn_whole(self, generator: torch.Generator) -> tuple[WindowBatch, Optional[int]]:
        """One batch drawn whole (``sample_from``: a family without split draws, or one batch at a time), from a
        finite pool (the pool's MRPs and features, picked first, then fresh trajectories) or not, its rewards
        shuffled (the order drawn after the tasks) or not, then its depth."""
        cfg, b, length = self.config, self.config.tasks_per_batch, self.recipe.length
        if self.pool is None:
            tasks = sample_from(cfg.tasks, b, generator=generator, length=length)
        else:
            pick = torch.randint(cfg.task_pool, (b,), generator=generator)
            mrp, features = self.pool.mrp[pick], self.pool.features[pick]
            tasks = sample_from(cfg.tasks, b, generator=generator, length=length, mrp=mrp, features=features)
        return self.recipe.windows(tasks, self._order(generator), self.dtype), self._depth(generator)

    def _order(self, generator: torch.Generator) -> Optional[Tensor]:
        """Shuffling rewards: each trajectory's order of its rewards in time (None otherwise)."""
        if not self.config.shuffle_rewards:
            return None
        return shuffle_order(torch.rand(self.config.tasks_per_batch, self.recipe.span, generator=generator))

    def _draw(self, generator: torch.Generator) -> tuple[tuple[TaskDraws, Optional[Tensor]], Optional[int]]:
        """One batch's draws (and, shuffling rewards, each trajectory's order of them), then its depth."""
        cfg = self.config
        draws = draw_tasks(cfg.tasks, cfg.tasks_per_batch, generator, self.recipe.length)
        if self.pool is not None:  # the same draws as an unlimited run, then the tasks picked from the pool
            pick = torch.randint(cfg.task_pool, (cfg.tasks_per_batch,), generator=generator)
            draws = draws.on_tasks_of(self.pool, pick)
        return (draws, self._order(generator)), self._depth(generator)

    def _depth(self, generator: torch.Generator) -> Optional[int]:
        choices = self.recipe.depth_choices
        return self.recipe.depth(int(torch.randint(choices, (1,), generator=generator))) if choices else None
