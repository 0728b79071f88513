"""Control tasks: MDPs, q_π and q* against textbook loops written here, and softmax-weighted SARSA as θ* on
the state-action chain, layer by layer against an independent SARSA loop (float64, 1e-10)."""

import itertools

import numpy as np
import pytest
import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.tasks.features import make_features
from ictd_interp.tasks.mdp import (
    MDP,
    greedy_policy,
    pair_features,
    random_mdps,
    split_pairs,
    two_action_chains,
    uniform_policy,
)
from ictd_interp.tasks.sampling import control_tasks


def policy_evaluation_loop(P, r, pi, gamma, sweeps=5000):
    """Iterative policy evaluation of q, one (s, a) at a time."""
    s, a = r.shape
    q = np.zeros((s, a))
    for _ in range(sweeps):
        new = np.zeros_like(q)
        for i, j in itertools.product(range(s), range(a)):
            new[i, j] = r[i, j] + gamma * sum(P[i, j, k] * sum(pi[k, b] * q[k, b] for b in range(a)) for k in range(s))
        if np.abs(new - q).max() < 1e-14:
            return new
        q = new
    return q


def value_iteration_loop(P, r, gamma, sweeps=5000):
    s, a = r.shape
    v = np.zeros(s)
    for _ in range(sweeps):
        q = np.array([[r[i, j] + gamma * P[i, j] @ v for j in range(a)] for i in range(s)])
        if np.abs(q.max(1) - v).max() < 1e-14:
            return q
        v = q.max(1)
    return q


@pytest.mark.parametrize(
    "make", [lambda: random_mdps(3, 4, 3, 0.9, seed=0), lambda: two_action_chains(3, 5, 0.8, seed=1)]
)
def test_q_pi_and_q_star_match_textbook_loops(make):
    mdp = make()
    gen = torch.Generator().manual_seed(2)
    pi = torch.rand(mdp.n_states, mdp.n_actions, generator=gen, dtype=torch.float64)
    pi = pi / pi.sum(-1, keepdim=True)
    q, q_star = mdp.q_values(pi), mdp.q_star()
    for t in range(3):
        P, r = mdp.P[t].numpy(), mdp.r[t].numpy()
        assert np.abs(q[t].numpy() - policy_evaluation_loop(P, r, pi.numpy(), mdp.gamma)).max() < 1e-10
        assert np.abs(q_star[t].numpy() - value_iteration_loop(P, r, mdp.gamma)).max() < 1e-10


def test_the_greedy_policy_of_q_star_is_the_best_deterministic_policy():
    mdp = random_mdps(1, 4, 2, 0.9, seed=3)
    best = mdp.policy_return(greedy_policy(mdp.q_star()))
    returns = [
        mdp.policy_return(torch.nn.functional.one_hot(torch.tensor(c), 2).double())
        for c in itertools.product(range(2), repeat=4)
    ]  # all 16 deterministic policies
    assert float(best) == pytest.approx(float(max(returns)), abs=1e-10)
    assert float(mdp.policy_return(uniform_policy(4, 2))) < float(best)


def test_the_pair_chain_is_the_mdp_under_the_behaviour_policy():
    mdp, pi = two_action_chains(2, 4, 0.9, seed=4), torch.tensor([[0.7, 0.3]] * 4, dtype=torch.float64)
    pairs = mdp.pair_mrp(pi)
    assert pairs.P.shape == (2, 8, 8) and torch.allclose(pairs.P.sum(-1), torch.ones(2, 8, dtype=torch.float64))
    # from (state 0, action 1): to state 2 with prob 1 - eps, then action 0 w.p. 0.7
    eps = float(mdp.P[0, 0, 1, 0])
    assert float(pairs.P[0, 1, 2 * 2 + 0]) == pytest.approx((1 - eps) * 0.7)
    tasks = control_tasks(mdp, pi, torch.eye(8, dtype=torch.float64), 4000, seed=0)
    states, actions = split_pairs(tasks.states, 2)
    assert float(actions.double().mean()) == pytest.approx(0.3, abs=0.02)  # A ~ π whatever the state
    assert torch.equal(tasks.v_true, mdp.q_values(pi).reshape(2, 8).gather(1, tasks.states))


def sarsa_loop(phi, rewards, gamma, layers):
    """Batch softmax-weighted SARSA on one context: q_{t+1}(j) = q_t(j) + Σ_k K(k-1, j) δ_k,
    δ_k = R_k + γ q_t(k) − q_t(k−1) (the query's own estimate bootstraps the last),
    K(i, j) = softmax_i <φ(S_i, A_i), φ(S_j, A_j)> over sources i < n."""
    n = len(rewards)
    scores = phi[:n] @ phi.T  # [source, target]
    K = np.exp(scores - scores.max(0))
    K = K / K.sum(0)
    q, out = np.zeros(n + 1), []
    for _ in range(layers):
        delta = np.array([rewards[k - 1] + gamma * q[k] - q[k - 1] for k in range(1, n + 1)])
        q = q + np.array([sum(K[k - 1, j] * delta[k - 1] for k in range(1, n + 1)) for j in range(n + 1)])
        out.append(q.copy())
    return out


def test_softmax_sarsa_is_theta_star_on_the_state_action_chain():
    mdp = random_mdps(3, 4, 2, 0.9, seed=5)
    phi = pair_features(make_features(4, 2, "uniform", 1.0, generator=torch.Generator().manual_seed(6)), 2)
    tasks = control_tasks(mdp, uniform_policy(4, 2), phi, 14, seed=7)
    star = HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=4, n_layers=3, dtype="float64"))
    _, cache = star.run_with_cache(tasks.prompt)
    for t in range(3):
        expected = sarsa_loop(tasks.x[t].numpy(), tasks.rewards[t].numpy(), 0.9, 3)
        for layer in range(3):
            got = cache["resid_post", layer][t, :, star.layout.current].numpy()
            assert np.abs(got - expected[layer]).max() < 1e-10


def test_bad_mdps_and_policies_are_refused_by_name():
    mdp = random_mdps(1, 3, 2, seed=0)
    with pytest.raises(ValueError, match="P: every"):
        MDP(mdp.P * 2, mdp.r, mdp.mu0, 0.9)
    with pytest.raises(ValueError, match="r: expected shape"):
        MDP(mdp.P, mdp.r[..., :1], mdp.mu0, 0.9)
    with pytest.raises(ValueError, match="policy: expected"):
        mdp.q_values(uniform_policy(3, 3))
    with pytest.raises(ValueError, match="features: expected"):
        control_tasks(mdp, uniform_policy(3, 2), torch.eye(5), 10, seed=0)


def test_the_control_families_sample_state_action_chains_whose_value_is_q():
    from ictd_interp.config import TaskDistribution
    from ictd_interp.tasks.sampling import sample_from

    dist = TaskDistribution(family="mdp-chain", n_states=4, d_features=3, context_len=20)
    tasks = sample_from(dist, 5, seed=0)
    assert tasks.mrp.n_states == 8 and tasks.features.shape == (5, 8, 3)
    again = two_action_chains(5, 4, 0.9, generator=torch.Generator().manual_seed(0)).q_values(uniform_policy(4, 2))
    assert (tasks.mrp.v_pi.view(5, 4, 2) - again).abs().max() <= 1e-12  # the same draws: q of the uniform policy
    with pytest.raises(ValueError, match="8 states"):
        TaskDistribution(family="mdp-random", n_states=4, d_features=6, feature_kind="onehot")
