"""NEU at (n, L): the estimator is unbiased where the batch value is not, and the grid says what it measured."""

import pytest
import torch

from analyses.metrics.neu import neu_grid, zero_predictor
from ictd_interp.training.batches import window_batch
from ictd_interp.training.objectives import expected_update, neu_unbiased
from ictd_interp.config.tasks import TaskDistribution
from tests.conftest import make_cfg

DIST = TaskDistribution(n_states=5, d_features=3, context_len=8, gamma=0.9)


def test_zero_predictor_predicts_zero_and_its_neu_grows_with_depth():
    """v = 0 at A = V = 0, so delta = R; each tied layer adds the same first-order term to grad v, so the
    expected update grows with L (the audit: as L^2 in NEU)."""
    cfg = make_cfg(tied=True)
    batch = window_batch(DIST, 64, 5, generator=torch.Generator().manual_seed(0))
    shallow, deep = zero_predictor(cfg), zero_predictor(make_cfg(tied=True, n_layers=6))
    assert shallow.fast_values(batch.prompts, query_only=True).abs().max() == 0
    ratio = expected_update(deep, batch).norm() / expected_update(shallow, batch).norm()
    assert ratio == pytest.approx(3.0, rel=0.05)  # 6 layers / 2 layers: u is linear in L at V = 0


def test_the_unbiased_estimate_removes_the_batch_variance():
    """Over 40 batches of 8 tasks, the batch NEU's mean exceeds the unbiased estimate's mean (by the
    variance term); the unbiased estimate agrees with ||u||^2 of one 640-task batch within noise."""
    star = zero_predictor(make_cfg(tied=True))
    gen = torch.Generator().manual_seed(1)
    batches = [window_batch(DIST, 8, 5, generator=gen) for _ in range(40)]
    unbiased = torch.tensor([neu_unbiased(star, b) for b in batches])
    plain = torch.tensor([float(expected_update(star, b).pow(2).sum()) for b in batches])
    big = float(expected_update(star, window_batch(DIST, 640, 5, generator=gen)).pow(2).sum())
    assert plain.mean() > unbiased.mean() * 1.2
    assert abs(unbiased.mean() - big) < 3 * unbiased.std() / 40 ** 0.5 + 0.05 * big


def test_grid_rows_and_model_only_at_its_depth():
    from ictd_interp import HookedICTDTransformer

    model = HookedICTDTransformer.from_theta_star(make_cfg(tied=True))
    result = neu_grid(model.cfg, DIST, model, lengths=(6, 8), depths=(1, 2), tasks_per_batch=8, n_windows=3, repeats=2)
    assert [(r["context_len"], r["depth"]) for r in result["rows"]] == [(6, 1), (6, 2), (8, 1), (8, 2)]
    assert ["model" in r for r in result["rows"]] == [False, True, False, True]
    assert result["rows"][1]["model"] == result["rows"][1]["theta_star"]  # the model is theta* here
    assert "Theorem 3" in result["sentence"]


def test_the_grid_leaves_the_callers_model_as_it_was():
    """NEU is computed in float64 on a copy: the caller's float32 model is not converted in place."""
    from ictd_interp import HookedICTDTransformer

    model = HookedICTDTransformer.from_theta_star(make_cfg(tied=True, dtype="float32"))
    neu_grid(model.cfg, DIST, model, lengths=(6,), depths=(2,), tasks_per_batch=4, n_windows=3, repeats=2)
    assert model.cfg.dtype == "float32" and next(model.parameters()).dtype == torch.float32
