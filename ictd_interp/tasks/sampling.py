"""A batch of in-context tasks: MRP -> features -> trajectory -> prompt, in one seeded call.

This is the unit that training, evaluation and every analysis consume, so that a figure, a
metric and a training curve all see contexts built the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Optional

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.tasks._types import ArrayLike, as_tensor
from ictd_interp.tasks.families import registered_mrps
from ictd_interp.tasks.features import make_features, uniform_features
from ictd_interp.tasks.mdp import MDP
from ictd_interp.tasks.mrp import (
    MRP,
    BoyanUniforms,
    boyan_from_uniforms,
    boyan_uniforms,
    resolve_generator,
)
from ictd_interp.tasks.prompt import build_prompt, context_inputs
from ictd_interp.tasks.sources import from_gymnasium
from ictd_interp.tasks.trajectory import sample_trajectories, trajectories_from_uniforms, trajectory_uniforms


@dataclass
class TaskBatch:
    """``B`` tasks with one trajectory each; ``prompt`` is built from ``S_0..S_n``. The derived
    tensors are computed on first use and kept (analyses read them many times)."""

    mrp: MRP
    features: Float[Tensor, "batch state d_feat"]
    states: Int[Tensor, "batch pos"]

    @cached_property
    def _inputs(self) -> tuple[Tensor, Tensor]:
        return context_inputs(self.features, self.mrp.r, self.states)

    @property
    def x(self) -> Float[Tensor, "batch pos d_feat"]:
        return self._inputs[0]

    @property
    def rewards(self) -> Float[Tensor, "batch key_pos"]:
        return self._inputs[1]

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


GIVEN_MRP = "random"  # the family named when ``sample_from`` gets its MRPs (unused then; "random" checks no size)


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
    """``sample_from`` with the distribution spelled out: fresh Boyan chains of ``n_states`` states (or the
    given ``mrp``, batched or shared), fresh features of dimension ``d``, a trajectory of ``n`` transitions."""
    family, n_states = ("boyan", n_states) if mrp is None else (GIVEN_MRP, mrp.n_states)
    dist = TaskDistribution(
        family=family,
        n_states=n_states,
        d_features=d,
        context_len=n,
        gamma=gamma,
        feature_kind=feature_kind,
        feature_scale=feature_scale,
    )
    return sample_from(dist, n_tasks, seed=seed, generator=generator, mrp=mrp)


def family_mrps(dist: TaskDistribution, n_tasks: int, generator: torch.Generator) -> MRP:
    """The MRPs of a distribution's family: a fresh one per task (``ictd_interp.tasks.families``), or a
    Gymnasium environment's one."""
    if dist.family.startswith("gym:"):
        return gym_mrp(dist.family[4:], dist.gamma, dist.terminal)
    return registered_mrps(dist, n_tasks, generator)


@lru_cache(maxsize=8)
def gym_mrp(env_id: str, gamma: float, terminal: str) -> MRP:
    """A Gymnasium environment's MRP, built once per process (it enumerates the transition table)."""
    return from_gymnasium(env_id, gamma=gamma, terminal=terminal)


def sample_from(
    dist: TaskDistribution,
    n_tasks: int,
    *,
    seed: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
    length: Optional[int] = None,
    features: Optional[Tensor] = None,
    mrp: Optional[MRP] = None,
) -> TaskBatch:
    """``n_tasks`` tasks drawn from ``dist``, one trajectory of ``length`` transitions each (default
    ``context_len``): the one place a batch of tasks is drawn (``sample_tasks`` and ``control_tasks`` call it).

    Draws, in this order from one generator: the family's MRPs (unless ``mrp`` is given: one shared or one per
    task; ``dist.family`` is then unused), the features (unless ``features`` is given: ``[states, d]`` shared
    or ``[batch, states, d]``), the trajectories. Boyan chains with random features go through
    ``draw_tasks``/``tasks_from_draws``, which draw exactly the same numbers (tests/unit/test_task_distribution.py)."""
    gen = resolve_generator(seed, generator)
    n = dist.context_len if length is None else length
    if features is None and mrp is None and dist.split_draws:
        return tasks_from_draws(dist, draw_tasks(dist, n_tasks, gen, n))
    mrp = _batched(family_mrps(dist, n_tasks, gen) if mrp is None else mrp, n_tasks)
    dist.check_onehot(mrp.n_states)
    s, d = mrp.n_states, dist.d_features
    X = (
        make_features(s, d, dist.feature_kind, dist.feature_scale, generator=gen, batch=n_tasks)
        if features is None
        else _given_features(features, s, d, n_tasks)
    )
    return TaskBatch(mrp, X, sample_trajectories(mrp, n, generator=gen))


def _given_features(features: ArrayLike, n_states: int, d: int, n_tasks: int) -> Float[Tensor, "batch state d_feat"]:
    """A user's features, ``[states, d]`` (shared) or ``[batch, states, d]``, checked against the MRPs."""
    X = as_tensor(features, "features")
    if X.ndim not in (2, 3) or tuple(X.shape[-2:]) != (n_states, d) or (X.ndim == 3 and X.shape[0] != n_tasks):
        raise ValueError(
            f"features: expected shape {(n_states, d)} (states x d_features) or "
            f"{(n_tasks, n_states, d)} (one matrix per task), got {tuple(X.shape)}"
        )
    return X.expand(n_tasks, n_states, d)


