"""Each intervention's causal effect on a case worked out by hand (theta*, float64)."""

import math

import pytest
import torch

from ictd_interp import hooks, softmax_td, tabular_td, td_errors
from ictd_interp.analyses.figures.circuits import patching_heatmap
from ictd_interp.reference.td import softmax_kernel
from ictd_interp.tasks.sampling import sample_tasks
from tests.conftest import make_star, make_tasks

TOL = 1e-12


@pytest.mark.parametrize("form", ["tsm", "dual"])
def test_ablating_the_target_path_removes_bootstrapping(form):
    tasks, L = make_tasks(n=15), 4
    model = make_star(form=form, n_layers=L)
    with model.hooks(fwd_hooks=hooks.ablate_target_path(model)):
        _, cache = model.run_with_cache(tasks.prompt)
    K = softmax_kernel(tasks.x)
    v = torch.zeros(tasks.x.shape[:2], dtype=torch.float64)
    ref = softmax_td(tasks.x, tasks.rewards, 0.9, L)
    for layer in range(L):
        v = v + torch.einsum("bk,bkj->bj", tasks.rewards - v[:, :-1], K)  # v <- v + K (R - v)
        got = cache["resid_post", layer][..., model.layout.current]
        assert (got - v).abs().max() < TOL
        if layer == 0:
            assert (got - ref[:, 1]).abs().max() < TOL
        else:
            assert (got - ref[:, layer + 1]).abs().max() > 1e-3
    assert not any(h.fwd_hooks for h in model.hook_dict.values())


def test_theta_star_pattern_is_an_identity_intervention():
    tasks = make_tasks()
    model = make_star(n_layers=3)
    patched = model.run_with_hooks(tasks.prompt, fwd_hooks=hooks.theta_star_pattern_hooks(model, tasks.prompt))
    assert (patched - model(tasks.prompt)).abs().max() < 1e-15


def test_tabular_pattern_reproduces_tabular_td():
    tasks = sample_tasks(4, 6, 6, 25, 0.9, feature_kind="onehot", feature_scale=1.0, seed=2)
    model = make_star(d_features=6, n_layers=5)
    fwd = hooks.pattern_hooks(hooks.tabular_pattern(tasks.states), range(5))
    got = model.run_with_hooks(tasks.prompt, fwd_hooks=fwd)
    assert (got - tabular_td(tasks.x, tasks.rewards, 0.9, 5)[:, -1]).abs().max() < TOL


def test_uniform_pattern_moves_every_position_by_the_mean_td_error():
    tasks = make_tasks(n=10)
    model = make_star(n_layers=1)
    got = model.run_with_hooks(tasks.prompt, fwd_hooks=hooks.pattern_hooks(hooks.uniform_pattern(11), [0]))
    expected = tasks.rewards.mean(-1, keepdim=True).expand(-1, 11)  # v_0 = 0, so delta = R
    assert (got - expected).abs().max() < TOL


def test_td_errors_read_from_hook_v_equal_the_reference():
    tasks = make_tasks(n=20)
    model = make_star(n_layers=4)
    read = hooks.read_td_errors(model, tasks.prompt)
    iterates = softmax_td(tasks.x, tasks.rewards, 0.9, 4)
    for layer in range(4):
        assert (read[layer] - td_errors(iterates[:, layer], tasks.rewards, 0.9)).abs().max() < TOL


def test_scaling_the_update_is_the_td_step_size():
    tasks = make_tasks()
    model = make_star(n_layers=3)
    got = model.run_with_hooks(tasks.prompt, fwd_hooks=hooks.scale_update_hooks(0.5, range(3)))
    assert (got - softmax_td(tasks.x, tasks.rewards, 0.9, 3, alpha=0.5)[:, -1]).abs().max() < TOL


def test_temperature_is_the_feature_scale():
    tasks = make_tasks()
    model = make_star(n_layers=3)
    got = model.run_with_hooks(tasks.prompt, fwd_hooks=hooks.temperature_hooks(0.5, range(3)))
    ref = softmax_td(tasks.x * math.sqrt(2.0), tasks.rewards, 0.9, 3)  # scores / 0.5 = <sqrt2 x, sqrt2 x'>
    assert (got - ref[:, -1]).abs().max() < TOL
    with pytest.raises(ValueError, match="tau"):
        hooks.temperature(0.0)


