"""The predecessor's linear model (docs/theory.md §13): its constructions equal their algorithms layer by
layer in float64 at 1e-10, against loops written independently of any transformer."""

import pytest
import torch

from ictd_interp.models.linear.model import HookedLinearICTD, linear_prompt
from ictd_interp.models.linear.td import (
    average_reward_layer,
    average_reward_prompt,
    average_reward_td,
    linear_model,
    residual_gradient,
    td0,
    td_lambda,
)
from ictd_interp.reference import preconditioned
from tests.conftest import make_tasks

TOL = 1e-10
D, N, L, GAMMA = 3, 12, 6, 0.9


def preconditioners(n_layers=L, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.eye(D, dtype=torch.float64) + 0.3 * torch.randn(D, D, generator=gen, dtype=torch.float64)
        for _ in range(n_layers)
    ]


def trajectories():
    return make_tasks(n_tasks=3, d=D, n=N, gamma=GAMMA)


def per_layer_values(model, prompt):
    """Every state's value after each layer, read off the residual stream (minus the last row)."""
    return [-model(prompt, stop_at_layer=l)[:, N:, -1] for l in range(1, model.cfg.n_layers + 1)]


@pytest.mark.parametrize("name", ["td0", "td_lambda", "residual_gradient"])
def test_each_construction_runs_its_algorithm_layer_by_layer(name):
    tasks, Cs = trajectories(), preconditioners()
    build = {
        "td0": lambda C: td0(D, C),
        "td_lambda": lambda C: td_lambda(D, 0.7, C),
        "residual_gradient": lambda C: residual_gradient(D, C),
    }[name]
    model = linear_model([build(C) for C in Cs], gamma=GAMMA)
    layers = per_layer_values(model, tasks.prompt)
    for b in range(tasks.prompt.shape[0]):
        x, r = tasks.x[b].double(), tasks.rewards[b].double()
        if name == "residual_gradient":
            w = preconditioned.residual_gradient(x, r, GAMMA, Cs)
        else:
            w = preconditioned.batch_td(x, r, GAMMA, Cs, lam=0.7 if name == "td_lambda" else 0.0)
        for l in range(L):
            expected = x @ w[l]  # every state of the trajectory, the query S_n last
            assert torch.allclose(layers[l][b], expected, atol=TOL, rtol=0), (name, b, l)
    assert layers[-1].abs().max() > 0.1  # not a trivial zero


def test_average_reward_td_layer_by_layer():
    tasks, Cs = trajectories(), preconditioners()
    Z = average_reward_prompt(tasks.prompt)
    for l, C in enumerate(Cs):
        Z = average_reward_layer(Z, average_reward_td(D, C))
        for b in range(Z.shape[0]):
            w = preconditioned.average_reward_td(tasks.x[b], tasks.rewards[b], Cs[: l + 1])
            assert Z[b, -1, -1].item() == pytest.approx((tasks.x[b, -1].double() @ w[l]).item(), abs=TOL)


def test_the_reference_loops_are_the_textbook_updates_on_a_case_worked_by_hand():
    # d = 1, phi = (1, 2, 1), r = (1, 0), gamma = 0.5, C = 1: delta_0 = 1, delta_1 = 0 at w = 0, so
    # u = 1 * 1 + 0 = 1 and w_1 = u / n = 0.5; TD(1): e_1 = 1 + 2 = 3, same u (delta_1 = 0) -> 0.5.
    x, r, C = torch.tensor([[1.0], [2.0], [1.0]]), torch.tensor([1.0, 0.0]), [torch.eye(1)]
    assert preconditioned.batch_td(x, r, 0.5, C)[0].item() == 0.5
    # second step from w = 0.5: delta_0 = 1 + 0.5*0.5*2 - 0.5 = 1, delta_1 = 0 + 0.25 - 1 = -0.75,
    # u = 1*1 + (-0.75)*2 = -0.5 -> w_2 = 0.5 - 0.25 = 0.25; TD(1): u = 1*1 + (-0.75)*3 = -1.25 -> -0.125
    assert preconditioned.batch_td(x, r, 0.5, C * 2)[1].item() == 0.25
    assert preconditioned.batch_td(x, r, 0.5, C * 2, lam=1.0)[1].item() == -0.125
    # residual gradient, first step: u = 1*(1 - 0.5*2) + 0 = 0 -> w stays 0
    assert preconditioned.residual_gradient(x, r, 0.5, C)[0].item() == 0.0
    # average reward: rbar = (1, 0.5); delta_0 = 1 - 1 = 0, delta_1 = 0 - 0.5 = -0.5; u = -0.5*2 = -1 -> -0.5
    assert preconditioned.average_reward_td(x, r, C)[0].item() == -0.5


