import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ictd_interp import MRP, boyan_chain, boyan_chains, make_features, sample_trajectories
from ictd_interp.tasks.mrp import closed_class_count, communicating_classes
from ictd_interp.tasks.trajectory import trajectories_from_uniforms


def two_state(**kw):
    args = dict(P=[[0.5, 0.5], [1.0, 0.0]], r=[1.0, -1.0], mu0=[1.0, 0.0], gamma=0.5)
    return MRP(**{**args, **kw})


def test_two_state_values_by_hand():
    # v0 = 1 + .5 (.5 v0 + .5 v1), v1 = -1 + .5 v0  =>  v0 = .75 + .375 v0  =>  v0 = 1.2, v1 = -.4
    mrp = two_state()
    assert mrp.v_pi.tolist() == pytest.approx([1.2, -0.4], abs=1e-12)
    # stationary: mu0 = .5 mu0 + mu1, mu1 = .5 mu0 => mu = (2/3, 1/3)
    assert mrp.mu_pi.tolist() == pytest.approx([2 / 3, 1 / 3], abs=1e-12)


@pytest.mark.parametrize(
    "field, kwargs",
    [
        ("P", {"P": [[0.5, 0.4], [1.0, 0.0]]}),
        ("P", {"P": [[1.5, -0.5], [1.0, 0.0]]}),
        ("P", {"P": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]}),
        ("P", {"P": [[float("nan"), 1.0], [1.0, 0.0]]}),
        ("r", {"r": [1.0, 2.0, 3.0]}),
        ("mu0", {"mu0": [0.7, 0.7]}),
        ("gamma", {"gamma": 1.0}),
        ("gamma", {"gamma": -0.1}),
    ],
)
def test_validation_names_the_field(field, kwargs):
    with pytest.raises(ValueError, match=f"^{field}:"):
        two_state(**kwargs)


def test_rows_within_tolerance_accepted():
    two_state(P=[[0.5 + 1e-10, 0.5 - 1e-10], [1.0, 0.0]])


@settings(max_examples=30, deadline=None)
@given(s=st.integers(2, 15), seed=st.integers(0, 2**31 - 1), gamma=st.floats(0.0, 0.99))
def test_boyan_structure(s, seed, gamma):
    mrp = boyan_chain(s, gamma, seed=seed)
    P = mrp.P
    assert torch.allclose(P.sum(-1), torch.ones(s, dtype=P.dtype), atol=1e-12)
    for i in range(s - 2):
        nonzero = set(torch.nonzero(P[i]).flatten().tolist())
        assert nonzero == {i + 1, i + 2}
        assert 0.01 <= P[i, i + 1] <= 0.99
    assert P[s - 2, s - 1] == 1.0
    assert (P[s - 1] > 0).all()
    assert (mrp.r.abs() <= 1).all() and (mrp.mu0 > 0).all()
    bellman = mrp.r + gamma * P @ mrp.v_pi
    assert torch.allclose(bellman, mrp.v_pi, atol=1e-9)
    assert torch.allclose(mrp.mu_pi @ P, mrp.mu_pi, atol=1e-10)
    MRP(P, mrp.r, mrp.mu0, gamma)  # built unchecked (MRP.generated), it passes every check


def test_generated_chains_still_check_gamma():
    with pytest.raises(ValueError, match="gamma"):
        boyan_chains(2, 4, 1.0, torch.Generator().manual_seed(0))


def test_boyan_single_equals_batched_draw():
    one = boyan_chain(7, seed=3)
    batch = boyan_chains(1, 7, 0.9, torch.Generator().manual_seed(3))
    assert torch.equal(one.P, batch.P[0]) and torch.equal(one.r, batch.r[0])


def test_representable_reward_puts_v_in_feature_span():
    X = make_features(8, 3, generator=torch.Generator().manual_seed(1))
    mrp = boyan_chain(8, 0.9, seed=1, representable=True, features=X)
    w, *_ = torch.linalg.lstsq(X, mrp.v_pi.unsqueeze(-1))
    assert torch.allclose(X @ w.squeeze(-1), mrp.v_pi, atol=1e-9)
    with pytest.raises(ValueError, match="features"):
        boyan_chain(8, representable=True)


