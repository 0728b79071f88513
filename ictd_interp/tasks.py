"""A batch of in-context tasks: MRP -> features -> trajectory -> prompt, in one seeded call.

This is the unit that training, evaluation and every analysis consume, so that a figure, a
metric and a training curve all see contexts built the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ictd_interp.features import make_features
from ictd_interp.mrp import MRP, boyan_chains, resolve_generator
from ictd_interp.prompt import build_prompt, context_inputs
from ictd_interp.trajectory import sample_trajectories


@dataclass
class TaskBatch:
    """``B`` tasks with one trajectory each; ``prompt`` is built from ``S_0..S_n``. The derived
    tensors are computed on first use and kept (analyses read them many times)."""

    mrp: MRP
    features: Float[Tensor, "batch state d_feat"]
    states: Int[Tensor, "batch pos"]

    @cached_property
    def x(self) -> Float[Tensor, "batch pos d_feat"]:
        return context_inputs(self.features, self.mrp.r, self.states)[0]

    @cached_property
    def rewards(self) -> Float[Tensor, "batch key_pos"]:
        return context_inputs(self.features, self.mrp.r, self.states)[1]

    @cached_property
    def prompt(self) -> Float[Tensor, "batch pos d_model"]:
        return build_prompt(self.x, self.rewards)

    @cached_property
    def v_true(self) -> Float[Tensor, "batch pos"]:
        """``v_pi(S_j)`` at every context position."""
        return torch.gather(self.mrp.v_pi, 1, self.states)

    def __len__(self) -> int:
        return self.states.shape[0]

    def __getitem__(self, index) -> "TaskBatch":
        """A subset of the tasks (``tasks[:64]``)."""
        return TaskBatch(self.mrp[index], self.features[index], self.states[index])


def sample_tasks(
    n_tasks: int,
    n_states: int,
    d: int,
    n: int,
    gamma: float = 0.9,
    *,
    feature_kind: str = "uniform",
    feature_scale: float = 1.0,
    seed: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
    mrp: Optional[MRP] = None,
) -> TaskBatch:
    """Fresh Boyan chains (or the given ``mrp``, batched or shared) with fresh features and a
    trajectory of length ``n`` each."""
    gen = resolve_generator(seed, generator)
    if mrp is None:
        mrp = boyan_chains(n_tasks, n_states, gamma, gen)
    elif len(mrp.batch_shape) == 0:
        mrp = MRP(mrp.P.expand(n_tasks, -1, -1), mrp.r.expand(n_tasks, -1), mrp.mu0.expand(n_tasks, -1), mrp.gamma)
    features = make_features(mrp.n_states, d, feature_kind, feature_scale, generator=gen, batch=n_tasks)
    return TaskBatch(mrp, features, sample_trajectories(mrp, n, generator=gen))
