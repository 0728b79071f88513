"""A run's stream of training batches: the batch of ``training.batch_recipe`` from one of its two sources."""

from __future__ import annotations

from typing import Union

import torch

from ictd_interp.config.train import TrainConfig
from ictd_interp.training.batch_stream import BatchStream
from ictd_interp.training.device_stream import DeviceBatches


def open_stream(
    config: TrainConfig, generator: torch.Generator, dtype: torch.dtype, step: int = 0
) -> Union[BatchStream, DeviceBatches]:
    """A run's batches from ``step`` on: its host generator's (``BatchStream``, whose state is ``generator``'s) or,
    with ``sampler = "device"``, the counters' at the step (``DeviceBatches``)."""
    if config.sampler == "device":
        return DeviceBatches([config], dtype, step)
    return BatchStream(config, generator, dtype)