def test_features():
    X = make_features(4, 6, "onehot", scale=2.5)
    assert torch.equal(X, 2.5 * torch.eye(4, 6, dtype=torch.float64))
    U = make_features(5, 3, scale=2.0, generator=torch.Generator().manual_seed(0), batch=7)
    assert U.shape == (7, 5, 3) and U.abs().max() <= 2.0
    with pytest.raises(ValueError, match="d >= n_states"):
        make_features(5, 3, "onehot")
    with pytest.raises(ValueError, match="kind"):
        make_features(5, 3, "gaussian")


def test_trajectories_follow_P_exactly_and_are_seeded():
    mrp = MRP(P=[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], r=[0, 0, 0], mu0=[0, 1, 0], gamma=0.9)
    traj = sample_trajectories(mrp, 7, batch=3, seed=0)
    assert traj.tolist() == [[1, 2, 0, 1, 2, 0, 1, 2]] * 3
    mrp = boyan_chains(5, 6, 0.9, torch.Generator().manual_seed(0))
    a = sample_trajectories(mrp, 40, seed=11)
    assert torch.equal(a, sample_trajectories(mrp, 40, seed=11)) and a.shape == (5, 41)
    for b in range(5):  # every transition has positive probability under its own task
        assert (mrp.P[b, a[b, :-1], a[b, 1:]] > 0).all()


def test_trajectories_are_the_inverse_cdf_walk_of_their_draws():
    """Reference: one uniform for S_0 per trajectory, then one per step, each mapped through the current
    state's cumulative row (first state whose cumulative probability exceeds it); zero-probability states
    are never entered, and a row summing to just under 1 ends at its last state."""
    P = [[0.0, 0.5, 0.0, 0.5], [0.3, 0.0, 0.7 - 1e-10, 0.0], [0.0, 0.0, 0.0, 1.0], [0.25, 0.25, 0.25, 0.25]]
    mrp = MRP(P=P, r=[0, 0, 0, 0], mu0=[0.1, 0.0, 0.6, 0.3], gamma=0.9)
    for m, batch in ((mrp, 6), (boyan_chains(5, 7, 0.9, torch.Generator().manual_seed(2)), None)):
        traj = sample_trajectories(m, 25, batch=batch, generator=torch.Generator().manual_seed(9))
        gen = torch.Generator().manual_seed(9)
        tasks = traj.shape[0]
        u0, u = (
            torch.rand(tasks, 1, generator=gen, dtype=torch.float64),
            torch.rand(tasks, 25, generator=gen, dtype=torch.float64),
        )
        Pb = m.P.expand(tasks, -1, -1)
        mu0 = m.mu0.expand(tasks, -1)
        first = lambda cdf, x: min(int((cdf <= x).sum()), cdf.shape[0] - 1)  # noqa: E731
        for b in range(tasks):
            s = [first(mu0[b].cumsum(0), u0[b, 0])]
            for t in range(25):
                s.append(first(Pb[b, s[-1]].cumsum(0), u[b, t]))
            assert traj[b].tolist() == s
    assert traj.dtype == torch.int64 and traj.is_contiguous()


def test_the_walk_on_chosen_draws_worked_out_by_hand():
    """Draws placed on the edges of the cumulative rows: a draw equal to a cumulative value moves past it
    (and past the zero-probability state after it); a draw above a row summing to just under 1 stays at
    the last state; two tasks walk independently."""
    P = torch.tensor(
        [[[0.0, 0.5, 0.0, 0.5], [0.3, 0.0, 0.7 - 1e-10, 0.0], [0.0, 0.0, 0.0, 1.0], [0.25] * 4]] * 2,
        dtype=torch.float64,
    )
    mu0 = torch.tensor([[0.1, 0.0, 0.6, 0.3]] * 2, dtype=torch.float64)
    # cumulative rows: 0 -> [0, .5, .5, 1], 1 -> [.3, .3, 1 - 1e-10, 1 - 1e-10], 2 -> [0, 0, 0, 1], 3 -> [.25, .5, .75,
    # 1]
    u0 = torch.tensor([[0.1], [0.05]], dtype=torch.float64)  # 0.1 >= mu0's 0.1: past state 0 and the empty 1 -> 2
    u = torch.tensor(
        [
            [0.2, 0.5, 0.3, 0.9999999999, 0.0],  # 2 -> 3 -> 2 -> 3 -> 3 -> 0
            [0.5, 0.3, 0.99999999995, 0.25, 0.0],
        ],
        dtype=torch.float64,
    )  # 0 -> 3 -> 1 -> 3 -> 1 -> 0
    traj = trajectories_from_uniforms(P, mu0, u0, u)
    assert traj.tolist() == [[2, 3, 2, 3, 3, 0], [0, 3, 1, 3, 1, 0]]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_walk_equals_the_reference_on_sparse_rows_of_many_states(dtype):
    """40 states, most transitions impossible, in both precisions: each state is the count of the current
    cumulative row's entries <= the step's draw, at most the last state (the reference above, per task)."""
    g = torch.Generator().manual_seed(3)
    P = torch.rand(5, 40, 40, generator=g, dtype=torch.float64) * (torch.rand(5, 40, 40, generator=g) < 0.1)
    P[..., 7] += 1e-3
    P = (P / P.sum(-1, keepdim=True)).to(dtype)
    mu0 = torch.full((5, 40), 1 / 40, dtype=dtype)
    u0, u = torch.rand(5, 1, generator=g, dtype=dtype), torch.rand(5, 60, generator=g, dtype=dtype)
    traj = trajectories_from_uniforms(P, mu0, u0, u)
    first = lambda cdf, x: min(int((cdf <= x).sum()), cdf.shape[0] - 1)  # noqa: E731
    for b in range(5):
        s = [first(mu0[b].cumsum(0), u0[b, 0])]
        for t in range(60):
            s.append(first(P[b, s[-1]].cumsum(0), u[b, t]))
        assert traj[b].tolist() == s
    assert len(set(traj.flatten().tolist())) > 10  # the walk went around


