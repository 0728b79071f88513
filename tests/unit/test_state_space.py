"""The state-space forward equals the positional hooked forward, and says where it does not apply."""

from types import SimpleNamespace

import pytest
import torch

from ictd_interp import HookedICTDTransformer
from ictd_interp.models.stylised.state_space import transition_counts, window_counts
from tests.conftest import make_cfg, make_standard, make_tasks


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("kind,scale", [("uniform", 1.0), ("onehot", 3.0)])
def test_state_space_values_equal_the_hooked_forward(tied, kind, scale):
    """Random weights (feature drive included) and θ*, in float64: 1e-12."""
    tasks = make_tasks(n_tasks=6, n_states=5, d=5, n=40, feature_kind=kind, feature_scale=scale)
    cfg = make_cfg(d_features=5, n_layers=4, tied=tied, seed=3, init_scale=0.5)
    for model in (HookedICTDTransformer(cfg), HookedICTDTransformer.from_theta_star(cfg)):
        with torch.no_grad():
            positional = model(tasks.prompt)
        assert (model.state_space_values(tasks) - positional).abs().max() < 1e-12
        assert positional.abs().max() > 0.1  # not a trivially zero comparison


def test_a_tied_model_runs_at_other_depths_in_state_space():
    tasks = make_tasks(n=20)
    star = HookedICTDTransformer.from_theta_star(make_cfg(tied=True, n_layers=1))
    deep = HookedICTDTransformer.from_theta_star(make_cfg(tied=True, n_layers=7))
    with torch.no_grad():
        assert (star.state_space_values(tasks, depth=7) - deep(tasks.prompt)).abs().max() < 1e-12


def test_window_counts_are_each_windows_own_counts():
    tasks = make_tasks(n_tasks=3, n_states=6, n=25)
    windows = window_counts(tasks.states, 6, context_len=20, n_windows=6)
    for t in range(6):
        expected = transition_counts(tasks.states[:, t : t + 21], 6)
        assert torch.equal(windows[:, t], expected) and expected.sum() == 3 * 20


@pytest.mark.parametrize("override,reason", [({"form": "dual"}, "dual-head"), ({"mask": "full"}, "full mask")])
def test_state_space_refuses_what_it_does_not_cover(override, reason):
    model = HookedICTDTransformer(make_cfg(**override))
    with pytest.raises(ValueError, match=reason):
        model.state_space_values(make_tasks())


def test_state_space_refuses_other_architectures_and_mismatched_tasks():
    with pytest.raises(ValueError, match="HookedStandardTransformer has no state-space forward"):
        make_standard().state_space_values(make_tasks())
    model = HookedICTDTransformer(make_cfg(d_features=3))
    with pytest.raises(ValueError, match=r"tasks.features: expected \[batch, state, d_features\] = \(4, 6, 3\)"):
        model.state_space_values(make_tasks(d=4))
    tasks = make_tasks()
    shared = SimpleNamespace(mrp=tasks.mrp, features=tasks.features[0], states=tasks.states)  # jaxtyping off: accepted
    with pytest.raises(ValueError, match=r"tasks.features: .* got \(6, 3\)"):
        model.state_space_values(shared)


@pytest.mark.parametrize("tied", [True, False])
def test_nonzero_frozen_entries_are_refused_not_silently_dropped(tied):
    """The positional forward reads every entry, this forward the free ones: weights outside the mask are named."""
    model = HookedICTDTransformer(make_cfg(tied=tied, n_layers=2))
    with torch.no_grad():
        model.blocks[-1].attn.V[0, 0, 0] = 0.5  # the feature row of V: frozen under the paper mask
    assert model.blocks[-1].attn.mask_V[0, 0, 0] == 0
    with pytest.raises(ValueError, match=r"blocks\.[01]\.attn\.V has nonzero entries that the paper mask freezes"):
        model.state_space_values(make_tasks())


def test_without_hooks_only_the_last_layer_is_gathered(monkeypatch):
    """Memory stays independent of depth (one [batch, pos] row, not one per layer) unless asked for every layer."""
    import ictd_interp.models.stylised.state_space as state_space

    seen, forward = [], state_space.state_space_forward
    monkeypatch.setattr(
        state_space,
        "state_space_forward",
        lambda *args, on_layer=None: seen.append(on_layer) or forward(*args, on_layer=on_layer),
    )
    model, tasks = HookedICTDTransformer.from_theta_star(make_cfg(tied=True, n_layers=1)), make_tasks()
    values = model.state_space_values(tasks, depth=9)
    every = model.state_space_values(tasks, depth=9, every_layer=True)
    assert seen[0] is None and seen[1] is not None
    assert every.shape == (9, *tasks.states.shape) and torch.equal(every[-1], values)


@pytest.mark.parametrize("tied", [True, False])
def test_state_space_hooks_see_what_the_positional_forward_caches(tied):
    """Every per-position hook (all but the scores and the pattern), cached through TransformerLens's own
    caching hooks, equals ``run_with_cache`` of the positional forward at 1e-12 in float64."""
    tasks = make_tasks(n_tasks=3, n_states=5, d=4, n=30, feature_scale=2.0)
    model = HookedICTDTransformer(make_cfg(d_features=4, n_layers=3, tied=tied, seed=5, init_scale=0.5))
    names = [n for n in model.hook_dict if not n.endswith(("hook_attn_scores", "hook_pattern"))]
    with torch.no_grad():
        _, positional = model.run_with_cache(tasks.prompt, names_filter=names)
    cache, fwd, _ = model.get_caching_hooks(names_filter=names)
    with model.hooks(fwd_hooks=fwd):
        values = model.state_space_values(tasks)
    assert list(cache) == list(positional.keys()) and len(cache) == 2 + 3 * 12
    for name in names:
        assert (cache[name] - positional[name]).abs().max() < 1e-12, name
    assert positional["blocks.2.hook_resid_post"][..., -1].abs().max() > 0.1  # the value row is not trivially 0
    assert (values - positional["blocks.2.hook_resid_post"][..., -1]).abs().max() < 1e-12
    assert not model.has_any_hook()  # the caching hooks were temporary


