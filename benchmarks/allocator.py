"""Does keeping freed memory (``ictd_interp.training.allocator``) pay? Step time and page faults, both ways.

    python benchmarks/allocator.py [--pairs 3] [--steps 20] [--threads 2] [--preset quick|paper]

The setting is process-wide and cannot be undone, so each measurement is a fresh process; the two modes
alternate (default, kept, default, kept, ...) so that a machine's drift over the run hits both alike. Prints
JSON: per mode, the median seconds per training step and minor page faults per step, and the ratio
default / kept (> 1: keeping freed memory is faster). This measurement decides the defaults documented in
the allocator module: on for the ``ictd-interp`` command (which owns its process), off for ``train()``
called from someone else's process unless asked.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

STEP = """
import json, resource, sys, time, torch
from ictd_interp.config import PRESETS
from ictd_interp.training.allocator import apply_allocator_choice
from ictd_interp.training.batches import window_batch
from ictd_interp.training.objectives import objective
from ictd_interp.models import build_model
torch.set_num_threads(int(sys.argv[2]))
kept = apply_allocator_choice(sys.argv[1] == "kept")
config = PRESETS[sys.argv[4]]
model = build_model(config.model)
optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
generator = torch.Generator().manual_seed(0)
def step():
    batch = window_batch(config.tasks, config.tasks_per_batch, config.windows_per_task + 1, generator=generator)
    optimizer.zero_grad()
    objective(config.objective)(model, batch.to("cpu", torch.float32)).backward()
    optimizer.step()
for _ in range(3):
    step()
faults, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
steps = int(sys.argv[3])
for _ in range(steps):
    step()
print(json.dumps({"kept": kept, "s_per_step": (time.perf_counter() - start) / steps,
                  "faults_per_step": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / steps}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--preset", default="quick", choices=("quick", "paper"))
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"default": [], "kept": []}
    for _ in range(args.pairs):
        for mode in runs:
            out = subprocess.run(
                [sys.executable, "-c", STEP, mode, str(args.threads), str(args.steps), args.preset],
                capture_output=True,
                text=True,
                check=True,
            )
            runs[mode].append(json.loads(out.stdout))
    result = {
        mode: {
            "kept": rows[0]["kept"],
            "s_per_step": statistics.median(r["s_per_step"] for r in rows),
            "faults_per_step": statistics.median(r["faults_per_step"] for r in rows),
        }
        for mode, rows in runs.items()
    }
    result["default_over_kept_time"] = result["default"]["s_per_step"] / result["kept"]["s_per_step"]
    result["setting"] = vars(args)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
