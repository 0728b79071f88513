"""Pretraining on action values (issue 45): the q-learning and supervised-q-star objectives, against quantities
computed here another way (a value-iteration loop, prompts built one window and one action at a time)."""

import pytest
import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.config import TaskDistribution, TrainConfig
from ictd_interp.tasks.mdp import MDP, pair_features, random_mdps, uniform_policy
from ictd_interp.tasks.prompt import build_prompt
from ictd_interp.tasks.sampling import control_tasks
from ictd_interp.training.batches import windows_from_tasks
from ictd_interp.training.objectives import objective, q_learning_loss

S, A, D, N, W, GAMMA = 3, 2, 2, 6, 3, 0.8


def _tasks(n_tasks=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    mdp = random_mdps(n_tasks, S, A, GAMMA, generator=gen)
    features = pair_features(torch.rand(n_tasks, S, D, generator=gen, dtype=torch.float64), A)
    tasks = control_tasks(mdp, uniform_policy(S, A), features, N + W - 1, generator=gen)
    dist = TaskDistribution(family="mdp-random", n_states=S, d_features=D * A, context_len=N, gamma=GAMMA)
    return mdp, tasks, dist


def _value_iteration(P, r, gamma, sweeps=2000):
    """Textbook q*: q(s, a) <- r(s, a) + gamma sum_s' P(s'|s, a) max_a' q(s', a'), sweep by sweep."""
    q = [[0.0] * A for _ in range(S)]
    for _ in range(sweeps):
        q = [
            [float(r[s, a]) + gamma * sum(float(P[s, a, t]) * max(q[t]) for t in range(S)) for a in range(A)]
            for s in range(S)
        ]
    return torch.tensor(q, dtype=torch.float64)


def test_a_pair_chain_gives_back_its_mdp_under_any_policy():
    gen = torch.Generator().manual_seed(3)
    mdp = random_mdps(5, S, A, GAMMA, generator=gen)
    policy = torch.softmax(torch.randn(5, S, A, generator=gen, dtype=torch.float64), -1)
    back = MDP.from_pair_mrp(mdp.pair_mrp(policy), A)
    for name in ("P", "r", "mu0"):
        torch.testing.assert_close(getattr(back, name), getattr(mdp, name), rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="6 state-action pairs do not split into 4 actions"):
        MDP.from_pair_mrp(mdp.pair_mrp(policy), 4)


def test_q_star_targets_and_action_queries_are_the_query_pairs():
    mdp, tasks, dist = _tasks()
    batch = windows_from_tasks(tasks, dist, W, 0, None, True, "q_star", action_queries=True)
    query_pairs = tasks.states[:, N : N + W]
    for b in range(len(tasks)):
        q = _value_iteration(mdp.P[b], mdp.r[b], GAMMA)
        for t in range(W):
            s, a = divmod(int(query_pairs[b, t]), A)
            assert abs(float(batch.query_value[b, t]) - float(q[s, a])) < 1e-10
            for act in range(A):
                assert torch.equal(batch.action_queries[act, b, t], tasks.features[b, s * A + act])


def test_the_q_learning_loss_bootstraps_on_the_best_action_of_the_next_query():
    mdp, tasks, dist = _tasks()
    batch = windows_from_tasks(tasks, dist, W, 0, None, False, action_queries=True)
    model = HookedICTDTransformer.from_theta_star(
        ICTDConfig(d_features=D * A, n_layers=3, gamma=GAMMA, dtype="float64")
    )
    deltas = []
    for b in range(len(tasks)):

        def value(t, pair, b=b):  # window t's prompt, its query pair replaced, built from the trajectory alone
            states = tasks.states[b, t : t + N + 1].clone()
            x = tasks.features[b, states]
            x[-1] = tasks.features[b, pair]
            rewards = tasks.mrp.r[b, states[:-1]]
            return float(model(build_prompt(x[None], rewards[None]))[0, -1].detach())

        for t in range(W - 1):
            s_next = int(tasks.states[b, t + 1 + N]) // A
            target = float(tasks.mrp.r[b, tasks.states[b, t + N]]) + GAMMA * max(
                value(t + 1, s_next * A + act) for act in range(A)
            )
            deltas.append(target - value(t, int(tasks.states[b, t + N])))
    expected = sum(d * d for d in deltas) / len(deltas)
    assert abs(float(q_learning_loss(model, batch)) - expected) < 1e-12
    # the bootstrap is a max, not the behaviour's next action: SARSA's td loss differs on these tasks
    assert abs(float(objective("td")(model, batch)) - expected) > 1e-6


def test_action_value_objectives_need_a_control_family():
    with pytest.raises(ValueError, match="'q-learning' learns action values: it needs a control family"):
        TrainConfig.from_preset("quick", objective="q-learning")
    _, tasks, dist = _tasks()
    boyan = TaskDistribution(n_states=S * A, d_features=D * A, context_len=N, gamma=GAMMA)
    with pytest.raises(ValueError, match="no control family"):
        windows_from_tasks(tasks, boyan, W, 0, None, True, "q_star")


def test_a_control_models_report_names_sarsa_and_what_it_was_trained_toward():
    from ictd_interp.analyses.reports.summary_md import control_algorithm_sentence, eval_tasks_label

    assert control_algorithm_sentence(TrainConfig.from_preset("quick")) == []
    td = control_algorithm_sentence(TrainConfig.from_preset("control-quick"))
    assert len(td) == 1 and "**SARSA** step" in td[0] and "trained toward q*" not in td[0]
    q = TrainConfig.from_preset("control-quick", objective="q-learning")
    assert "trained toward q* (objective q-learning)" in control_algorithm_sentence(q)[0]
    assert "still against q of the behaviour policy" in eval_tasks_label(q, 4)
    assert "trained toward q*" not in eval_tasks_label(TrainConfig.from_preset("control-quick"), 4)
