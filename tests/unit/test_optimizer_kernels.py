"""The optimiser update: the multi-tensor (foreach) update is bit for bit the per-tensor
loop the shipped models were trained with, the fused kernel equals it up to rounding, and configs saved before
the field load as foreach."""

import pytest

from ictd_interp.config.train import TrainConfig


def test_configs_saved_before_the_optimizer_kernel_field_load_as_foreach():
    saved = TrainConfig.from_preset("quick").to_dict()
    assert TrainConfig.from_dict(saved).optimizer_kernel == "fused"
    del saved["optimizer_kernel"]
    assert TrainConfig.from_dict(saved).optimizer_kernel == "foreach"
    with pytest.raises(ValueError, match="optimizer_kernel"):
        TrainConfig.from_preset("quick", optimizer_kernel="loop")
