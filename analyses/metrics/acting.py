"""Acting on in-context action values: a model's greedy policy, evaluated exactly on the MDP, against baselines.

A stylised model reads ``q(S_n, A_n)`` at its query column. ``in_context_q`` asks it for every pair at once:
one extra never-source column per ``(s, a)`` after the query, so the context (its last TD target, which
bootstraps on the query, included) is exactly the one given, and ``q̂[task, s, a]`` is the value the model's
layers assign to that pair as a target. Its greedy policy is evaluated exactly (``MDP.policy_return``) and
compared, as regret ``J(π*) − J(π)`` per task, with

* the behaviour policy that generated the context, and the uniform random policy;
* **certainty-equivalence control** on the same context: the empirical MDP (transition counts and mean
  rewards of the context's transitions; an unvisited pair keeps reward 0 and stays put), solved by value
  iteration, acted on greedily;
* **tabular Q-learning** replaying the context's transitions in order, ``Q_SWEEPS`` sweeps at step size
  ``Q_STEP``: ``Q(s, a) += Q_STEP (R + γ max_a' Q(s', a') − Q(s, a))``.

θ* computes softmax SARSA (docs/theory.md §14), which estimates ``q`` of the *behaviour* policy: its greedy
policy is one step of policy improvement on it, not ``π*``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.analyses.metrics.intervals import Interval, Paired, paired, t_interval
from ictd_interp.hooks.control_backups import never_sources
from ictd_interp.tasks.mdp import MDP, greedy_policy, split_pairs, uniform_policy
from ictd_interp.tasks.sampling import TaskBatch

Q_SWEEPS, Q_STEP = 50, 0.1
SOFTMAX_TEMPERATURE = 1.0  # a softmax (Boltzmann) policy's temperature, in value units
ACTING_TASKS = 256  # the random MDPs a control model's report acts on


@torch.no_grad()
def in_context_q(model, tasks: TaskBatch, n_actions: int) -> Float[Tensor, "batch state action"]:
    """The model's value at one extra column per state-action pair (its features ``x(s, a)``, zero reward and
    values), appended after the query and, like the query, never a source (a hook on every layer's attention
    scores): the context, its last TD target included, is the one the model was given, and each pair is read as
    a target of it. Softmax attention only (the linear pattern's ``1/n`` would count the extra columns)."""
    if getattr(model.cfg, "attention", "softmax") != "softmax":
        raise ValueError(f"in_context_q: needs softmax attention, got {model.cfg.attention!r}")
    batch, n_pairs, d = tasks.features.shape
    prompt = tasks.prompt.to(next(model.parameters()).dtype)
    extra = prompt.new_zeros(batch, n_pairs, prompt.shape[-1])
    extra[..., :d] = tasks.features.to(prompt.dtype)
    first = prompt.shape[1] - 1  # the query's column: it and every pair column are never sources

    values = model.run_with_hooks(torch.cat([prompt, extra], dim=1), fwd_hooks=never_sources(model, slice(first, None)))
    return values[:, first + 1 :].double().view(batch, -1, n_actions)


def _transitions(tasks: TaskBatch, n_actions: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    states, actions = split_pairs(tasks.states, n_actions)
    return states[:, :-1], actions[:, :-1], tasks.rewards, states[:, 1:]


def certainty_equivalence_q(mdp: MDP, tasks: TaskBatch) -> Float[Tensor, "batch state action"]:
    """``q*`` of the empirical MDP of each context (module docstring)."""
    s, a = mdp.n_states, mdp.n_actions
    S, A, R, S2 = _transitions(tasks, a)
    batch = S.shape[0]
    counts = torch.zeros(batch, s, a, s, dtype=torch.float64)
    reward_sum = torch.zeros(batch, s, a, dtype=torch.float64)
    b = torch.arange(batch)[:, None].expand_as(S)
    counts.index_put_((b, S, A, S2), torch.ones_like(R), accumulate=True)
    reward_sum.index_put_((b, S, A), R.double(), accumulate=True)
    visits = counts.sum(-1)
    stay = torch.eye(s, dtype=torch.float64)[None, :, None, :].expand(batch, s, a, s)
    P = torch.where(visits[..., None] > 0, counts / visits.clamp_min(1)[..., None], stay)
    r = reward_sum / visits.clamp_min(1)
    return MDP(P, r, mdp.mu0.expand(batch, s), mdp.gamma).q_star()


def q_learning(
    mdp: MDP, tasks: TaskBatch, sweeps: int = Q_SWEEPS, step: float = Q_STEP
) -> Float[Tensor, "batch state action"]:
    """Tabular Q-learning replaying each context's transitions in order, ``sweeps`` times."""
    S, A, R, S2 = _transitions(tasks, mdp.n_actions)
    batch, n = S.shape
    q = torch.zeros(batch, mdp.n_states, mdp.n_actions, dtype=torch.float64)
    rows = torch.arange(batch)
    for _ in range(sweeps):
        for k in range(n):
            target = R[:, k].double() + mdp.gamma * q[rows, S2[:, k]].amax(-1)
            q[rows, S[:, k], A[:, k]] += step * (target - q[rows, S[:, k], A[:, k]])
    return q


@dataclass(frozen=True)
class Acting:
    """Regret ``J(π*) − J(π)`` per policy, each a mean over ``n_tasks`` tasks with its interval, the optimal
    return it is measured from, and each policy's regret against ``baseline``'s on the same tasks (``versus``:
    the paired difference and its verdict, ``lower`` meaning less regret than the baseline)."""

    n_tasks: int
    optimal_return: Interval
    regret: dict[str, Interval]
    baseline: str
    versus: dict[str, Paired]


def acting_regret(
    mdp: MDP,
    tasks: TaskBatch,
    behaviour: Tensor,
    q_estimates: dict[str, Tensor],
    baseline: str = "behaviour",
    softmax: Optional[dict[str, Tensor]] = None,
) -> Acting:
    """Regret of the greedy policy of each ``q_estimates[name]`` (``[batch, s, a]``) and of the softmax policy
    ``softmax(q / SOFTMAX_TEMPERATURE)`` of each ``softmax[name]``, beside the behaviour and the uniform random
    policy, on each task's own MDP; every policy is also compared, task by task, with ``baseline`` (one of those
    names)."""
    optimal = mdp.policy_return(greedy_policy(mdp.q_star()))
    policies = {
        "behaviour": mdp.check_policy(behaviour),
        "random": mdp.check_policy(uniform_policy(mdp.n_states, mdp.n_actions)),
    }
    policies |= {name: greedy_policy(q) for name, q in q_estimates.items()}
    policies |= {name: torch.softmax(q.double() / SOFTMAX_TEMPERATURE, dim=-1) for name, q in (softmax or {}).items()}
    if baseline not in policies:
        raise ValueError(f"baseline: must be one of {sorted(policies)}, got {baseline!r}")
    per_task = {name: (optimal - mdp.policy_return(pi)).numpy() for name, pi in policies.items()}
    return Acting(
        int(optimal.numel()),
        t_interval(optimal.numpy()),
        {name: t_interval(r) for name, r in per_task.items()},
        baseline,
        {name: paired(r, per_task[baseline]) for name, r in per_task.items() if name != baseline},
    )


@torch.no_grad()
def model_acting(model, dist, seed: int, n_tasks: int = ACTING_TASKS) -> Acting:
    """A control model's acting on ``n_tasks`` fresh MDPs of its family (``dist``: a control ``TaskDistribution``),
    one context each under the uniform behaviour policy: the regret of its greedy and softmax policies on its
    in-context q, beside the behaviour's and the uniform random policy's, each against the behaviour task by task."""
    from ictd_interp.tasks.families import family_mdps
    from ictd_interp.tasks.sampling import sample_from

    generator = torch.Generator().manual_seed(seed)
    mdp = family_mdps(dist, n_tasks, generator)
    behaviour = uniform_policy(dist.n_states, dist.n_actions)
    tasks = sample_from(dist, n_tasks, generator=generator, mrp=mdp.pair_mrp(behaviour))
    q = in_context_q(model, tasks, dist.n_actions)
    return acting_regret(mdp, tasks, behaviour, {"greedy": q}, softmax={"softmax": q})
