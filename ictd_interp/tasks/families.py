"""The makers of the registered MRP families (``ictd_interp.config.registry.FAMILIES``): each takes a task
distribution, a number of tasks and a generator, and returns one fresh MRP per task, or for a control family
the MDPs whose state-action chain under the uniform behaviour policy is the task's MRP (docs/theory.md §14)."""

from __future__ import annotations

import torch

from ictd_interp.config.registry import FAMILIES, load
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.tasks.mdp import MDP, random_mdps, two_action_chains, uniform_policy
from ictd_interp.tasks.mrp import MRP, boyan_chains
from ictd_interp.tasks.sources import loop_mrps, random_mrps


def boyan(dist: TaskDistribution, n_tasks: int, generator: torch.Generator) -> MRP:
    return boyan_chains(n_tasks, dist.n_states, dist.gamma, generator)


def loop(dist: TaskDistribution, n_tasks: int, generator: torch.Generator) -> MRP:
    return loop_mrps(n_tasks, dist.n_states, dist.gamma, generator=generator)


def dense_random(dist: TaskDistribution, n_tasks: int, generator: torch.Generator) -> MRP:
    return random_mrps(n_tasks, dist.n_states, dist.gamma, generator=generator)


def sparse_random(dist: TaskDistribution, n_tasks: int, generator: torch.Generator) -> MRP:
    return random_mrps(n_tasks, dist.n_states, dist.gamma, density=0.2, generator=generator)


MIXED = ("boyan", "loop", "random", "random-sparse")  # the families a mixture draws from, in the order it draws them


def mixture(dist: TaskDistribution, n_tasks: int, generator: torch.Generator) -> MRP:
    """Each task's MRP from one of ``MIXED``'s families, picked uniformly and independently per task: the picks are
    drawn first, then each family's MRPs for the tasks that picked it, in ``MIXED``'s order."""
    picks = torch.randint(len(MIXED), (n_tasks,), generator=generator)
    s = dist.n_states
    P, r = torch.empty(n_tasks, s, s, dtype=torch.float64), torch.empty(n_tasks, s, dtype=torch.float64)
    mu0 = torch.empty_like(r)
    for k, name in enumerate(MIXED):
        where = (picks == k).nonzero().flatten()
        if len(where):
            made = load(FAMILIES[name].make)(dist, len(where), generator)
            P[where], r[where], mu0[where] = made.P.double(), made.r.double(), made.mu0.double().expand(len(where), s)
    return MRP.generated(P, r, mu0, dist.gamma)


def random_mdp(dist: TaskDistribution, n_tasks: int, generator: torch.Generator) -> MDP:
    return random_mdps(n_tasks, dist.n_states, dist.n_actions, dist.gamma, generator=generator)


def chain_mdp(dist: TaskDistribution, n_tasks: int, generator: torch.Generator) -> MDP:
    return two_action_chains(n_tasks, dist.n_states, dist.gamma, generator=generator)


def family_mdps(dist: TaskDistribution, n_tasks: int, generator: torch.Generator) -> MDP:
    """A control family's MDPs (what acting is scored on)."""
    family = FAMILIES[dist.family]
    if not family.control:
        raise ValueError(f"family: {dist.family!r} is no control family; it has no actions")
    return load(family.make)(dist, n_tasks, generator)


def registered_mrps(dist: TaskDistribution, n_tasks: int, generator: torch.Generator) -> MRP:
    """A registered family's MRPs; a control family's are its MDPs' state-action chains under the uniform
    behaviour policy."""
    family = FAMILIES[dist.family]
    made = load(family.make)(dist, n_tasks, generator)
    return made.pair_mrp(uniform_policy(dist.n_states, dist.n_actions)) if family.control else made
