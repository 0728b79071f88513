"""Patching follows the model's residual positions: the linear model's 2n + 1 columns, labelled."""

import torch

from ictd_interp import load_checkpoint
from ictd_interp.hooks.patching import activation_patching, tl_patching
from ictd_interp.tasks.sampling import sample_tasks


def test_every_residual_column_of_the_linear_model_is_patched_and_labelled():
    model = load_checkpoint("linear-quick-s0").model.double()
    d = model.cfg.d_features
    clean = sample_tasks(4, 10, d, 12, 0.9, seed=0).prompt.double()
    corrupted = sample_tasks(4, 10, d, 12, 0.9, seed=1).prompt.double()
    name = "blocks.1.hook_resid_pre"
    table = activation_patching(model, clean, corrupted, hook_names=[name])
    assert list(table["position"]) == list(range(25))  # 12 context columns + 13 query columns
    assert table["role"].iloc[-1] == "query of S_12 (the prediction)" and table["role"].iloc[0].startswith("context")
    _, cache = model.run_with_cache(clean)

    def by_hand(act, hook):
        act = act.clone()
        act[:, 24] = cache[name][:, 24]
        return act

    expected = model.run_with_hooks(corrupted, fwd_hooks=[(name, by_hand)])[:, -1].mean().item()
    assert abs(table["value"].iloc[-1] - expected) < 1e-12
    assert abs(table["recovered"].iloc[-1]) > 1e-3  # the prediction column matters


def test_transformer_lens_patching_sweeps_the_residual_columns():
    from transformer_lens import patching

    model = load_checkpoint("linear-quick-s0").model.double()
    clean = sample_tasks(2, 10, model.cfg.d_features, 8, 0.9, seed=0).prompt.double()
    corrupted = sample_tasks(2, 10, model.cfg.d_features, 8, 0.9, seed=1).prompt.double()
    _, cache = model.run_with_cache(clean)
    table = tl_patching(
        patching.get_act_patch_resid_pre,
        model,
        corrupted,
        cache,
        lambda v: v[:, -1].mean(),
        results_dtype=torch.float64,
    )
    assert tuple(table.shape) == (model.cfg.n_layers, 17)
    ours = activation_patching(model, clean, corrupted, hook_names=["blocks.0.hook_resid_pre"])
    assert (torch.tensor(ours["value"].to_numpy()) - table[0]).abs().max() < 1e-10
