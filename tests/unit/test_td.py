import math

import pytest
import torch

from ictd_interp import linear_td, softmax_td, tabular_td, td_errors

E = math.e


def onehot(states, s, scale=1.0):
    return scale * torch.eye(s, dtype=torch.float64)[torch.tensor(states)].unsqueeze(0)


def test_softmax_one_step_by_hand():
    x = torch.tensor([[[1.0], [0.0], [1.0]]], dtype=torch.float64)
    rewards = torch.tensor([[1.0, -1.0]], dtype=torch.float64)
    v = softmax_td(x, rewards, 0.9, 1)
    # target x=1 weighs sources (e, 1)/(e+1); target x=0 weighs them equally; deltas are (1, -1)
    expected = [(E - 1) / (E + 1), 0.0, (E - 1) / (E + 1)]
    assert v[0, 0].tolist() == [0.0, 0.0, 0.0]
    assert v[0, 1].tolist() == pytest.approx(expected, abs=1e-15)


def test_tabular_two_steps_by_hand():
    gamma = 0.9
    x, rewards = onehot([0, 1, 0], 2), torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    v = tabular_td(x, rewards, gamma, 2)
    assert v[0, 1].tolist() == pytest.approx([1.0, 2.0, 1.0], abs=1e-15)
    # deltas at t=1: 1 + g*2 - 1 = 2g and 2 + g*1 - 2 = g
    assert v[0, 2].tolist() == pytest.approx([1 + 2 * gamma, 2 + gamma, 1 + 2 * gamma], abs=1e-15)


def test_tabular_unvisited_source_state_takes_plain_mean():
    x, rewards = onehot([0, 1, 2], 3), torch.tensor([[1.0, 3.0]], dtype=torch.float64)
    v = tabular_td(x, rewards, 0.5, 1)
    assert v[0, 1].tolist() == pytest.approx([1.0, 3.0, 2.0], abs=1e-15)


def test_large_scale_softmax_is_tabular_and_stable():
    g = torch.Generator().manual_seed(0)
    states = torch.randint(0, 5, (3, 21), generator=g)
    x = torch.eye(5, dtype=torch.float64)[states]
    rewards = torch.randn(3, 20, generator=g, dtype=torch.float64)
    big = softmax_td(x * math.sqrt(1000.0), rewards, 0.9, 8)  # scores of 1e3
    assert torch.isfinite(big).all()
    assert torch.allclose(big, tabular_td(x, rewards, 0.9, 8), atol=1e-12)
    assert not torch.allclose(softmax_td(x, rewards, 0.9, 8), tabular_td(x, rewards, 0.9, 8), atol=1e-3)


def test_linear_td_matches_weight_space_iteration():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 11, 3, generator=g, dtype=torch.float64)
    rewards = torch.randn(2, 10, generator=g, dtype=torch.float64)
    gamma, alpha, n = 0.8, 0.7, 10
    w = torch.zeros(2, 3, dtype=torch.float64)
    for _ in range(5):
        v = torch.einsum("bjd,bd->bj", x, w)
        delta = rewards + gamma * v[:, 1:] - v[:, :-1]
        w = w + alpha / n * torch.einsum("bk,bkd->bd", delta, x[:, :-1])
    ref = torch.einsum("bjd,bd->bj", x, w)
    assert torch.allclose(linear_td(x, rewards, gamma, 5, alpha)[:, -1], ref, atol=1e-13)


def test_td_errors():
    v = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    r = torch.tensor([[0.5, -1.0]], dtype=torch.float64)
    assert td_errors(v, r, 0.5).tolist() == [[0.5 + 1.0 - 1.0, -1.0 + 1.5 - 2.0]]


@pytest.mark.parametrize(
    "bad", [dict(gamma=1.0), dict(n_iters=-1), dict(rewards=torch.zeros(1, 3, dtype=torch.float64))]
)
def test_bad_inputs_raise(bad):
    args = dict(
        x=torch.zeros(1, 3, 2, dtype=torch.float64),
        rewards=torch.zeros(1, 2, dtype=torch.float64),
        gamma=0.9,
        n_iters=1,
    )
    with pytest.raises(ValueError):
        softmax_td(**{**args, **bad})
