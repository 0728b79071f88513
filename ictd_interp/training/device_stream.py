"""Training batches drawn on the run's device (``TrainConfig.sampler = "device"``): every run of a stack gets its
step's batch from one call, made where the models are, with no copy from the host and no read back.

A run's draws at a step are a function of its seed and the step alone (``ictd_interp.tasks.counter``), so a run
draws the same batch alone, in any stack and after a resume (the stream needs only the step, which the checkpoint
holds). The task pool, shuffled rewards and the objective's needs (returns, true values, action queries) are
``BatchStream``'s, drawn from counters; a stack's runs may train other objectives (their batch holds what each
needs, and each reads its own part, its run's batch); a sampled depth is drawn on the host (``python_uniform``: a
number the host needs before the step, so no device read) from the step alone, so runs with sampled depths share a
stack. Boyan chains (a family with split draws) only: ``TrainConfig`` refuses the others.
"""

from __future__ import annotations

from typing import Optional, Union

import torch

from ictd_interp.config.train import TrainConfig
from ictd_interp.tasks.counter import DEPTH, ORDER, POOL, POOL_PICK, counter_draws, python_uniform, step_keys, uniforms
from ictd_interp.tasks.sampling import TaskDraws, tasks_from_draws
from ictd_interp.training.batch_stream import BatchStream
from ictd_interp.training.batches import WindowBatch, windows_from_tasks
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
        loaded = {name: objective(name) for name in dict.fromkeys(c.objective for c in configs)}  # each once
        self.objective = loaded[first.objective]  # a single run's (the trainer reads it)
        entries = list(loaded.values())  # a stack's runs may train other objectives
        values = {e.values for e in entries if e.needs_values}
        if len(values) > 1:
            raise ValueError(f"objectives: a stack's batch holds one kind of true value, these regress on {values}")
        # what every run's objective needs, drawn once: a run reads its own part (the windows are the same)
        self.needs = (bool(values), next(iter(values), "v_pi"))
        self.action_queries = any(e.needs_action_queries for e in entries)
        self.horizon = max(loaded[c.objective].mc_horizon(c) for c in configs)
        self.length = first.tasks.context_len + first.windows_per_task + self.horizon
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
        cfg, runs = self.configs[0], len(self.configs)
        draws = counter_draws(self.seeds, step, cfg.tasks, cfg.tasks_per_batch, self.length)
        if self.pool_size:
            draws = self._pooled(draws, step)
        windows = windows_from_tasks(
            tasks_from_draws(cfg.tasks, draws),
            cfg.tasks,
            cfg.windows_per_task + 1,
            self.horizon,
            self.dtype,
            *self.needs,
            self.action_queries,
            self._order(step),
            state_space=cfg.forward == "state-space",
        ).to(self.device, self.dtype)  # the per-window quantities in the model's dtype, as a host stream's
        return windows.by_model(runs) if self.stacked else windows

    def _pooled(self, draws: TaskDraws, step: int) -> TaskDraws:
        """The chains and features of each run's pool (its first ``task_pool`` tasks) picked uniformly, for the runs
        with a pool; fresh ones for the others; fresh trajectories for all."""
        b = self.configs[0].tasks_per_batch
        if self._pool is None:
            self._pool = counter_draws(self.seeds, POOL, self.configs[0].tasks, self.pool_size, 0)
        u = uniforms(step_keys(self.seeds, step, POOL_PICK), b)  # [run, task]
        first = torch.arange(len(self.configs), device=self.device)[:, None] * self.pool_size
        pick = (first + (u * self.pools).long()).flatten()  # rows of the pool
        pooled = (self.pools > 0).expand(-1, b).flatten()[:, None]  # [run * task, 1]
        choose = lambda mine, fresh: torch.where(pooled.view(-1, *[1] * (fresh.ndim - 1)), mine[pick], fresh)  # noqa: E731
        chains = tuple(choose(p, c) for p, c in zip(self._pool.chains, draws.chains))
        features = None if draws.features is None else choose(self._pool.features, draws.features)
        return TaskDraws(chains, features, draws.start, draws.steps)

    def _order(self, step: int) -> Optional[torch.Tensor]:
        """Shuffling rewards: each trajectory's order of its rewards in time (in order for the runs that do not)."""
        if not self.any_shuffled:
            return None
        cfg = self.configs[0]
        span = cfg.tasks.context_len + cfg.windows_per_task + 1
        order = uniforms(step_keys(self.seeds, step, ORDER), cfg.tasks_per_batch, span).argsort(-1)  # [run, task, t]
        kept = torch.arange(span, device=self.device).expand_as(order)
        return torch.where(self.shuffled, order, kept).flatten(0, 1)

    def depth(self, step: int) -> Optional[int]:
        """The step's depth of a depth-sampled run: uniform over ``train_depths``, drawn from the step alone (not the
        seed), so every run of a stack runs the same depth at each step and still draws its own run's depths."""
        cfg = self.configs[0]
        if cfg.depth_range is None:
            return None
        lo, hi = cfg.depth_range
        return lo + int(python_uniform(DEPTH_KEY, step, DEPTH) * (hi - lo + 1))


def open_stream(
    config: TrainConfig, generator: torch.Generator, dtype: torch.dtype, step: int = 0
) -> Union[BatchStream, DeviceBatches]:
    """A run's stream of batches from ``step`` on: its host generator's (``BatchStream``, whose state is
    ``generator``'s) or, with ``sampler = "device"``, the counters' at the step."""
    if config.sampler == "device":
        return DeviceBatches([config], dtype, step)
    return BatchStream(config, generator, dtype)
