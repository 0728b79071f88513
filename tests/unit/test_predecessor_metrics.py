"""The predecessor's own metrics (issue 42): their weight readings worked out by hand on their TD(0)
construction, and IWS / SS / VD against an independent re-implementation written the way their trainer
computes them (one prompt matrix per query, their column layout, autograd on the query), in float64."""

import numpy as np
import pytest
import torch

from ictd_interp.analyses.metrics.linear_family import td0_model
from ictd_interp.analyses.metrics.predecessor_metrics import function_readings, random_layer_iws, weight_readings
from ictd_interp.config import LinearICTDConfig, TaskDistribution
from ictd_interp.models import HookedLinearICTD
from ictd_interp.tasks.sampling import sample_from

D, S, N = 3, 5, 12


def _tasks(n_tasks=3, seed=0):
    return sample_from(TaskDistribution(d_features=D, n_states=S, context_len=N, gamma=0.9), n_tasks, seed=seed)


def _random_model(activation="relu", tied=True, seed=1):
    model = HookedLinearICTD(
        LinearICTDConfig(d_features=D, n_layers=2, gamma=0.9, tied=tied, activation=activation, dtype="float64")
    )
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for attn in model.unique_attention():
            attn.P.copy_(0.3 * torch.randn(attn.P.shape, generator=gen, dtype=torch.float64))
            attn.Q.copy_(0.3 * torch.randn(attn.Q.shape, generator=gen, dtype=torch.float64))
    return model


def _theirs(model, tasks, b, query):
    """Their ``pred_v`` on task ``b``'s context with ``query`` as the query column, differentiable in it."""
    d, n, gamma = D, N, model.cfg.gamma
    x = tasks.features[b, tasks.states[b]].double()  # [n+1, d]
    r = tasks.prompt[b, :-1, d].double()  # R_{i+1} of context column i
    context = torch.cat([x[:-1].T, gamma * x[1:].T, r[None]], dim=0)  # [2d+1, n]
    Z = torch.cat([context, torch.cat([query, torch.zeros(d + 1, dtype=torch.float64)])[:, None]], dim=1)
    M = torch.eye(n + 1, dtype=torch.float64)
    M[-1, -1] = 0
    act = torch.relu if model.cfg.activation == "relu" else (lambda t: t)
    for block in model.blocks_to(model.cfg.n_layers):
        P, Q = block.attn.P.detach(), block.attn.Q.detach()
        Z = Z + 1.0 / n * P @ Z @ M @ act(Z.T @ Q @ Z)
    return -Z[-1, -1]


def _their_scores(model, td, tasks, b):
    phi, mu = tasks.features[b].double(), tasks.mrp.mu_pi[b].double().numpy()
    values, grads = {}, {}
    for name, m in (("tf", model), ("td", td)):
        vs, gs = [], []
        for s in range(S):
            q = phi[s].clone().requires_grad_(True)
            v = _theirs(m, tasks, b, q)
            (g,) = torch.autograd.grad(v, q)
            vs.append(v.item())
            gs.append(g.numpy())
        values[name], grads[name] = np.array(vs), np.array(gs)
    X, Dm = phi.numpy(), np.diag(mu)
    w_tf = np.linalg.inv(X.T @ Dm @ X) @ X.T @ Dm @ values["tf"]
    cos = lambda a, c: a @ c / (np.linalg.norm(a) * np.linalg.norm(c))  # noqa: E731
    return {
        "IWS": cos(w_tf, grads["td"][0]),
        "SS": sum(mu[s] * cos(grads["tf"][s], grads["td"][s]) for s in range(S)),
        "VD": float(mu @ (values["tf"] - values["td"]) ** 2),
    }


def test_their_weight_readings_of_their_td0_construction_worked_by_hand():
    td = td0_model(_random_model(activation="identity"))
    r = weight_readings(td.blocks[0].attn.P, td.blocks[0].attn.Q, D)
    size = (2 * D + 1) ** 2
    assert vars(r) == pytest.approx(
        {
            "P_bottom_right": 1.0,
            "P_mean_abs_others": 0.0,
            "Q_upper_left_trace": -D,
            "Q_upper_right_trace": D,
            "Q_mean_abs_others": 2 * D / (size - 2 * D),
        },
        abs=1e-15,
    )


@pytest.mark.parametrize("activation", ["relu", "identity"])
def test_iws_ss_vd_equal_an_independent_loop_written_as_their_trainer_computes_them(activation):
    model, tasks = _random_model(activation, tied=activation == "relu"), _tasks()
    td = td0_model(model)
    with torch.no_grad():
        td.blocks[0].attn.P.mul_(0.7)  # their fitted step alpha = 0.7
    ours = function_readings(model, tasks, alpha=0.7, per_task=True)
    for b in range(len(tasks)):
        theirs = _their_scores(model, td, tasks, b)
        for name in ("IWS", "SS", "VD"):
            assert ours[name][b] == pytest.approx(theirs[name], abs=1e-10, rel=1e-10), (name, b)
    if activation == "identity":  # linear in the query: the gradient is the implicit weight
        assert ours["IWS"] == pytest.approx(ours["SS"], abs=1e-12)
    else:
        assert max(abs(a - c) for a, c in zip(ours["IWS"], ours["SS"])) > 1e-3


def test_the_td0_construction_scores_one_its_step_moves_vd_and_random_layers_score_near_zero():
    model, tasks = _random_model("identity"), _tasks(n_tasks=16)
    td = td0_model(model)
    exact = function_readings(td, tasks, per_task=True)
    assert exact["IWS"] == pytest.approx([1.0] * 16, abs=1e-12) and exact["VD"] == pytest.approx([0.0] * 16, abs=1e-20)
    scaled = function_readings(td, tasks, alpha=0.5, per_task=True)  # compared with TD at half its step
    assert min(scaled["VD"]) > 0 and min(scaled["IWS"]) < 1 - 1e-6  # two layers: a polynomial in the step
    one = td0_model(HookedLinearICTD(LinearICTDConfig(d_features=D, n_layers=1, gamma=0.9, dtype="float64")))
    assert function_readings(one, tasks, alpha=0.5, per_task=True)["IWS"] == pytest.approx([1.0] * 16, abs=1e-12)
    chance = random_layer_iws(td, tasks, draws=4)
    assert abs(chance.mean) < 0.3 and chance.lo < chance.mean < chance.hi and chance.n == 4 * 16
