"""The state-space forward equals the positional hooked forward, and says where it does not apply."""

import pytest
import torch

from ictd_interp import HookedICTDTransformer
from ictd_interp.models.state_space import transition_counts, window_counts
from tests.conftest import make_cfg, make_tasks


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
