"""Two training cells on a 2-core machine: one after the other on 2 torch threads each, or side by side
on 1 thread each (what a study's Ray workers do: ``analyses/studies/run.py`` runs every cell on one
thread). Fresh processes, the two layouts alternating round by round so machine load drifts out of the
ratio; each cell is a whole ``train()`` (start-up included) of ``--steps`` steps, seeds 0 and 1.

    python benchmarks/cell_layout.py [--preset quick] [--steps 400] [--rounds 3]

Prints JSON: the median wall seconds of each layout and ``sequential_over_side_by_side`` (> 1: side by
side gets the two cells done sooner), the median of the per-round ratios with their smallest and largest.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CELL = """
import sys, tempfile, torch
from ictd_interp.config.train import TrainConfig
from ictd_interp.training.trainer import train
torch.set_num_threads(int(sys.argv[2]))
cfg = TrainConfig.from_preset(sys.argv[1], steps=int(sys.argv[3]), eval_every=10**6, checkpoint_every=10**6,
                              seed=int(sys.argv[4]))
with tempfile.TemporaryDirectory() as tmp:
    train(cfg, tmp + "/run", progress=False, keep_freed_memory=True)
"""


def cells(preset: str, steps: int, threads: int, together: bool) -> float:
    """Wall seconds for cells of seeds 0 and 1, started together or one after the other."""
    start = time.perf_counter()
    command = lambda seed: [sys.executable, "-c", CELL, preset, str(threads), str(steps), str(seed)]  # noqa: E731
    if together:
        procs = [subprocess.Popen(command(seed)) for seed in (0, 1)]
        if any(p.wait() for p in procs):
            raise RuntimeError("a cell failed")
    else:
        for seed in (0, 1):
            subprocess.run(command(seed), check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds = [
        (cells(args.preset, args.steps, 2, together=False), cells(args.preset, args.steps, 1, together=True))
        for _ in range(args.rounds)
    ]
    ratios = [seq / side for seq, side in rounds]
    print(
        json.dumps(
            {
                "setting": vars(args),
                "sequential_2_threads_s": round(statistics.median(seq for seq, _ in rounds), 2),
                "side_by_side_1_thread_s": round(statistics.median(side for _, side in rounds), 2),
                "sequential_over_side_by_side": round(statistics.median(ratios), 3),
                "rounds_min_max": [round(min(ratios), 3), round(max(ratios), 3)],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
