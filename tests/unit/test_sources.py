import sys

import numpy as np
import pytest
import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.analyses.metrics.convergence import errors_by_depth
from ictd_interp.tasks.sampling import sample_tasks
from ictd_interp.tasks.sources import from_gymnasium, loop_mrps, random_mrps

gym = pytest.importorskip("gymnasium")


def policy_evaluation(env_id, gamma, terminal, iters=20000):
    """Independent iterative policy evaluation on env.P with the uniform policy: the Bellman backup
    applied until it stops moving (not the linear solve ``from_gymnasium`` uses)."""
    env = gym.make(env_id).unwrapped
    s, a, mu0 = env.observation_space.n, env.action_space.n, env.initial_state_distrib
    rows = [
        (state, prob / a, nxt, reward, done)
        for state in range(s)
        for action in range(a)
        for prob, nxt, reward, done in env.P[state][action]
    ]
    src, w, nxt, reward, done = (np.array(c) for c in zip(*rows))
    v = np.zeros(s)
    for _ in range(iters):
        cont = np.where(done, (mu0 @ v) if terminal == "restart" else 0.0, v[nxt.astype(int)])
        new = np.zeros(s)
        np.add.at(new, src.astype(int), w * (reward + gamma * cont))
        if np.abs(new - v).max() < 1e-13:
            break
        v = new
    return v


@pytest.mark.parametrize("terminal", ["absorbing", "restart"])
def test_frozenlake_matches_iterative_policy_evaluation(terminal):
    mrp = from_gymnasium("FrozenLake-v1", gamma=0.95, terminal=terminal)
    expected = policy_evaluation("FrozenLake-v1", 0.95, terminal)
    reachable = [0, 1, 2, 3, 4, 6, 8, 9, 10, 13, 14]  # non-terminal states: same meaning both ways
    assert np.abs(mrp.v_pi.numpy()[reachable] - expected[reachable]).max() < 1e-8


def test_terminal_handling_both_ways():
    absorbing = from_gymnasium("FrozenLake-v1", gamma=0.9, terminal="absorbing")
    for end in (5, 7, 11, 12, 15):  # holes and goal
        assert absorbing.P[end, end] == 1.0 and absorbing.r[end] == 0.0 and abs(absorbing.v_pi[end]) < 1e-12
    with pytest.raises(ValueError, match="not unique"):
        _ = absorbing.mu_pi
    restart = from_gymnasium("FrozenLake-v1", gamma=0.9, terminal="restart")
    assert restart.P[14, 0] > 0  # reaching the goal from 14 restarts at the start state
    assert torch.allclose(restart.mu_pi @ restart.P, restart.mu_pi, atol=1e-12)
    with pytest.raises(ValueError, match="terminal"):
        from_gymnasium("FrozenLake-v1", terminal="vanish")


@pytest.mark.parametrize("env_id", ["FrozenLake8x8-v1", "CliffWalking-v1", "Taxi-v4"])
def test_other_toy_text_environments(env_id):
    mrp = from_gymnasium(env_id, gamma=0.9, terminal="restart")
    assert torch.allclose(mrp.P.sum(-1), torch.ones(mrp.n_states, dtype=torch.float64))
    assert np.abs(mrp.v_pi.numpy() - policy_evaluation(env_id, 0.9, "restart")).max() < 1e-8


def test_policy_array_and_validation():
    greedy_right = np.zeros((16, 4))
    greedy_right[:, 2] = 1.0
    mrp = from_gymnasium("FrozenLake-v1", policy=greedy_right, gamma=0.9)
    assert mrp.n_states == 16
    with pytest.raises(ValueError, match="policy"):
        from_gymnasium("FrozenLake-v1", policy=np.ones((16, 4)))


def test_theta_star_converges_on_a_gymnasium_mrp():
    mrp = from_gymnasium("FrozenLake-v1", gamma=0.9, terminal="restart")
    tasks = sample_tasks(4, 16, 16, 1000, 0.9, feature_kind="onehot", feature_scale=3.0, seed=0, mrp=mrp)
    model = HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=16, n_layers=32, dtype="float64"))
    errors = errors_by_depth(model, tasks).mean(-1)
    # Measured 0.398 (depth 0) -> 0.152 (1) -> 0.108 (4) -> 0.101 (32): geometric decay onto the
    # statistical floor of rarely visited states (n=2000 lowers the floor to 0.054).
    assert errors[32] < errors[1] / 1.4 and errors[32] < errors[0] / 3
    assert errors[4] - errors[32] < (errors[1] - errors[32]) / 4


def test_random_and_loop_families():
    for mrp in (random_mrps(4, 7, seed=0), random_mrps(4, 7, density=0.2, seed=0), loop_mrps(4, 7, seed=0)):
        assert torch.allclose(mrp.P.sum(-1), torch.ones(4, 7, dtype=torch.float64))
        assert (mrp.mu_pi > 0).all()  # ergodic
        assert (mrp.P[:, torch.arange(7), (torch.arange(7) + 1) % 7] > 0).all()  # the ring
    with pytest.raises(ValueError, match="density"):
        random_mrps(2, 5, density=0.0)


def test_missing_gymnasium_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium", None)
    with pytest.raises(ImportError, match=r"ictd-interp\[gym\]"):
        from_gymnasium("FrozenLake-v1")


def test_frozenlake_mdp_q_star_matches_value_iteration_on_the_table():
    """q* of the environment's MDP against value iteration written on env.P itself (absorbing terminals)."""
    from ictd_interp.tasks.sources import mdp_from_gymnasium

    env = gym.make("FrozenLake-v1").unwrapped
    s, a, gamma = env.observation_space.n, env.action_space.n, 0.95
    v = np.zeros(s)
    for _ in range(5000):
        q = np.array(
            [
                [
                    sum(p * (rew + (0.0 if done else gamma * v[nxt])) for p, nxt, rew, done in env.P[i][j])
                    for j in range(a)
                ]
                for i in range(s)
            ]
        )
        if np.abs(q.max(1) - v).max() < 1e-13:
            break
        v = q.max(1)
    mdp = mdp_from_gymnasium("FrozenLake-v1", gamma=gamma, terminal="absorbing")
    reachable = [0, 1, 2, 3, 4, 6, 8, 9, 10, 13, 14]  # non-terminal states
    assert np.abs(mdp.q_star().numpy()[reachable] - q[reachable]).max() < 1e-9
    uniform = np.full((s, a), 1 / a)
    marginal = from_gymnasium("FrozenLake-v1", gamma=gamma).v_pi.numpy()
    assert np.abs(mdp.state_mrp(uniform).v_pi.numpy() - marginal).max() < 1e-12
