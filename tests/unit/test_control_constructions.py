"""Expected SARSA and softmax Q-learning as θ* with a backup over action columns
(``ictd_interp.hooks.control_backups``), layer by
layer against loops written here from the equations (float64, 1e-10), and the softmax backup's bounds."""

import math

import numpy as np
import pytest
import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.hooks.control_backups import expected_sarsa_hooks, soft_q_hooks
from ictd_interp.tasks.action_columns import action_column_prompt
from ictd_interp.tasks.mdp import random_mdps, uniform_policy
from ictd_interp.tasks.sampling import control_tasks

A, LAYERS, GAMMA = 3, 3, 0.9


def case(seed=0):
    mdp = random_mdps(2, 4, A, GAMMA, seed=seed)
    phi = torch.randn(4 * A, 5, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64) * 0.7
    tasks = control_tasks(mdp, uniform_policy(4, A), phi, 10, seed=seed + 2)
    star = HookedICTDTransformer.from_theta_star(
        ICTDConfig(d_features=5, n_layers=LAYERS, gamma=GAMMA, dtype="float64")
    )
    return tasks, star, action_column_prompt(tasks, A)


def backup_loop(x, rewards, next_cols, weights_fn, layers):
    """q on every column: sources 0..n-1, then the action columns, then the query. Per layer,
    δ_k = R_{k+1} + γ Σ_a w_a q(col(S_{k+1}, a)) − q(k) with the backup taken from the values entering the layer,
    and q(j) += Σ_k softmax_k <x_k, x_j> δ_k over the sources k only."""
    n = len(rewards)
    scores = x[:n] @ x.T
    K = np.exp(scores - scores.max(0))
    K = K / K.sum(0)
    q, out = np.zeros(len(x)), []
    for _ in range(layers):
        v_next = q[next_cols]  # [n, a]
        target = GAMMA * (weights_fn(v_next) * v_next).sum(-1)
        delta = rewards + target - q[:n]
        q = q + K.T @ delta
        out.append(q.copy())
    return out


def _layers(star, cols, hooks):
    with star.hooks(fwd_hooks=hooks):
        _, cache = star.run_with_cache(cols.prompt, names_filter=lambda n: n.endswith("hook_resid_post"))
    return [cache["resid_post", l][..., star.layout.current] for l in range(LAYERS)]


def test_expected_sarsa_is_theta_star_with_the_policys_backup():
    tasks, star, cols = case()
    pi = torch.tensor([[0.2, 0.5, 0.3], [1.0, 0.0, 0.0], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]], dtype=torch.float64)
    got = _layers(star, cols, expected_sarsa_hooks(star, cols, pi))
    for b in range(2):
        w = pi[cols.next_states[b]].numpy()
        x, r = cols.prompt[b, :, :5].numpy(), tasks.rewards[b].numpy()
        expected = backup_loop(x, r, cols.next_columns[b].numpy(), lambda v, w=w: w, LAYERS)
        for l in range(LAYERS):
            assert np.abs(got[l][b].numpy() - expected[l]).max() < 1e-10
    plain = star(tasks.prompt)[:, -1]  # SARSA's sampled backup gives other values
    assert (got[-1][:, -1] - plain).abs().max() > 1e-3


def test_softmax_q_is_theta_star_with_an_attention_over_the_next_actions():
    tasks, star, cols = case(3)
    beta = 4.0
    got = _layers(star, cols, soft_q_hooks(star, cols, beta))

    def soft(v):
        e = np.exp(beta * (v - v.max(-1, keepdims=True)))
        return e / e.sum(-1, keepdims=True)

    for b in range(2):
        x, r = cols.prompt[b, :, :5].numpy(), tasks.rewards[b].numpy()
        expected = backup_loop(x, r, cols.next_columns[b].numpy(), soft, LAYERS)
        for l in range(LAYERS):
            assert np.abs(got[l][b].numpy() - expected[l]).max() < 1e-10


