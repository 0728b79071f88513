"""Algorithm identification, depth extrapolation and the iteration map, on cases with known answers."""

import pytest
import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.analyses.metrics.extrapolation import layer_at_depth
from ictd_interp.config.train import TrainConfig
from ictd_interp.tasks.sampling import sample_tasks
from ictd_interp.training.trainer import resume, train


def test_depth_sampled_training_runs_the_tied_layer_at_each_depth(tmp_path):
    cfg = TrainConfig.from_flat(
        tied=True,
        train_depths="1:4",
        steps=6,
        tasks_per_batch=4,
        windows_per_task=2,
        n_eval_tasks=8,
        eval_every=3,
        checkpoint_every=3,
        n_states=5,
        context_len=8,
        d_features=3,
        dtype="float64",
    )
    model = HookedICTDTransformer(ICTDConfig(d_features=3, n_layers=3, tied=True, dtype="float64", init_scale=0.5))
    prompt = sample_tasks(4, 5, 3, 8, 0.9, seed=1).prompt
    assert (model.fast_values(prompt, depth=5) - layer_at_depth(model, 5)(prompt)).abs().max() < 1e-12
    full = train(cfg, tmp_path / "full", progress=False)
    cut = train(cfg, tmp_path / "cut", progress=False)
    import shutil

    shutil.rmtree(tmp_path / "cut" / "checkpoints" / "step_0000006")
    shutil.rmtree(tmp_path / "cut" / "final")
    resumed = resume(tmp_path / "cut", progress=False)
    assert torch.equal(full.model.blocks[0].attn.V, resumed.model.blocks[0].attn.V)
    with pytest.raises(ValueError, match="tied"):
        TrainConfig.from_flat(tied=False, train_depths="1:4")
    with pytest.raises(ValueError, match="LO:HI"):
        TrainConfig.from_flat(tied=True, train_depths="one-six")
    assert cut.step == 6
