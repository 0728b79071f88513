"""Training batches drawn on the run's device (``TrainConfig.sampler = "device"``): the batch of
``training.batch_recipe``, every run of a stack's from one call, made where the models are, with no copy from the
host and no read back.

A run's draws at a step are a function of its seed and the step alone (``ictd_interp.tasks.counter``), so a run
draws the same batch alone, in any stack and after a resume (the stream needs only the step, which the checkpoint
holds). The task pool, shuffled rewards and the objective's needs (returns, true values, action queries) mean what
``training.batch_recipe`` says, drawn from counters; a stack's runs may train other objectives (their batch holds
what each needs, and each reads its own part, its run's batch); a sampled depth is drawn on the host
(``python_uniform``: a number the host needs before the step, so no device read) from the step alone, so runs with
sampled depths share a stack. Boyan chains (a family with split draws) only: ``TrainConfig`` refuses the others.
"""

from __future__ import annotations

from typing import Optional

import torch

from ictd_interp.config.train import TrainConfig
from ictd_interp.tasks.counter import DEPTH, ORDER, POOL, POOL_PICK, counter_draws, python_uniform, step_keys, uniforms
from ictd_interp.tasks.sampling import TaskDraws, tasks_from_draws
from ictd_interp.training.batch_recipe import BatchRecipe, shuffle_order
from ictd_interp.training.batches import WindowBatch
from ictd_interp.training.objectives import objective

DEPTH_KEY = 0  # the seed word of the depth draws: every run's the same (``DeviceBatches.depth``)


class DeviceBatches:
    """``at(step)``: the batch of every run at ``step``, on the runs' device: a stack's batch (``[model, ...]``) when
    ``stacked`` (by default, for several runs), else the one run's own batch. ``next(stream)``: a single run's
    ``(batch, depth)``, step after step from ``step``. ``generator_state()``: the host generator a checkpoint keeps
    (unused by these draws)."""

    def __init__(self, configs: list[TrainConfig], dtype: torch.dtype, step: int = 0, stacked: Optional[bool] = None):
        first = configs[0]
        self.configs, self.dtype, self.step = configs, dtype, step
        self.stacked = len(configs) > 1 if stacked is None else stacked
        if not self.stacked and len(configs) > 1:
            raise ValueError(f"configs: {len(configs)} runs draw a stack's batch (stacked=True)")
        self.device = torch.device(first.device)
        self.recipe = BatchRecipe.of(configs)  # every run's objective's needs, drawn once: each reads its own part
        self.objective = objective(first.objective)  # a single run's (the trainer reads it)
        on = lambda values, kind: torch.tensor(values, dtype=kind, device=self.device)  # noqa: E731 (once, here)
        self.seeds = on([c.seed for c in configs], torch.int64)
        self.pool_size = max(c.task_pool for c in configs)
        self._pool: Optional[TaskDraws] = None  # drawn at the first batch: a stacked run's own stream never draws
        self.pools = on([c.task_pool for c in configs], torch.float64)[:, None]  # [run, 1]
        self.shuffled = on([c.shuffle_rewards for c in configs], torch.bool)[:, None, None]
        self.any_shuffled = any(c.shuffle_rewards for c in configs)

    def __iter__(self) -> "DeviceBatches":
        return self

    def __next__(self) -> tuple[WindowBatch, Optional[int]]:
        batch, depth = self.at(self.step), self.depth(self.step)
        self.step += 1
        return batch, depth

    def generator_state(self) -> torch.Tensor:
        return torch.Generator().manual_seed(self.configs[0].seed).get_state()

    def at(self, step: int) -> WindowBatch:
        recipe = self.recipe
        draws = counter_draws(self.seeds, step, recipe.tasks, recipe.tasks_per_batch, recipe.length)
        if self.pool_size:
            draws = self._pooled(draws, step)
        tasks = tasks_from_draws(recipe.tasks, draws)
        # the per-window quantities in the model's dtype, as a host stream's
        windows = recipe.windows(tasks, self._order(step), self.dtype).to(self.device, self.dtype)
        return windows.by_model(len(self.configs)) if self.stacked else windows

    def _pooled(self, draws: TaskDraws, step: int) -> TaskDraws:
        """The chains and features of each run's pool (its first ``task_pool`` tasks) picked uniformly, for the runs
        with a pool; fresh ones for the others; fresh trajectories for all."""
        b = self.recipe.tasks_per_batch
        if self._pool is None:
            self._pool = counter_draws(self.seeds, POOL, self.recipe.tasks, self.pool_size, 0)
        u = uniforms(step_keys(self.seeds, step, POOL_PICK), b)  # [run, task]
        first = torch.arange(len(self.configs), device=self.device)[:, None] * self.pool_size
        pick = (first + (u * self.pools).long()).flatten()  # rows of the pool
        return draws.on_tasks_of(self._pool, pick, where=(self.pools > 0).expand(-1, b).flatten())

    def _order(self, step: int) -> Optional[torch.Tensor]:
        """Shuffling rewards: each trajectory's order of its rewards in time (in order for the runs that do not)."""
        if not self.any_shuffled:
            return None
        span = self.recipe.span
        order = shuffle_order(uniforms(step_keys(self.seeds, step, ORDER), self.recipe.tasks_per_batch, span))
        kept = torch.arange(span, device=self.device).expand_as(order)  # [run, task, t]
        return torch.where(self.shuffled, order, kept).flatten(0, 1)

    def depth(self, step: int) -> Optional[int]:
        """The step's depth of a depth-sampled run: uniform over ``train_depths``, drawn from the step alone (not the
        seed), so every run of a stack runs the same depth at each step and still draws its own run's depths."""
        choices = self.recipe.depth_choices
        return self.recipe.depth(int(python_uniform(DEPTH_KEY, step, DEPTH) * choices)) if choices else None
