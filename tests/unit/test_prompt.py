import pytest
import torch

from ictd_interp import PromptLayout, build_prompt, context_inputs, make_features, sample_trajectories
from ictd_interp.tasks.mrp import boyan_chains


def test_prompt_layout_matches_spec_rows():
    x = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]], dtype=torch.float64)
    rewards = torch.tensor([[0.5, -0.5]], dtype=torch.float64)
    z = build_prompt(x, rewards)
    lay = PromptLayout(2)
    assert (lay.reward, lay.target, lay.current, lay.d_model) == (2, 3, 4, 5)
    assert z[0].tolist() == [[1, 2, 0.5, 0, 0], [3, 4, -0.5, 0, 0], [5, 6, 0, 0, 0]]


@pytest.mark.parametrize(
    "x, rewards, match",
    [
        (torch.zeros(2, 4), torch.zeros(2, 3), "x: expected"),
        (torch.zeros(2, 4, 3), torch.zeros(2, 4), "rewards: expected shape"),
        (torch.full((1, 3, 2), float("nan")), torch.zeros(1, 2), "NaN"),
    ],
)
def test_bad_prompt_inputs(x, rewards, match):
    with pytest.raises(ValueError, match=match):
        build_prompt(x, rewards)


def test_context_inputs_shared_or_batched_features():
    mrp = boyan_chains(3, 5, 0.9, seed=0)
    states = sample_trajectories(mrp, 6, seed=0)
    shared = make_features(5, 3, scale=2.0, generator=torch.Generator().manual_seed(0))
    x, rewards = context_inputs(shared, mrp.r, states)
    assert torch.equal(x[1, 4], shared[states[1, 4]])
    assert torch.equal(rewards[2], mrp.r[2, states[2, :-1]])
    x_b, _ = context_inputs(shared.expand(3, -1, -1), mrp.r, states)
    assert torch.equal(x, x_b)
