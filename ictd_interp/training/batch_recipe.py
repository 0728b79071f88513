"""What a training batch is, written once (docs/theory.md §6); the two samplers draw its uniforms.

A batch is ``tasks_per_batch`` tasks, each one trajectory of ``length`` transitions cut into ``windows_per_task + 1``
sliding windows, with what the run's objective needs (returns over its horizon, true values, action queries). Its
options, each with one meaning here:

* **a finite task pool** (``task_pool``): each task's chain and features are a row of the run's pool, picked
  uniformly at each step; its trajectory is fresh (``TaskDraws.on_tasks_of`` for Boyan chains; for the families
  without split draws the host picks the pool's MRPs and features and ``sample_from`` walks them);
* **shuffled rewards** (``shuffle_rewards``): each trajectory's rewards permuted in time by the ranks of ``span``
  uniforms (``shuffle_order``), the same permutation for every window of the task;
* **a sampled depth** (``train_depths`` ``LO:HI``): uniform over ``LO..HI``, ``depth(index)`` of an index uniform
  over ``depth_choices``.

The sources: ``BatchStream`` (``sampler = "host"``) draws every uniform from the run's generator in order and its
pool from a generator seeded ``seed + POOL_SEED``; ``DeviceBatches`` (``sampler = "device"``) computes the tasks',
picks' and orders' uniforms from counters of (seed, step), its pool at the step word ``tasks.counter.POOL``, and a
depth from the step alone (every run of a stack runs the same depth). tests/unit/test_batch_semantics.py holds the
two to the same meanings. ``batch_refusal`` is the one rule on which runs can share a batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from jaxtyping import Float, Int
from torch import Tensor

from ictd_interp.config.registry import OBJECTIVES
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.config.train import TrainConfig
from ictd_interp.tasks.sampling import TaskBatch
from ictd_interp.training.batches import WindowBatch, windows_from_tasks
from ictd_interp.training.objectives import objective

POOL_SEED = 7_919  # the host pool's generator is seeded seed + POOL_SEED (the device pool's: counter step POOL)


def batch_refusal(configs: list[TrainConfig]) -> Optional[str]:
    """Why these runs' objectives cannot read one batch, or None: a batch holds one kind of true value."""
    values = {OBJECTIVES[c.objective].values for c in configs if OBJECTIVES[c.objective].needs_values}
    if len(values) > 1:
        return f"their objectives regress on different true values ({', '.join(sorted(values))}): one batch holds one"
    return None


@dataclass(frozen=True)
class BatchRecipe:
    """The batch of one run, or the shared batch of runs whose objectives differ (a device stack): every objective's
    needs drawn once, each run reading its own. ``BatchRecipe.of(configs)``."""

    tasks: TaskDistribution
    tasks_per_batch: int
    n_windows: int  # windows per task: windows_per_task + 1
    horizon: int  # the longest Monte-Carlo horizon among the objectives (0: no returns)
    with_values: bool
    values: str  # the kind of true value drawn: "v_pi" or "q_star"
    action_queries: bool
    state_space: bool
    depth_range: Optional[tuple[int, int]]

    @classmethod
    def of(cls, configs: list[TrainConfig]) -> "BatchRecipe":
        refusal = batch_refusal(configs)
        if refusal is not None:
            raise ValueError(f"objectives: {refusal}")
        first, entries = configs[0], [objective(c.objective) for c in configs]
        values = [e.values for e in entries if e.needs_values]
        return cls(
            tasks=first.tasks,
            tasks_per_batch=first.tasks_per_batch,
            n_windows=first.windows_per_task + 1,
            horizon=max(e.mc_horizon(c) for e, c in zip(entries, configs)),
            with_values=bool(values),
            values=values[0] if values else entries[0].values,
            action_queries=any(e.needs_action_queries for e in entries),
            state_space=first.forward == "state-space",
            depth_range=first.depth_range,
        )

    @property
    def length(self) -> int:
        """Transitions per trajectory: the context, the windows after the first, the returns' horizon."""
        return self.tasks.context_len + self.n_windows - 1 + self.horizon

    @property
    def span(self) -> int:
        """Positions whose rewards a shuffle permutes: the context and every window's query."""
        return self.tasks.context_len + self.n_windows

    @property
    def depth_choices(self) -> int:
        """How many depths a depth-sampled run draws from (0: it runs its own depth)."""
        return 0 if self.depth_range is None else self.depth_range[1] - self.depth_range[0] + 1

    def depth(self, index: int) -> Optional[int]:
        """The sampled depth of an index uniform over ``depth_choices`` (None for a run at its own depth)."""
        return None if self.depth_range is None else self.depth_range[0] + index

    def windows(self, tasks: TaskBatch, order: Optional[Int[Tensor, "task t"]], dtype) -> WindowBatch:
        """The windows of ``tasks`` (their rewards in ``order`` when shuffled) with every objective's needs."""
        return windows_from_tasks(
            tasks,
            self.tasks,
            self.n_windows,
            self.horizon,
            dtype,
            self.with_values,
            self.values,
            self.action_queries,
            order,
            state_space=self.state_space,
        )


def shuffle_order(u: Float[Tensor, "*task t"]) -> Int[Tensor, "*task t"]:
    """Each trajectory's order of its rewards in time: the ranks of its ``span`` uniforms."""
    return u.argsort(dim=-1)
