"""Device mixing, caught on a CPU-only machine: the training step, the training-time metrics and a stack of models run
with every model on a stand-in accelerator (torch's ``meta`` device, data-free), under a dispatch mode that fails any
operation whose tensor arguments lie on two devices. Reads back to the CPU (``.cpu()``, ``.item()``) return zeros, so
code that reads its numbers on the CPU runs through; only mixing fails. On a GPU the same code runs on ``cuda``.
"""

from dataclasses import replace

import pytest
import torch

from ictd_interp.config.train import TrainConfig
from ictd_interp.models.stylised.stack import ModelStack
from ictd_interp.training.batches import WindowBatch
from ictd_interp.training.objectives import td_loss
from tests.support.device_mixing import FAKE, FakeAccelerator


def test_the_mode_catches_mixing_that_meta_alone_lets_through():
    with FakeAccelerator(), pytest.raises(RuntimeError, match="device mixing"):
        torch.ones(3, device=FAKE) @ torch.ones(3, 3)  # meta @ cpu passes without the mode
    with FakeAccelerator():
        assert float((torch.ones(3, device=FAKE) * torch.tensor(2.0)).sum()) == 0.0  # a CPU scalar is allowed


def test_a_stack_keeps_to_its_device():
    config = TrainConfig.from_preset("quick", n_layers=2, tasks_per_batch=2, windows_per_task=2)
    from ictd_interp.models.registry import build_model
    from ictd_interp.training.batches import window_batch

    models = [build_model(replace(config.model, seed=s)).to(FAKE) for s in range(2)]
    batches = [window_batch(config.tasks, 2, 3, generator=torch.Generator().manual_seed(s)) for s in range(2)]
    with FakeAccelerator():
        stack = ModelStack(models)
        td_loss(stack, WindowBatch.stack([b.to(FAKE, torch.float32) for b in batches])).sum().backward()
        assert stack.A.grad.device == FAKE