def test_state_space_hooks_refuse_what_they_cannot_honour():
    tasks, model = make_tasks(n=10), HookedICTDTransformer(make_cfg(n_layers=2, tied=True))
    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", lambda x, hook: None)]):
        with pytest.raises(ValueError, match=r"blocks\.0\.attn\.hook_pattern.*pair of positions"):
            model.state_space_values(tasks)
    with model.hooks(fwd_hooks=[("blocks.1.hook_resid_mid", lambda x, hook: x * 0)]):
        with pytest.raises(ValueError, match=r"blocks\.1\.hook_resid_mid edited"):
            model.state_space_values(tasks)
    with model.hooks(fwd_hooks=[("blocks.0.hook_attn_out", lambda x, hook: x.mul_(2))]):  # in place, too
        with pytest.raises(ValueError, match="edited"):
            model.state_space_values(tasks)
    with model.hooks(fwd_hooks=[("blocks.0.hook_resid_post", lambda x, hook: None)]):
        with pytest.raises(ValueError, match="own depth 2"):
            model.state_space_values(tasks, depth=5)
    assert model.state_space_values(tasks, depth=5).shape == tasks.states.shape  # no hook: any depth


def test_the_error_curves_in_state_space_equal_the_positional_ones():
    """``errors_by_depth`` / ``errors_by_context`` (what ``evaluate`` draws) agree across the two forwards."""
    from ictd_interp.analyses.metrics.convergence import errors_by_context, errors_by_depth

    tasks = make_tasks(n_tasks=5, n_states=6, d=4, n=40, feature_scale=2.0)
    model = HookedICTDTransformer(make_cfg(d_features=4, n_layers=3, tied=False, seed=2, init_scale=0.5))
    for curve in (
        lambda exact: errors_by_depth(model, tasks, state_space=exact),
        lambda exact: errors_by_context(model, tasks, [3, 17, 40], state_space=exact),
    ):
        positional, exact = curve(False), curve(True)
        assert positional.abs().min() > 1e-3 and (exact - positional).abs().max() < 1e-12
    layers = model.state_space_values(tasks, every_layer=True)
    assert layers.shape == (3, 5, 41) and torch.equal(layers[-1], model.state_space_values(tasks))


def test_sharp_kernels_with_a_state_never_a_source_stay_finite():
    """One-hot ×30 (scores up to 900, beyond exp's range) and a query state no source visits: the state-space
    values equal the positional ones, where an unmasked kernel turned ``inf * 0`` into NaN everywhere."""
    tasks = make_tasks(n_tasks=4, n_states=8, d=8, n=5, feature_kind="onehot", feature_scale=30.0, seed=2)
    sources = [set(row[:-1].tolist()) for row in tasks.states]
    assert any(int(row[-1]) not in seen for row, seen in zip(tasks.states, sources))  # the case is exercised
    star = HookedICTDTransformer.from_theta_star(make_cfg(d_features=8, n_layers=3))
    with torch.no_grad():
        positional = star(tasks.prompt)
    exact = star.state_space_values(tasks)
    assert torch.isfinite(exact).all() and (exact - positional).abs().max() < 1e-10


def test_depth_zero_is_the_zero_start_and_a_negative_depth_is_named():
    tasks, model = make_tasks(n=6), HookedICTDTransformer(make_cfg(n_layers=2, tied=True))
    assert torch.equal(model.state_space_values(tasks, depth=0), torch.zeros(tasks.states.shape, dtype=torch.float64))
    assert model.state_space_values(tasks, depth=0, every_layer=True).shape == (0, *tasks.states.shape)
    with pytest.raises(ValueError, match="depth: .* >= 0"):
        model.state_space_values(tasks, depth=-1)


def test_hooks_on_modules_that_are_not_hook_points_are_refused():
    """This forward never calls the blocks: an edit there would be ignored silently, so it is refused."""
    tasks, model = make_tasks(n=6), HookedICTDTransformer(make_cfg(n_layers=2, tied=True))
    handle = model.blocks[0].attn.register_forward_hook(lambda module, args, out: out * 2)
    try:
        with pytest.raises(ValueError, match=r"blocks\.0\.attn.*never calls"):
            model.state_space_values(tasks)
    finally:
        handle.remove()
    assert model.state_space_values(tasks).shape == tasks.states.shape


@pytest.mark.parametrize("override", [{"form": "dual"}, {"mask": "full"}])
def test_evaluate_runs_models_the_state_space_forward_does_not_cover(override):
    """θ*'s own architecture follows the model's: a dual-form or full-mask model is evaluated positionally."""
    from ictd_interp.analyses.reports.ood import evaluate_ood

    tasks = make_tasks(n_tasks=4, n_states=5, d=3, n=12)
    model = HookedICTDTransformer(make_cfg(n_layers=2, tied=True, seed=1, init_scale=0.3, **override))
    result = evaluate_ood(model, tasks, depth=4, lengths=[6, 12])
    assert len(result.depth.theta_star) == 5 and len(result.context.model) == 2
