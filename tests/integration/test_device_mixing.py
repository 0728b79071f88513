"""Device mixing, caught on a CPU-only machine: the training step, the training-time metrics and a stack of models run
with every model on a stand-in accelerator (torch's ``meta`` device, data-free), under a dispatch mode that fails any
operation whose tensor arguments lie on two devices. Reads back to the CPU (``.cpu()``, ``.item()``) return zeros, so
code that reads its numbers on the CPU runs through; only mixing fails. On a GPU the same code runs on ``cuda``.
"""

from dataclasses import replace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ictd_interp.config.train import TrainConfig
from ictd_interp.training.trainer import _step, log_metrics, start_loop

FAKE = torch.device("meta")


class FakeAccelerator(TorchDispatchMode):
    """Fails an operation whose tensor arguments (a 0-dim CPU scalar aside, as torch allows) span two devices;
    a copy from the stand-in device to the CPU gives zeros and a value read 0 (a boolean check True) instead of failing
    for lack of data."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        devices = {t.device for t in tensors if not (t.device.type == "cpu" and t.dim() == 0)}
        if len(devices) > 1:
            raise RuntimeError(f"device mixing in {func}: {sorted(map(str, devices))}")
        source = tensors[0] if tensors else None
        if source is not None and source.device == FAKE:
            if func is torch.ops.aten._local_scalar_dense.default:
                return True if source.dtype == torch.bool else 0  # a check passes, a number reads 0
            if func is torch.ops.aten._to_copy.default and torch.device(kwargs.get("device", FAKE)).type == "cpu":
                return torch.zeros(source.shape, dtype=kwargs.get("dtype") or source.dtype)
        return func(*args, **kwargs)


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