def test_the_prompt_is_the_predecessors_and_queries_do_not_interact():
    tasks = trajectories()
    Z = linear_prompt(tasks.prompt, GAMMA)
    x, r = tasks.x.double(), tasks.rewards.double()
    assert Z.shape == (3, 2 * N + 1, 2 * D + 1)
    assert torch.equal(Z[:, :N, :D], x[:, :-1]) and torch.allclose(Z[:, :N, D : 2 * D], GAMMA * x[:, 1:])
    assert torch.equal(Z[:, :N, -1], r) and torch.equal(Z[:, N:, :D], x) and (Z[:, N:, D:] == 0).all()
    model = HookedLinearICTD(
        {"d_features": D, "n_layers": 2, "tied": False, "activation": "relu", "dtype": "float64", "init_gain": 3.0}
    )
    every, alone = model(tasks.prompt), model.fast_values(tasks.prompt, query_only=True)
    assert torch.allclose(every[:, -1], alone, atol=1e-13, rtol=0)  # the last query column is the predecessor's query
    assert torch.allclose(model.fast_values(tasks.prompt), every, atol=0, rtol=0)


def test_hook_names_are_hooked_transformers_and_the_cache_holds_the_scores():
    tasks = trajectories()
    model = linear_model([td0(D)] * 2, gamma=GAMMA)
    _, cache = model.run_with_cache(tasks.prompt)
    per_block = [
        "hook_resid_pre",
        "attn.hook_q",
        "attn.hook_k",
        "attn.hook_v",
        "attn.hook_attn_scores",
        "attn.hook_pattern",
        "attn.hook_z",
        "attn.hook_result",
        "hook_attn_out",
        "hook_resid_post",
    ]
    assert set(model.hook_dict) == {"hook_embed"} | {f"blocks.{l}.{h}" for l in range(2) for h in per_block}
    Z = cache["hook_embed"]
    scores = cache["attn_scores", 0][:, 0]
    Q = model.blocks[0].attn.Q
    assert torch.allclose(scores, Z @ Q.T @ Z.transpose(1, 2), atol=1e-12, rtol=0)  # scores[j, i] = z_i^T Q z_j
    assert torch.allclose(scores[:, 2, 5], ((Z[:, 5] @ Q) * Z[:, 2]).sum(-1), atol=1e-12, rtol=0)
    assert (cache["pattern", 0][..., N:] == 0).all()  # queries are never sources


# --- where a linear model sits in the predecessor's family ----------------------------------------------------


def test_identification_reads_each_construction_back():
    from ictd_interp.analyses.metrics.linear_family import closest_member, member_weights

    C = torch.tensor([[2.0, 0.5, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]], dtype=torch.float64)
    row = closest_member(td0(D, C).P, td0(D, C).Q, D, GAMMA)
    assert row.cos_P_td0 == pytest.approx(1.0) and row.kappa == pytest.approx(1.0) and row.rg_share == 0.0
    assert row.step == pytest.approx(2.0) and row.effective_discount == pytest.approx(GAMMA)
    assert row.P_explained == pytest.approx(1.0) and row.Q_explained == pytest.approx(1.0) and row.in_family
    # C - 2I = 0.5 e_0 e_1^T: ||C - step I|| / ||C|| = 0.5 / sqrt(12.25)
    assert row.preconditioner_off_identity == pytest.approx(0.5 / 12.25**0.5)
    rg = residual_gradient(D)
    assert closest_member(rg.P, rg.Q, D, GAMMA).rg_share == pytest.approx(1.0)
    flipped = closest_member(-td0(D, C).P, -td0(D, C).Q, D, GAMMA)  # the same layer: (P, Q) -> (-P, -Q)
    assert flipped.cos_Q_td0 == pytest.approx(closest_member(td0(D, C).P, td0(D, C).Q, D, GAMMA).cos_Q_td0)
    assert flipped.step == pytest.approx(2.0) and flipped.in_family
    # a member with half the discount and step 0.3: read back exactly
    member = member_weights(0.3, torch.eye(D, dtype=torch.float64), 0.5, 0.0, D)
    row = closest_member(member.P, member.Q, D, GAMMA)
    assert row.step == pytest.approx(0.3) and row.effective_discount == pytest.approx(0.45)
    assert row.cos_Q_td0 < 1.0
    noisy = closest_member(td0(D).P + 0.5, td0(D).Q, D, GAMMA)  # P spread over every entry: out of the family
    assert not noisy.in_family and noisy.P_explained == pytest.approx(
        2.25 / (2.25 + 48 * 0.25)
    )  # 1.5^2 of 1.5^2 + 48 * 0.5^2


