"""Drawing a stack's batch two ways, timed in one run: each run's own host stream, stacked and copied to the device
(``sampler = "host"``: ``M`` streams, ``M`` host draws, one copy), against one counter-based call that draws every
run's batch where the models are (``sampler = "device"``: ``ictd_interp.training.device_stream``). Prints one JSON
line per stack size: milliseconds per stacked batch each way (each round's mean over ``--repeats`` batches, a multiple
of the host stream's block of 8; the median over ``--rounds``, the two ways alternating so the machine's drift leaves
the ratio) and ``host_over_device``, the median of the per-round ratios with the smallest and largest (> 1: drawing
on the device is faster).

    python benchmarks/device_draws.py [--models 1 8 64 256] [--tasks 4] [--device cpu] [--repeats 24] [--rounds 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
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
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    base = TrainConfig.from_preset("quick", tasks_per_batch=args.tasks, device=args.device)
    for m in args.models:
        configs = [replace(base, seed=s) for s in range(m)]
        host, drawn = (
            host_draws(configs, args.device, torch.float32),
            device_draws([replace(c, sampler="device") for c in configs], torch.float32),
        )
        rounds = [
            (mean_ms(host, args.device, args.repeats), mean_ms(drawn, args.device, args.repeats))
            for _ in range(args.rounds)
        ]
        ratios = [h / d for h, d in rounds]
        line = {"models": m, "tasks": args.tasks, "device": args.device, "rounds": args.rounds}
        line |= {"host_ms": round(statistics.median(h for h, _ in rounds), 2)}
        line |= {"device_ms": round(statistics.median(d for _, d in rounds), 2)}
        line |= {
            "host_over_device": round(statistics.median(ratios), 2),
            "range": [round(min(ratios), 2), round(max(ratios), 2)],
        }
        print(json.dumps(line))


if __name__ == "__main__":
    main()
