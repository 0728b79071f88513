"""θ*'s depth limit without a singular solve: the tabular TD fixed point where the query state is a source,
the certainty-equivalence equations everywhere, the deep iteration itself, and a reason where it diverges."""

import pytest
import torch

from ictd_interp import HookedICTDTransformer
from ictd_interp.analyses.metrics.baselines import td_fixed_point
from ictd_interp.analyses.metrics.depth_limit import depth_limit, limit_spectrum
from tests.conftest import make_cfg, make_tasks


def _star(d):
    return HookedICTDTransformer.from_theta_star(make_cfg(d_features=d, n_layers=1, tied=True))


@pytest.mark.parametrize("kind,scale", [("uniform", 0.5), ("uniform", 2.0), ("onehot", 1.0), ("onehot", 5.0)])
def test_theta_stars_limit_is_the_tabular_fixed_point(kind, scale):
    tasks = make_tasks(n_tasks=96, n_states=8, d=8, n=14, feature_kind=kind, feature_scale=scale, seed=4)
    values, spectrum = limit_spectrum(_star(8), tasks)
    query_source = (tasks.states[:, :-1] == tasks.states[:, -1:]).any(1)
    assert 0 < int((~query_source).sum()) < len(tasks)  # both kinds of context are in the sample
    assert spectrum.neutral == (~query_source).tolist()  # a query state never a source: the eigenvalue 1
    assert all(r is None for r in spectrum.reason) and max(spectrum.radius) < 1
    assert (values - td_fixed_point(tasks, 0.9))[query_source].abs().max() < 1e-8
    # where the query state is never a source: every source state's summed TD error still vanishes ...
    src = tasks.states[:, :-1]
    v_src, v_nxt = values[:, :-1], values[:, 1:]
    delta = tasks.rewards.double() + 0.9 * v_nxt - v_src
    summed = torch.zeros(96, 8, dtype=torch.float64).scatter_add_(1, src, delta)
    assert summed.abs().max() < 1e-10
    # ... and the limit is where the iteration goes (the query's value is the kernel's choice, not a constant)
    deep = _star(8).state_space_values(tasks, depth=4000)
    assert (deep - values)[~query_source].abs().max() < 1e-6
    assert (values - td_fixed_point(tasks, 0.9))[~query_source].abs().max() > 1e-3


def test_a_diverging_layer_has_no_limit_and_says_why():
    star = _star(4)
    with torch.no_grad():
        star.blocks[0].attn.V.mul_(-1.0)  # (−, −, +): every mode grows
    tasks = make_tasks(n_tasks=5, n_states=6, d=4, n=20)
    values, spectrum = limit_spectrum(star, tasks)
    assert torch.isnan(depth_limit(star, tasks)).all() and torch.isnan(values).all()
    assert all(r is not None and "diverge" in r for r in spectrum.reason) and min(spectrum.radius) > 1


def test_a_per_layer_model_repeats_its_last_layer():
    cfg = make_cfg(d_features=6, n_layers=3, tied=False)
    star = HookedICTDTransformer.from_theta_star(cfg)
    tasks = make_tasks(n_tasks=8, n_states=6, d=6, n=30, feature_kind="onehot", feature_scale=3.0)
    assert (depth_limit(star, tasks) - depth_limit(_star(6), tasks)).abs().max() < 1e-10


def test_theta_stars_rows_of_a_full_mask_model_are_the_paper_masks():
    """θ*'s weights are the same under either mask; its limit is taken under the paper's, which has a state-space
    form (a full-mask model's analyze once failed here)."""
    from dataclasses import replace

    from ictd_interp.analyses.metrics.theta_star_limit import theta_star_rows

    cfg, tasks = make_cfg(n_layers=3), make_tasks()
    full, paper = theta_star_rows(replace(cfg, mask="full"), tasks), theta_star_rows(cfg, tasks)
    for name in ("theta_star", "theta_star_limit"):
        torch.testing.assert_close(full[name], paper[name], rtol=0, atol=1e-12)
    assert torch.isfinite(paper["theta_star_limit"]).any()