def test_the_iteration_radius_on_a_context_worked_by_hand():
    from ictd_interp.analyses.metrics.linear_family import closest_member, iteration_radius
    from ictd_interp.tasks.sampling import TaskBatch

    # d = 1, phi = (1, 1, 1): A = sum_i (1 - 0)(1 - gamma) = 2 (1 - gamma) = 0.2; G = 1 - p C A / n = 1 - 0.1 p
    tasks = make_tasks(n_tasks=1, d=1, n=2)
    tasks = TaskBatch(tasks.mrp, torch.ones_like(tasks.features), tasks.states)
    c = td0(1)
    row = closest_member(3.0 * c.P, c.Q, 1, GAMMA)
    assert iteration_radius(row, 3.0 * c.P, c.Q, tasks, GAMMA).item() == pytest.approx(0.7)
    assert iteration_radius(row, 30.0 * c.P, c.Q, tasks, GAMMA).item() == pytest.approx(2.0)  # |1 - 3| diverges


def test_transformer_lens_reads_the_shipped_linear_model():
    """``from_pretrained`` by name, the QK/OV circuits are Qᵀ and Pᵀ, and TransformerLens's residual decomposition
    of the cache sums to the last residual stream."""
    model = HookedLinearICTD.from_pretrained("linear-quick-s0", dtype="float64")
    attn = model.blocks[0].attn
    assert torch.equal(model.QK.AB[0, 0], attn.Q.T) and torch.equal(model.OV.AB[0, 0], attn.P.T)
    _, cache = model.run_with_cache(make_tasks(n_tasks=2, d=4, n=N, gamma=0.9).prompt)
    parts, labels = cache.decompose_resid(return_labels=True)
    assert labels == ["embed", "0_attn_out", "1_attn_out", "2_attn_out"]
    assert torch.allclose(parts.sum(0), cache["blocks.2.hook_resid_post"], atol=1e-12, rtol=0)


def test_readings_of_a_linear_layer_do_not_depend_on_its_sign_convention():
    """(P, Q) -> (-P, -Q) leaves an identity-activation layer unchanged: its kernel correlation and TD(0)
    cosines must not move; a ReLU layer is changed by the flip and read as it is."""
    from ictd_interp.analyses.metrics.heads import head_kernels
    from ictd_interp.analyses.metrics.linear_family import identify
    from ictd_interp.models.linear.td import linear_model, td0

    model = linear_model([td0(D)] * 2, gamma=GAMMA)
    flipped = linear_model([td0(D)] * 2, gamma=GAMMA)
    with torch.no_grad():
        for a in flipped.unique_attention():
            a.P.neg_(), a.Q.neg_()
    tasks = make_tasks(n_tasks=8, n_states=6, d=D, n=N)
    with torch.no_grad():
        assert torch.allclose(model(tasks.prompt.double()), flipped(tasks.prompt.double()), atol=1e-12)
    same = [r.td_kernel_correlation for r in head_kernels(model, tasks)]
    assert same == pytest.approx([r.td_kernel_correlation for r in head_kernels(flipped, tasks)], abs=1e-12)
    assert identify(model)[0].cos_P_td0 == pytest.approx(identify(flipped)[0].cos_P_td0, abs=1e-12)


def test_a_near_untrained_layer_is_neutral_within_the_stated_tolerance_not_converging():
    from ictd_interp.analyses.metrics.linear_family import NEUTRAL_MOVEMENT, convergence, identify
    from ictd_interp.config import LinearICTDConfig

    model = HookedLinearICTD(LinearICTDConfig(d_features=4, n_layers=3, gamma=0.9, dtype="float64"))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a layer at its initialisation scale: radius 1 +- 1e-3 on every context
        model.blocks[0].attn.P.copy_(1e-3 * torch.randn(9, 9, generator=gen, dtype=torch.float64))
        model.blocks[0].attn.Q.copy_(1e-3 * torch.randn(9, 9, generator=gen, dtype=torch.float64))
    tasks = make_tasks(n_tasks=32, d=4, n=N, gamma=0.9)
    result = convergence(model, identify(model), tasks)
    assert abs(result.median_radius - 1) < 1e-2
    assert result.neutral == 32 and result.converging == 0 and result.neutral_tolerance == NEUTRAL_MOVEMENT
    td = linear_model([td0(4)] * 3, gamma=0.9)  # TD(0) acts: slow contractions (radius near 1) still converge
    exact = convergence(td, identify(td), tasks)
    assert exact.neutral == 0 and exact.converging == 32
