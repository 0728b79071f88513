"""Regret of θ*'s in-context greedy policy against certainty-equivalence control, Q-learning, the behaviour and
the random policy, on random MDPs, two-action chains and FrozenLake (the rows quoted in docs/theory.md §14); beside
them the linear architecture's SARSA block and its actor-critic block (``models.linear.control``, 20 layers,
α = β = 1, the actor starting from the uniform policy), each acting greedily on what its query reads.

Usage: python benchmarks/acting.py
"""

from __future__ import annotations

import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.analyses.metrics.acting import acting_regret, certainty_equivalence_q, in_context_q, q_learning
from ictd_interp.models.linear.control import actor_critic, actor_critic_features, actor_queries
from ictd_interp.models.linear.td import linear_model
from ictd_interp.tasks.features import make_features
from ictd_interp.tasks.mdp import pair_features, random_mdps, two_action_chains, uniform_policy
from ictd_interp.tasks.sampling import control_tasks
from ictd_interp.tasks.sources import mdp_from_gymnasium

LINEAR_LAYERS = 20


def linear_blocks(mdp, psi, context_len: int) -> dict[str, torch.Tensor]:
    """The SARSA critic's ``q(s, a)`` and the actor's preference ``h(s, a)`` after ``LINEAR_LAYERS`` layers."""
    s, a = mdp.n_states, mdp.n_actions
    pi0 = uniform_policy(s, a)
    tasks = control_tasks(mdp, pi0, actor_critic_features(psi, pi0), context_len, seed=1)
    model = linear_model([actor_critic(psi.shape[-1])] * LINEAR_LAYERS, mdp.gamma)
    read = lambda queries: model.query_values(tasks.prompt, queries.expand(len(tasks), -1, -1)).view(-1, s, a)  # noqa: E731
    with torch.no_grad():
        return {
            "linear SARSA block (critic)": read(actor_critic_features(psi, pi0)),
            "linear actor-critic block (actor)": read(actor_queries(psi)),
        }


CONTEXT = {"random MDPs": 60, "two-action chains": 60, "FrozenLake-v1 (restart at the end of an episode; OOD)": 400}


def main() -> None:
    frozen = mdp_from_gymnasium("FrozenLake-v1", gamma=0.9, terminal="restart").batched(64)
    for name, mdp in (
        ("random MDPs", random_mdps(64, 5, 2, 0.9, seed=0)),
        ("two-action chains", two_action_chains(64, 6, 0.9, seed=0)),
        ("FrozenLake-v1 (restart at the end of an episode; OOD)", frozen),
    ):
        s, a = mdp.n_states, mdp.n_actions
        onehot = 3.0 * torch.eye(s * a, dtype=torch.float64)
        uniform = pair_features(make_features(s, 4, "uniform", 1.0, generator=torch.Generator().manual_seed(1)), a)
        for kind, phi in (("one-hot x3", onehot), ("e_a ⊗ uniform", uniform)):
            tasks = control_tasks(mdp, uniform_policy(s, a), phi, CONTEXT[name], seed=1)
            star = HookedICTDTransformer.from_theta_star(
                ICTDConfig(d_features=phi.shape[-1], n_layers=10, dtype="float64")
            )
            estimates = {
                "theta* (SARSA, 10 layers)": in_context_q(star, tasks, a),
                "certainty equivalence": certainty_equivalence_q(mdp, tasks),
                "Q-learning": q_learning(mdp, tasks),
                "greedy on the true q_behaviour": mdp.q_values(uniform_policy(s, a)),
                **linear_blocks(mdp, phi, CONTEXT[name]),
            }
            act = acting_regret(mdp, tasks, uniform_policy(s, a), estimates, baseline="certainty equivalence")
            print(
                f"{name}, {kind} features, {act.n_tasks} tasks, {CONTEXT[name]} transitions; "
                f"J* {act.optimal_return.text()}"
            )
            for policy, regret in act.regret.items():
                vs = act.versus.get(policy)
                against = (
                    f"; minus certainty equivalence's, task by task: {vs.difference.text('.3f')} ({vs.verdict})"
                    if vs
                    else ""
                )
                print(f"  regret {policy:32s} {regret.text('.3f')}{against}")


if __name__ == "__main__":
    main()
