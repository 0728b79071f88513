"""Device mixing, caught on a CPU-only machine: the training step, the training-time metrics and a stack of models run
with every model on a stand-in accelerator (torch's ``meta`` device, data-free), under a dispatch mode that fails any
operation whose tensor arguments lie on two devices. Reads back to the CPU (``.cpu()``, ``.item()``) return zeros, so
code that reads its numbers on the CPU runs through; only mixing fails. On a GPU the same code runs on ``cuda``.
"""

from dataclasses import replace

import pytest

from ictd_interp.config.train import TrainConfig
from ictd_interp.training.trainer import _step, log_metrics, start_loop
from tests.support.device_mixing import FAKE, FakeAccelerator


def _on_fake_device(config: TrainConfig) -> TrainConfig:
    config = replace(config, optimizer_kernel="foreach")  # torch has no fused optimiser kernel for meta tensors
    config.device = FAKE.type  # past validation on purpose: the configs accept cpu and cuda only
    return config


@pytest.mark.parametrize("architecture", ["stylised", "standard"])
def test_the_training_step_and_its_metrics_keep_to_the_models_device(tmp_path, architecture):
    config = TrainConfig.from_preset(
        "quick" if architecture == "stylised" else "standard-quick",
        steps=2,
        n_layers=2,
        tasks_per_batch=2,
        windows_per_task=2,
        n_eval_tasks=4,
    )
    with FakeAccelerator():
        loop = start_loop(_on_fake_device(config), tmp_path / "run")  # logs step 0: every training-time metric
        assert next(loop.run.model.parameters()).device == FAKE
        _step(loop)
        log_metrics(loop, loss=0.0)
    assert loop.run.step == 1