def test_flipping_the_target_sign_breaks_convergence():
    tasks = sample_tasks(8, 6, 6, 200, 0.9, feature_kind="onehot", feature_scale=3.0, seed=0)
    model = make_star(d_features=6, n_layers=24)
    errors = {}
    for name, fwd in (("theta*", []), ("flipped", hooks.flip_weight_hooks(model, "target"))):
        with model.hooks(fwd_hooks=fwd):
            _, cache = model.run_with_cache(tasks.prompt)
        errors[name] = [
            (cache["resid_post", l][..., -1] - tasks.v_true).abs().amax(-1).mean().item() for l in (0, 15, 23)
        ]
    # theta*: 1.42 -> 0.25 by depth 24. Flipped: R - gamma v' - v has the wrong fixed point
    # (I + gamma P)^-1 r, so the error rises above its depth-1 value and stays there (1.42 -> 1.91).
    assert errors["theta*"][0] > errors["theta*"][1] > errors["theta*"][2]
    assert errors["flipped"][0] < min(errors["flipped"][1:])
    assert errors["flipped"][2] > 5 * errors["theta*"][2]
    # flipping the target weight by hand in V gives the same model
    flipped = make_star(d_features=6, n_layers=24)
    with torch.no_grad():
        for block in flipped.blocks:
            block.attn.V[0, -1, -2] *= -1
    with model.hooks(fwd_hooks=hooks.flip_weight_hooks(model, "target")):
        assert (model(tasks.prompt) - flipped(tasks.prompt)).abs().max() < 1e-9


def test_zero_and_mean_ablation_of_heads():
    tasks = make_tasks()
    dual = make_star(form="dual", n_layers=2)
    out = dual.run_with_hooks(tasks.prompt, fwd_hooks=hooks.ablate_heads(range(2), head=0))
    assert (out == 0).all()  # without the current-value head nothing writes the value row
    mean_out = dual.run_with_hooks(tasks.prompt, fwd_hooks=hooks.ablate_heads([0], head=0, mean=True))
    _, cache = dual.run_with_cache(tasks.prompt)
    expected_row0 = cache["result", 0][:, :, 0].mean(0)[..., dual.layout.current]
    with dual.hooks(fwd_hooks=hooks.ablate_heads([0], head=0, mean=True)):
        _, patched = dual.run_with_cache(tasks.prompt)
    assert torch.allclose(patched["resid_post", 0][..., dual.layout.current], expected_row0.expand(4, -1), atol=TOL)
    assert mean_out.shape == (4, 13)


def test_patching_the_clean_reward_row_restores_the_clean_output():
    clean_tasks = make_tasks(n=10)
    clean = clean_tasks.prompt
    corrupted = clean.clone()
    reward_row = 3  # d_features = 3
    corrupted[:, [2, 5], reward_row] += 1.0
    model = make_star(n_layers=3)
    table = hooks.activation_patching(
        model, clean, corrupted, hook_names=["hook_prompt"], positions=[2, 5], rows=[reward_row]
    )
    assert table.shape[0] == 2
    both = model.run_with_hooks(
        corrupted,
        fwd_hooks=[
            (
                "hook_prompt",
                lambda act, hook: torch.where(
                    torch.isin(torch.arange(11), torch.tensor([2, 5]))[None, :, None] & (torch.arange(6) == reward_row),
                    clean,
                    act,
                ),
            )
        ],
    )
    assert torch.equal(both, model(clean))
    single = table.set_index("position")["recovered"]
    assert 0 < single[2] < 1 and 0 < single[5] < 1 and abs(single[2] + single[5] - 1) < 0.3
    full = hooks.activation_patching(model, clean, corrupted, hook_names=["blocks.1.hook_resid_pre"])
    assert set(full.columns) == {"hook", "layer", "position", "role", "value", "recovered"}
    assert full["layer"].eq(1).all() and len(full) == 11
    fig = patching_heatmap(full)
    assert fig.axes[0].get_xlabel() == "position patched"


def test_patching_a_corruption_that_changes_nothing_says_so():
    """Clean equal to corrupted: every 'recovered' is 0/0, and the call warns instead of handing back NaNs silently."""
    model, prompt = make_star(n_layers=2), make_tasks(n=6).prompt
    with pytest.warns(UserWarning, match="clean and corrupted give the same metric"):
        table = hooks.activation_patching(model, prompt, prompt.clone(), hook_names=["hook_prompt"], positions=[1])
    assert table["recovered"].isna().all()


def test_patching_leaves_no_hook_even_when_the_metric_raises():
    model, tasks = make_star(), make_tasks()

    def bad_metric(values):
        raise RuntimeError("metric failed")

    with pytest.raises(RuntimeError, match="metric failed"):
        hooks.activation_patching(
            model, tasks.prompt, tasks.prompt + 0.0, hook_names=["hook_prompt"], metric=bad_metric
        )
    assert all(not h.fwd_hooks for h in model.hook_dict.values())
    with pytest.raises(ValueError, match="shapes differ"):
        hooks.activation_patching(model, tasks.prompt, tasks.prompt[:2])