def test_the_softmax_backup_is_within_log_a_over_beta_of_the_max_and_reaches_q_learning():
    v = torch.randn(1000, A, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for beta in (0.5, 2.0, 50.0):
        soft = (torch.softmax(beta * v, -1) * v).sum(-1)
        hard = v.amax(-1)
        assert bool((soft <= hard + 1e-15).all()) and bool((soft >= hard - math.log(A) / beta).all())
    tasks, star, cols = case(5)
    hard_max = lambda v: (v == v.max(-1, keepdims=True)).astype(float)  # noqa: E731  Q-learning's max backup
    got = _layers(star, cols, soft_q_hooks(star, cols, 1e7))
    x, r = cols.prompt[0, :, :5].numpy(), tasks.rewards[0].numpy()
    expected = backup_loop(x, r, cols.next_columns[0].numpy(), hard_max, LAYERS)
    assert np.abs(got[-1][0].numpy() - expected[-1]).max() < 1e-5
    with pytest.raises(ValueError, match="beta"):
        soft_q_hooks(star, cols, 0.0)


def test_action_columns_hold_the_next_states_pairs():
    tasks, _, cols = case()
    n = cols.n_sources
    assert cols.prompt.shape[1] == n + n * A + 1 and (cols.prompt[:, -1] == tasks.prompt[:, -1]).all()
    k, a = 4, 2
    pair = int(cols.next_states[0, k]) * A + a
    assert torch.equal(cols.prompt[0, cols.next_columns[0, k, a], :5], tasks.features[0, pair])
    assert (cols.prompt[0, n : n * (1 + A), 5:] == 0).all()  # no reward, no values


def test_the_reference_backup_iteration_is_the_loop_and_the_hooks():
    from ictd_interp.reference.control_iterations import backup_td, policy_weights, softmax_weights

    tasks, star, cols = case(7)
    pi = torch.softmax(torch.randn(2, 4, A, generator=torch.Generator().manual_seed(8), dtype=torch.float64), -1)
    x = cols.prompt[..., :5]
    for weights, hooks, loop_w in (
        (policy_weights(pi, cols.next_states), expected_sarsa_hooks(star, cols, pi), None),
        (softmax_weights(2.0), soft_q_hooks(star, cols, 2.0), 2.0),
    ):
        ref = backup_td(x, tasks.rewards, cols.next_columns, weights, GAMMA, LAYERS)
        got = _layers(star, cols, hooks)
        assert max(float((got[l] - ref[:, l + 1]).abs().max()) for l in range(LAYERS)) < 1e-10
        w = (
            (lambda v: pi[0][cols.next_states[0]].numpy())
            if loop_w is None
            else (lambda v, b=loop_w: np.exp(b * v) / np.exp(b * v).sum(-1, keepdims=True))
        )
        loop = backup_loop(x[0].numpy(), tasks.rewards[0].numpy(), cols.next_columns[0].numpy(), w, LAYERS)
        assert np.abs(ref[0, -1].numpy() - loop[-1]).max() < 1e-10


def _linear_case(seed=0, n=12, d=4):
    from ictd_interp.tasks.mdp import pair_features

    mdp = random_mdps(3, 4, A, GAMMA, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    psi = pair_features(torch.randn(4, d, generator=gen, dtype=torch.float64) * 0.6, A)  # [pairs, A d]
    pi0 = torch.softmax(torch.randn(4, A, generator=gen, dtype=torch.float64), -1)  # the actor's start
    return mdp, psi, pi0, n


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.7, 2.5)])
def test_linear_sarsa_and_actor_critic_blocks_are_the_loops_layer_by_layer(alpha, beta):
    """``models.linear.control``: critic and actor queries of every pair, after every layer, against
    ``batch_actor_critic`` (a loop over transitions) at 1e-10; the critic alone is SARSA's block."""
    from ictd_interp.models.linear.control import (
        actor_critic,
        actor_critic_features,
        actor_queries,
        sarsa,
        score_features,
    )
    from ictd_interp.models.linear.td import linear_model
    from ictd_interp.reference.control_iterations import batch_actor_critic

    mdp, psi, pi0, n = _linear_case()
    d = psi.shape[-1]
    tasks = control_tasks(mdp, uniform_policy(4, A), actor_critic_features(psi, pi0), n, seed=3)
    pairs = tasks.states  # pair indices of (S_k, A_k)
    critic_q = actor_critic_features(psi, pi0).expand(len(tasks), -1, -1)
    actor_q = actor_queries(psi).expand(len(tasks), -1, -1)
    sarsa_tasks = control_tasks(mdp, uniform_policy(4, A), psi, n, seed=3)
    assert torch.equal(sarsa_tasks.states, pairs)  # the same contexts
    g = score_features(psi, pi0)
    loops = [
        batch_actor_critic(psi[pairs[b]], g[pairs[b, :-1]], tasks.rewards[b], GAMMA, alpha, beta, LAYERS)
        for b in range(len(tasks))
    ]
    for layer in range(1, LAYERS + 1):
        ac = linear_model([actor_critic(d, alpha, beta)] * layer, GAMMA)
        lone = linear_model([sarsa(d, alpha * torch.eye(d, dtype=torch.float64))] * layer, GAMMA)
        with torch.no_grad():
            critic, actor = ac.query_values(tasks.prompt, critic_q), ac.query_values(tasks.prompt, actor_q)
            alone = lone.query_values(sarsa_tasks.prompt, psi.expand(len(tasks), -1, -1))
        w = torch.stack([loop[0][layer - 1] for loop in loops])
        theta = torch.stack([loop[1][layer - 1] for loop in loops])
        assert (critic - w @ psi.T).abs().max() < 1e-10
        assert (actor - theta @ psi.T).abs().max() < 1e-10
        assert (alone - w @ psi.T).abs().max() < 1e-10
    assert theta.abs().max() > 1e-2 and w.abs().max() > 1e-2  # the actor and the critic moved


def test_from_the_uniform_policy_the_actors_preference_is_the_critics_advantage():
    """With π_0 uniform and features ``e_a ⊗ φ(s)``, ``h(s, a) = (β/α) (q(s, a) − mean_b q(s, b))`` exactly (theory
    §14a), so the actor's greedy policy is the critic's; from a non-uniform π_0 it is not the advantage."""
    from ictd_interp.models.linear.control import actor_critic, actor_critic_features, actor_queries
    from ictd_interp.models.linear.td import linear_model

    mdp, psi, pi0, n = _linear_case(seed=4, n=30)
    alpha, beta = 0.8, 3.0
    gaps = []
    for start in (uniform_policy(4, A), pi0):
        tasks = control_tasks(mdp, uniform_policy(4, A), actor_critic_features(psi, start), n, seed=5)
        model = linear_model([actor_critic(psi.shape[-1], alpha, beta)] * LAYERS, GAMMA)
        with torch.no_grad():
            q = model.query_values(tasks.prompt, actor_critic_features(psi, start).expand(3, -1, -1)).view(3, 4, A)
            h = model.query_values(tasks.prompt, actor_queries(psi).expand(3, -1, -1)).view(3, 4, A)
        gaps.append((h - beta / alpha * (q - q.mean(-1, keepdim=True))).abs().max())
    assert gaps[0] < 1e-12 and gaps[1] > 1e-3