def test_trajectory_transition_frequencies_match_P():
    mrp = MRP(P=[[0.2, 0.8], [0.6, 0.4]], r=[0, 0], mu0=[0.5, 0.5], gamma=0.5)
    traj = sample_trajectories(mrp, 2000, batch=20, seed=0)
    src, dst = traj[:, :-1].flatten(), traj[:, 1:].flatten()
    for s in range(2):
        freq = (dst[src == s] == 1).double().mean().item()
        assert freq == pytest.approx(mrp.P[s, 1].item(), abs=0.02)


def _chain(edges: dict[int, dict[int, float]], s: int) -> torch.Tensor:
    P = torch.zeros(s, s, dtype=torch.float64)
    for i, row in edges.items():
        for j, p in row.items():
            P[i, j] = p
    return P


def test_communicating_classes_are_read_from_the_transition_graph():
    # worked by hand: {0, 1} swap forever (closed), 2 is absorbing (closed), 3 leaves for 0 or 2 (transient)
    P = _chain({0: {1: 1.0}, 1: {0: 1.0}, 2: {2: 1.0}, 3: {0: 0.5, 2: 0.5}}, 4)
    assert communicating_classes(P) == ([[0, 1], [2]], [3])
    assert closed_class_count(torch.stack([P, P])).tolist() == [2, 2]
    mrp = MRP(P, torch.zeros(4), torch.full((4,), 0.25), 0.9)
    assert not bool(mrp.has_unique_stationary)
    with pytest.raises(
        ValueError,
        match=r"not unique: 2 closed communicating classes \(\[0, 1\]; \[2\]\), "
        r"absorbing states \[2\], 1 transient",
    ):
        _ = mrp.mu_pi
    assert torch.allclose(mrp.v_pi, torch.zeros(4, dtype=torch.float64))  # v_pi stays unique for gamma < 1


def test_one_closed_class_with_transient_states_has_a_unique_stationary_distribution():
    # 2 -> 0 once, then 0 <-> 1 with probabilities 0.3 / 0.7: mu_pi = (0.7, 0.3, 0) / ... worked by hand:
    # mu_0 = 0.7 mu_0 + 1.0 mu_1 ... with P[0] = (0.7, 0.3, 0), P[1] = (1, 0, 0): mu = (1/1.3, 0.3/1.3, 0)
    P = _chain({0: {0: 0.7, 1: 0.3}, 1: {0: 1.0}, 2: {0: 1.0}}, 3)
    mrp = MRP(P, torch.zeros(3), torch.tensor([0.0, 0.0, 1.0]), 0.5)
    assert communicating_classes(P) == ([[0, 1]], [2])
    assert torch.allclose(mrp.mu_pi, torch.tensor([1 / 1.3, 0.3 / 1.3, 0.0], dtype=torch.float64), atol=1e-12)


def test_every_boyan_chain_is_one_closed_class():
    chains = boyan_chains(64, 10, seed=0)
    assert bool(chains.has_unique_stationary.all())
    assert closed_class_count(chains.P).unique().tolist() == [1]