@dataclass
class TaskDraws:
    """Every ``U(0, 1)`` draw of a batch of Boyan-chain tasks, in the order ``sample_from`` draws them
    (chains, features, trajectories). ``tasks_from_draws`` builds the tasks row by row, so the draws of
    successive batches, concatenated (``cat``), build those batches' tasks in one pass."""

    chains: BoyanUniforms
    features: Optional[Float[Tensor, "batch state d_feat"]]  # None: one-hot features (nothing drawn)
    start: Float[Tensor, "batch 1"]
    steps: Optional[Float[Tensor, "batch time"]]

    @staticmethod
    def cat(parts: list["TaskDraws"]) -> "TaskDraws":
        join = lambda ts: None if ts[0] is None else torch.cat(ts)  # noqa: E731
        return TaskDraws(
            tuple(torch.cat(c) for c in zip(*(d.chains for d in parts))),
            join([d.features for d in parts]),
            torch.cat([d.start for d in parts]),
            join([d.steps for d in parts]),
        )

    def on_tasks_of(self, pool: "TaskDraws", index: Tensor, where: Optional[Tensor] = None) -> "TaskDraws":
        """These draws' trajectories on the chains and features of ``pool``'s tasks ``index`` (copies: building
        tasks consumes its draws, the pool is kept); ``where [task]``: only those tasks, the others keep their own."""

        def picked(mine: Tensor, own: Tensor) -> Tensor:
            if where is None:
                return mine[index]
            return torch.where(where.view(-1, *[1] * (own.ndim - 1)), mine[index], own)

        return TaskDraws(
            tuple(picked(p, c) for p, c in zip(pool.chains, self.chains)),
            None if pool.features is None else picked(pool.features, self.features),
            self.start,
            self.steps,
        )


def draw_tasks(dist: TaskDistribution, n_tasks: int, generator: torch.Generator, length: int) -> TaskDraws:
    """The draws of ``n_tasks`` Boyan-chain tasks with trajectories of ``length`` transitions."""
    if not dist.split_draws:
        raise ValueError(f"family: draws are split from construction for Boyan chains only, got {dist.family!r}")
    chains = boyan_uniforms(generator, n_tasks, dist.n_states)
    features = (
        torch.rand(n_tasks, dist.n_states, dist.d_features, generator=generator, dtype=torch.float64)
        if dist.feature_kind == "uniform"
        else None
    )
    return TaskDraws(chains, features, *trajectory_uniforms(generator, n_tasks, length))


def tasks_from_draws(dist: TaskDistribution, draws: TaskDraws) -> TaskBatch:
    """The tasks ``sample_from(dist, ...)`` builds from these draws (which it consumes in place)."""
    mrp = boyan_from_uniforms(*draws.chains, dist.gamma)
    dist.check_onehot(mrp.n_states)
    n_tasks = mrp.P.shape[0]
    features = (
        make_features(mrp.n_states, dist.d_features, "onehot", dist.feature_scale, batch=n_tasks, device=mrp.P.device)
        if draws.features is None
        else uniform_features(draws.features, dist.feature_scale)
    )
    return TaskBatch(mrp, features, trajectories_from_uniforms(mrp.P, mrp.mu0, draws.start, draws.steps))


def _batched(mrp: MRP, n_tasks: int) -> MRP:
    if len(mrp.batch_shape):
        return mrp
    return MRP(mrp.P.expand(n_tasks, -1, -1), mrp.r.expand(n_tasks, -1), mrp.mu0.expand(n_tasks, -1), mrp.gamma)


def control_tasks(
    mdp: MDP,
    behaviour: ArrayLike,
    features: Float[Tensor, "... pair d"],
    context_len: int,
    *,
    seed: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
) -> TaskBatch:
    """One context per task of a batched ``mdp``: the trajectory ``(S_0, A_0), R_1, (S_1, A_1), ...`` of
    ``context_len`` transitions under ``behaviour``, as a ``TaskBatch`` on the pair MRP (``states`` holds pair
    indices ``s * n_actions + a``; ``v_true`` is ``q_behaviour`` at each pair) with ``features`` per pair
    (``[pairs, d]`` or ``[batch, pairs, d]``); drawn by ``sample_from``."""
    if mdp.P.ndim != 4:
        raise ValueError(f"mdp: control_tasks needs a batch of MDPs (P [batch, s, a, s]), got {tuple(mdp.P.shape)}")
    X = as_tensor(features, "features")
    n_pairs = mdp.n_states * mdp.n_actions
    if X.ndim not in (2, 3) or X.shape[-2] != n_pairs:
        raise ValueError(
            f"features: expected [pairs, d] or [batch, pairs, d] with {n_pairs} pairs "
            f"({mdp.n_states} states x {mdp.n_actions} actions), got shape {tuple(X.shape)}"
        )
    dist = TaskDistribution(
        family=GIVEN_MRP, n_states=n_pairs, d_features=X.shape[-1], context_len=context_len, gamma=mdp.gamma
    )
    return sample_from(dist, mdp.P.shape[0], seed=seed, generator=generator, features=X, mrp=mdp.pair_mrp(behaviour))
