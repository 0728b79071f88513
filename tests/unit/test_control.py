"""Acting on in-context action values (``ictd_interp.analyses.metrics.acting``): cases worked by hand and exact
limits."""

import pytest
import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.analyses.metrics.acting import acting_regret, certainty_equivalence_q, in_context_q, q_learning
from ictd_interp.tasks.mdp import MDP, greedy_policy, random_mdps, split_pairs, uniform_policy
from ictd_interp.tasks.sampling import control_tasks


def deterministic_mdp(batch: int = 2) -> MDP:
    """3 states, 2 actions: action a moves s to (s + a + 1) mod 3; rewards differ per pair."""
    P = torch.zeros(batch, 3, 2, 3, dtype=torch.float64)
    for s in range(3):
        for a in range(2):
            P[:, s, a, (s + a + 1) % 3] = 1.0
    r = torch.tensor([[1.0, -1.0], [0.5, 2.0], [-0.5, 0.0]], dtype=torch.float64).expand(batch, 3, 2)
    return MDP(P, r, torch.full((batch, 3), 1 / 3, dtype=torch.float64), 0.8)


def test_certainty_equivalence_is_exact_when_the_context_covers_a_deterministic_mdp():
    mdp = deterministic_mdp()
    tasks = control_tasks(mdp, uniform_policy(3, 2), torch.eye(6, dtype=torch.float64), 200, seed=0)
    assert all(len(set(row.tolist())) == 6 for row in tasks.states)  # every pair visited
    assert (certainty_equivalence_q(mdp, tasks) - mdp.q_star()).abs().max() <= 1e-10
    act = acting_regret(
        mdp, tasks, uniform_policy(3, 2), {"CE": certainty_equivalence_q(mdp, tasks), "q*": mdp.q_star()}
    )
    assert act.regret["CE"].mean == pytest.approx(0.0, abs=1e-10) and act.regret["q*"].mean == 0.0
    assert act.regret["random"].mean > 0.1 and act.n_tasks == 2
    # paired against the behaviour (uniform) policy, task by task: CE's regret is 0, so the difference is minus the
    # uniform policy's regret on each task (the same on both copies of the MDP: a zero-width interval)
    assert act.versus["CE"].difference.mean == pytest.approx(-act.regret["behaviour"].mean, abs=1e-10)
    assert act.versus["CE"].verdict == "lower"
    with pytest.raises(ValueError, match="baseline"):
        acting_regret(mdp, tasks, uniform_policy(3, 2), {"CE": mdp.q_star()}, baseline="oracle")


def test_q_learning_on_one_self_loop_is_the_geometric_series():
    # one state, one action, reward 1, gamma 0.5: Q <- Q + 0.1 (1 + 0.5 Q - Q) from 0 gives 2 (1 - 0.95^N)
    mdp = MDP(
        torch.ones(1, 1, 1, 1, dtype=torch.float64),
        torch.ones(1, 1, 1, dtype=torch.float64),
        torch.ones(1, 1, dtype=torch.float64),
        0.5,
    )
    tasks = control_tasks(mdp, torch.ones(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64), 7, seed=0)
    q = q_learning(mdp, tasks, sweeps=3, step=0.1)
    assert float(q) == pytest.approx(2 * (1 - 0.95**21), abs=1e-12)


def test_in_context_q_at_the_context_query_is_the_models_own_prediction():
    mdp = random_mdps(4, 3, 2, 0.9, seed=1)
    phi = torch.randn(6, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    tasks = control_tasks(mdp, uniform_policy(3, 2), phi, 12, seed=3)
    star = HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=5, n_layers=3, dtype="float64"))
    q = in_context_q(star, tasks, 2)
    s, a = split_pairs(tasks.states[:, -1], 2)
    assert (q[torch.arange(4), s, a] - star(tasks.prompt)[:, -1]).abs().max() <= 1e-12
    assert q.shape == (4, 3, 2) and greedy_policy(q).sum(-1).eq(1).all()


def test_in_context_q_reads_every_pair_as_a_target_of_the_unchanged_context():
    """Against the reference iteration with one extra target column per pair: SARSA's backup (each source's next
    column, the last source's being the query) with weight 1, so the context is the one given."""
    from ictd_interp.reference.control_iterations import backup_td

    mdp = random_mdps(3, 3, 2, 0.9, seed=4)
    phi = torch.randn(6, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    tasks = control_tasks(mdp, uniform_policy(3, 2), phi, 9, seed=6)
    star = HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=4, n_layers=4, dtype="float64"))
    x = torch.cat([tasks.x, tasks.features], dim=1)  # context (sources and the query), then the 6 pairs
    nxt = torch.arange(1, 10).view(1, 9, 1).expand(3, -1, -1)  # source k bootstraps on column k + 1
    ref = backup_td(x, tasks.rewards, nxt, lambda q: torch.ones_like(q), 0.9, 4)[:, -1]
    assert (in_context_q(star, tasks, 2).reshape(3, 6) - ref[:, 10:]).abs().max() <= 1e-12
    assert (ref[:, :10] - star(tasks.prompt)).abs().max() <= 1e-12  # the context's own values are unchanged


def test_a_control_models_report_scores_its_greedy_and_softmax_acting():
    from ictd_interp import HookedICTDTransformer
    from ictd_interp.analyses.metrics.acting import model_acting
    from ictd_interp.config.train import PRESETS

    dist = PRESETS["control-quick"].tasks
    model = HookedICTDTransformer.from_pretrained("control-quick-s0", dtype="float64")
    acting = model_acting(model, dist, seed=3, n_tasks=32)
    assert set(acting.regret) == {"behaviour", "random", "greedy", "softmax"} and acting.n_tasks == 32
    assert acting.regret["behaviour"].mean == pytest.approx(acting.regret["random"].mean)  # the behaviour is uniform
    assert all(r.lo >= -1e-9 for r in acting.regret.values())  # regret against the optimal policy is never negative
    assert acting.versus["greedy"].verdict == "lower"  # acting greedily on its q beats the behaviour that wrote it
