"""The ladder's top rung, the posterior mean of v_pi under the Boyan prior: labelling weights worked out by hand, the
restart factor's exact values, and the posterior checked against rejection sampling from the prior, written here
apart from the estimator (numpy only)."""

import math

import numpy as np
import pytest
import torch

from ictd_interp.analyses.metrics import bayes
from ictd_interp.analyses.metrics.baselines import error_parts, td_fixed_point_states
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.tasks.mrp import boyan_chains
from ictd_interp.tasks.sampling import TaskBatch, sample_from


def _weights(seq, s):
    seq = np.asarray(seq)
    labels = bayes.labellings(seq, s)
    counts = bayes._step_counts(seq, int(seq.max()) + 1)
    out = {}
    for lab, log_fwd in zip(labels, bayes._log_forward(labels, counts, s)):
        restart = counts[lab == s - 1][0] if (lab == s - 1).any() else np.zeros(0)
        out[tuple(lab.tolist())] = math.exp(log_fwd + bayes.log_restart_factor(bayes.restart_key(restart, s)))
    return out


def test_labelling_weights_by_hand():
    """s = 3, one step A -> B. (0,1): E[p] = 1/2; (0,2): E[1 - p] = 1/2; (1,2): row s-2 steps to s-1, 1; (2,0) and
    (2,1): the restart row's E[w_j / sum w] = 1/3 by symmetry; (1,0) and (2,2) are impossible."""
    got = _weights([0, 1], 3)
    want = {(0, 1): 0.5, (0, 2): 0.5, (1, 2): 1.0, (2, 0): 1 / 3, (2, 1): 1 / 3}
    assert set(got) == set(want)
    for lab, w in want.items():
        assert got[lab] == pytest.approx(w, rel=1e-4)


def test_an_impossible_context_is_refused():
    # A -> A is a step only the restart row takes; B -> B after it then has no label left
    with pytest.raises(ValueError, match="fit no Boyan chain"):
        bayes.posterior_mean(np.array([0, 0, 1, 1]), np.zeros(3), 3, 0.9, np.random.default_rng(0))


def test_restart_factor_by_hand():
    """E[π_0] = 1/s by symmetry; E[π_0 π_1] for s = 2 is E[w0 w1 / (w0 + w1)^2], integrated here on a grid."""
    assert math.exp(bayes.log_restart_factor((1, 0, 0))) == pytest.approx(1 / 3, rel=1e-4)
    assert bayes.log_restart_factor((0, 0, 0, 0)) == 0.0
    g = np.linspace(0.01, 0.99, 4001)
    w0, w1 = np.meshgrid(g, g)
    f = w0 * w1 / (w0 + w1) ** 2
    grid = np.trapezoid(np.trapezoid(f, g, axis=1), g) / 0.98**2
    assert math.exp(bayes.log_restart_factor((1, 1))) == pytest.approx(grid, rel=1e-5)


def test_uniform_simplex_density_integrates_to_one_and_is_zero_past_the_range():
    rng = np.random.default_rng(2)
    for s in (2, 3, 5):
        pi = rng.dirichlet(np.ones(s), size=200_000)  # density (s - 1)! on the simplex
        assert np.exp(bayes.log_uniform_simplex_density(pi)).mean() / math.factorial(s - 1) == pytest.approx(
            1, abs=0.02
        )
    assert bayes.log_uniform_simplex_density(np.array([[0.995, 0.005]]))[0] == -np.inf  # ratio 199 > 99


def _prior_draws(rng, N, s):
    """N Boyan chains of the prior (docs/theory.md §1), written apart from the package."""
    p = rng.uniform(0.01, 0.99, (N, s - 2))
    P = np.zeros((N, s, s))
    for i in range(s - 2):
        P[:, i, i + 1], P[:, i, i + 2] = p[:, i], 1 - p[:, i]
    P[:, s - 2, s - 1] = 1
    w = rng.uniform(0.01, 0.99, (N, s))
    P[:, s - 1] = w / w.sum(1, keepdims=True)
    mu0 = rng.uniform(0.01, 0.99, (N, s))
    return P, mu0 / mu0.sum(1, keepdims=True)


