"""Counter-based draws: every uniform a batch of Boyan-chain tasks needs, as a pure function of (seed, step, what,
index), computed on any device in one call for many runs at once (``TrainConfig.sampler = "device"``).

A host generator hands out numbers in order, so a stack of ``M`` runs draws ``M`` batches one after another and copies
each to the device. Here each number is ``splitmix64`` (Steele et al. 2014, the mixer behind Java's SplittableRandom)
of a counter: the run's key for the step and the draw (``step_keys``), plus the element's index times the golden
ratio; the top 53 bits give a float64 in ``[0, 1)``. The arithmetic is int64 with wrap-around, which torch does on
CPUs and GPUs alike, so a run's draws are the same numbers on every device and inside any stack
(tests/unit/test_counter.py holds them to a pure-Python ``splitmix64``).

The draws are those of ``ictd_interp.tasks.sampling.draw_tasks`` (chains, features, trajectories), each from its own
counter stream, so ``tasks_from_draws`` builds the tasks from them unchanged.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.tasks.sampling import TaskDraws

MASK = (1 << 64) - 1


def _signed(value: int) -> int:
    """An unsigned 64-bit constant as the int64 with the same bits."""
    return value - (1 << 64) if value >= 1 << 63 else value


GOLDEN, MIX1, MIX2 = (_signed(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))
# Each draw's stream (the ``what`` of a counter): the order of ``draw_tasks`` and what a stream adds to it
CHAIN_P, CHAIN_LAST, CHAIN_MU0, CHAIN_R, FEATURES, START, STEPS, POOL_PICK, ORDER, DEPTH = range(1, 11)
POOL = -1  # the step word of a run's task pool: no training step is negative


def _shift(z: Tensor, k: int) -> Tensor:
    """``z >>> k``: a logical right shift of int64 bits (torch's ``>>`` keeps the sign)."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def mix(z: Int[Tensor, "*any"]) -> Int[Tensor, "*any"]:
    """splitmix64's output function of the state ``z`` (int64 bits, wrapping)."""
    z = (z ^ _shift(z, 30)) * MIX1
    z = (z ^ _shift(z, 27)) * MIX2
    return z ^ _shift(z, 31)


def step_keys(seeds: Int[Tensor, "run"], step: int, what: int) -> Int[Tensor, "run"]:
    """Each run's key for one draw (``what``) of one step (``POOL``: its task pool)."""
    return mix(mix(mix(seeds + GOLDEN) ^ step) ^ what)


def uniforms(keys: Int[Tensor, "*key"], *shape: int) -> Float[Tensor, "*key ..."]:
    """``[*keys.shape, *shape]`` float64 draws in ``[0, 1)``: element ``i`` of key ``k`` is
    ``mix(k + (i + 1) * GOLDEN)``."""
    index = torch.arange(1, math.prod(shape) + 1, dtype=torch.int64, device=keys.device) * GOLDEN
    bits = _shift(mix(keys[..., None] + index), 11)  # the top 53 bits
    return (bits.double() * 2.0**-53).view(*keys.shape, *shape)


def python_uniform(seed: int, step: int, what: int, index: int = 0) -> float:
    """``uniforms`` in plain Python for one element: the reference the tests hold the tensors to, and the host's
    draw of a step's depth (a number the host needs before the step, so it is never read from a device)."""

    def mixed(z: int) -> int:
        z &= MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    key = mixed(mixed(mixed(seed + 0x9E3779B97F4A7C15) ^ (step & MASK)) ^ what)
    return (mixed(key + (index + 1) * 0x9E3779B97F4A7C15) >> 11) * 2.0**-53


def counter_draws(seeds: Int[Tensor, "run"], step: int, dist: TaskDistribution, n_tasks: int, length: int) -> TaskDraws:
    """The draws of ``n_tasks`` Boyan-chain tasks per run (rows ``run * n_tasks + task``) with trajectories of
    ``length`` transitions, at ``step`` (``POOL``: the run's task pool), on the seeds' device. Each task's
    trajectory has a counter of its own, so a longer trajectory (a Monte-Carlo horizon) extends the shorter one's
    steps: runs of different horizons share a stack and still draw their own runs' batches."""
    s, d = dist.n_states, dist.d_features
    rows = lambda what, *shape: uniforms(step_keys(seeds, step, what), n_tasks, *shape).flatten(0, 1)  # noqa: E731
    chains = (rows(CHAIN_P, s - 2), rows(CHAIN_LAST, s), rows(CHAIN_MU0, s), rows(CHAIN_R, s))
    features = rows(FEATURES, s, d) if dist.feature_kind == "uniform" else None
    tasks = torch.arange(n_tasks, dtype=torch.int64, device=seeds.device)
    steps = uniforms(mix(step_keys(seeds, step, STEPS)[:, None] ^ tasks), length).flatten(0, 1) if length else None
    return TaskDraws(chains, features, rows(START, 1), steps)
