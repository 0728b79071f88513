"""Drawing a stack's batch two ways, timed in one run: each run's own host stream, stacked and copied to the device
(``sampler = "host"``: ``M`` streams, ``M`` host draws, one copy), against one counter-based call that draws every
run's batch where the models are (``sampler = "device"``: ``ictd_interp.training.device_stream``). Prints one JSON
line per stack size: milliseconds per stacked batch each way (the mean over ``--repeats``, a multiple of the host
stream's block of 8) and ``host_over_device`` (> 1: drawing on the device is faster).

    python benchmarks/device_draws.py [--models 1 8 64 256] [--tasks 4] [--device cpu] [--repeats 24]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from dataclasses import replace

import torch

from ictd_interp.config.train import TrainConfig
from ictd_interp.training.batch_stream import BatchStream
from ictd_interp.training.batches import WindowBatch
from ictd_interp.training.device_stream import DeviceBatches


def host_draws(configs: list[TrainConfig], device: str, dtype: torch.dtype):
    streams = [BatchStream(c, torch.Generator().manual_seed(c.seed), dtype) for c in configs]
    return lambda: WindowBatch.stack([next(s)[0] for s in streams]).to(device, dtype)


def device_draws(configs: list[TrainConfig], dtype: torch.dtype):
    draws, steps = DeviceBatches(configs, dtype, stacked=True), itertools.count()
    return lambda: draws.at(next(steps))


def mean_ms(draw, device: str, repeats: int) -> float:
    """Milliseconds per batch over ``repeats`` batches in a row (the host stream draws 8 at once and hands them out
    one by one, so only a mean over whole blocks is its cost)."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(8):
        draw()
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        draw()
    sync()
    return 1e3 * (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, nargs="+", default=[1, 8, 64, 256])
    parser.add_argument("--tasks", type=int, default=4, help="tasks per model per step")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=24)
    args = parser.parse_args()
    torch.set_num_threads(1)
    base = TrainConfig.from_preset("quick", tasks_per_batch=args.tasks, device=args.device)
    for m in args.models:
        configs = [replace(base, seed=s) for s in range(m)]
        host = mean_ms(host_draws(configs, args.device, torch.float32), args.device, args.repeats)
        on_device = [replace(c, sampler="device") for c in configs]
        drawn = mean_ms(device_draws(on_device, torch.float32), args.device, args.repeats)
        line = {"models": m, "tasks": args.tasks, "device": args.device, "host_ms": round(host, 2)}
        print(json.dumps({**line, "device_ms": round(drawn, 2), "host_over_device": round(host / drawn, 2)}))


if __name__ == "__main__":
    main()