def _walk(rng, P, mu0, n):
    N, s = mu0.shape
    states = np.empty((N, n + 1), dtype=np.int64)
    cum = np.cumsum(mu0, 1)
    states[:, 0] = (rng.random((N, 1)) > cum).sum(1)
    for t in range(n):
        cum = np.cumsum(P[np.arange(N), states[:, t]], 1)
        states[:, t + 1] = np.minimum((rng.random((N, 1)) > cum).sum(1), s - 1)
    return states


def _pattern(row):
    seen = {}
    return tuple(seen.setdefault(int(x), len(seen)) for x in row)


@pytest.mark.parametrize("pattern", [(0, 1, 2, 0), (0, 1, 0, 1)])
def test_posterior_matches_rejection_sampling_from_the_prior(pattern, monkeypatch):
    """Accept the prior's draws whose context shows ``pattern`` (s = 4, n = 3). Values are linear in r and r is
    independent of P, so the posterior mean at position j is sum_u E[(I - γP)^-1 (σ(S_j), σ(u)) | pattern] r(u):
    each column u is the estimator's answer with the reward 1 on u's state and 0 elsewhere."""
    s, n, gamma = 4, 3, 0.9
    rng = np.random.default_rng(3)
    P, mu0 = _prior_draws(rng, 600_000, s)
    states = _walk(rng, P, mu0, n)
    keep = np.array([_pattern(row) == pattern for row in states])
    P, states = P[keep], states[keep]
    inv = np.linalg.inv(np.eye(s) - gamma * P)  # [N, s, s]
    sources = sorted(set(pattern[:-1]))
    monkeypatch.setattr(bayes, "SAMPLES", 1 << 16)
    first = {u: pattern.index(u) for u in sources}
    mrp = boyan_chains(1, s, gamma, seed=0)
    for u in sources:
        truth = inv[np.arange(len(P))[:, None], states, states[:, [first[u]]]]  # [N, pos]: M(σ(S_j), σ(u))
        mrp_u = type(mrp)(mrp.P, torch.eye(s, dtype=torch.float64)[[u]], mrp.mu0, gamma)
        tasks = TaskBatch(mrp_u, torch.zeros(1, s, 2, dtype=torch.float64), torch.tensor([list(pattern)]))
        got = bayes.bayes_posterior_mean(tasks, gamma)[0].numpy()
        se = truth.std(0) / math.sqrt(len(truth))
        assert len(truth) > 20_000
        np.testing.assert_allclose(got, truth.mean(0), atol=float(5 * se.max() + 0.01))


def test_bayes_is_below_ce_on_the_training_prior_and_a_wrong_prior_would_not_be():
    """On Boyan tasks the posterior mean beats CE, every-visit MC's stronger sibling, at n = 30 and 100 (paired per
    task); fed the wrong discount it no longer does: the comparison can fail."""
    dist = TaskDistribution(context_len=30)
    tasks = sample_from(dist, 64, seed=11)
    ce = error_parts(td_fixed_point_states(tasks, 0.9), tasks)["msve"]
    good = error_parts(bayes.bayes_posterior_mean(tasks, 0.9), tasks)["msve"]
    bad = error_parts(bayes.bayes_posterior_mean(tasks, 0.3), tasks)["msve"]
    assert good.mean() < 0.6 * ce.mean()
    assert bad.mean() > ce.mean()


def test_available_names_the_family():
    assert bayes.available("boyan") is None
    assert "loop" in bayes.available("loop")


def test_answers_are_kept_per_task_set_and_equal_a_fresh_computation():
    tasks = sample_from(TaskDistribution(context_len=12), 4, seed=2)
    first = bayes.bayes_posterior_mean(tasks, 0.9)
    first += 1.0  # the caller's copy: the kept answer is not touched
    bayes._ANSWERS.clear()
    fresh = bayes.bayes_posterior_mean(tasks, 0.9)
    assert torch.equal(fresh + 1.0, first)
    assert torch.equal(bayes.bayes_posterior_mean(tasks, 0.9), fresh)
    assert not torch.equal(bayes.bayes_posterior_mean(tasks, 0.8), fresh)
