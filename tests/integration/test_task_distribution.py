"""The task distribution: one object for training, evaluation and analyses, on any MRP family."""

import pytest

from ictd_interp.config.train import TrainConfig
from ictd_interp.io.run_folder import read_metrics
from ictd_interp.training.trainer import train


@pytest.mark.parametrize("family", ["loop", "random", "gym:FrozenLake-v1"])
def test_training_on_other_families(family, tmp_path):
    if family.startswith("gym:"):
        pytest.importorskip("gymnasium")
    cfg = TrainConfig.from_flat(
        family=family,
        n_states=5,
        context_len=8,
        tasks_per_batch=4,
        windows_per_task=2,
        steps=3,
        n_eval_tasks=8,
        eval_every=3,
        checkpoint_every=3,
        tied=True,
    )
    run = train(cfg, tmp_path / "run", progress=False)
    assert run.step == 3 and read_metrics(tmp_path / "run")[-1]["eval_msve"] > 0
    # the evaluation tasks come from the same family
    from ictd_interp.training.evaluation import EvalSet

    eval_tasks = EvalSet.build(cfg).tasks
    assert eval_tasks.mrp.n_states == (16 if family.startswith("gym:") else 5)
