"""The optimiser update: the multi-tensor (foreach) update is bit for bit the per-tensor
loop the shipped models were trained with, the fused kernel equals it up to rounding, and configs saved before
the field load as foreach."""

import pytest
import torch

from ictd_interp.config.train import TrainConfig
from ictd_interp.training import objectives


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "sgd"])
def test_the_multi_tensor_optimiser_updates_bit_for_bit_as_the_per_tensor_loop(optimizer):
    """The trainer's optimiser runs ``foreach=True`` (one kernel per update term over all parameters);
    the shipped models were trained with torch's CPU default, the per-tensor loop: same bits."""
    from ictd_interp.models.registry import build_model
    from ictd_interp.training.batch_stream import BatchStream
    from ictd_interp.training.trainer import make_optimizer

    config = TrainConfig.from_preset(
        "standard-quick",
        optimizer=optimizer,
        tasks_per_batch=4,
        windows_per_task=3,
        weight_decay=1e-3,
        optimizer_kernel="foreach",
    )
    models = [build_model(config.model) for _ in range(2)]
    fast = make_optimizer(config, models[0])
    assert all(group["foreach"] for group in fast.param_groups)
    loop = type(fast)(models[1].parameters(), lr=config.lr, weight_decay=config.weight_decay, foreach=False)
    batches = BatchStream(config, torch.Generator().manual_seed(0), torch.float32)
    for _ in range(4):
        batch, _ = next(batches)
        for model, opt in zip(models, (fast, loop)):
            opt.zero_grad(set_to_none=True)
            objectives.td_loss(model, batch).backward()
            opt.step()
    moved = [(a - b).abs().max().item() for a, b in zip(models[0].parameters(), build_model(config.model).parameters())]
    assert max(moved) > 1e-5  # the updates compared are not zero
    assert all(torch.equal(a, b) for a, b in zip(models[0].parameters(), models[1].parameters()))


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "sgd"])
def test_the_fused_optimiser_kernel_updates_as_foreach_up_to_rounding(optimizer):
    """``optimizer_kernel="fused"`` (the default) runs the same update as ``foreach`` in another order of
    float operations: float64 weights agree to 1e-13 after 5 steps whose updates are of order lr."""
    from ictd_interp.models.registry import build_model
    from ictd_interp.training.batch_stream import BatchStream
    from ictd_interp.training.trainer import make_optimizer

    configs = [
        TrainConfig.from_preset(
            "quick",
            optimizer=optimizer,
            tasks_per_batch=4,
            windows_per_task=3,
            dtype="float64",
            weight_decay=1e-2,
            optimizer_kernel=kernel,
        )
        for kernel in ("fused", "foreach")
    ]
    assert TrainConfig.from_preset("quick").optimizer_kernel == "fused"
    models = [build_model(c.model) for c in configs]
    optimizers = [make_optimizer(c, m) for c, m in zip(configs, models)]
    assert [bool(o.param_groups[0]["fused"]) for o in optimizers] == [True, False]
    batches = BatchStream(configs[0], torch.Generator().manual_seed(0), torch.float64)
    for _ in range(5):
        batch, _ = next(batches)
        for model, opt in zip(models, optimizers):
            opt.zero_grad(set_to_none=True)
            objectives.td_loss(model, batch).backward()
            opt.step()
    start = build_model(configs[0].model).parameters()
    moved = max((a - b).abs().max().item() for a, b in zip(models[0].parameters(), start))
    gap = max((a - b).abs().max().item() for a, b in zip(*(m.parameters() for m in models)))
    assert moved > 1e-3 and gap < 1e-13
