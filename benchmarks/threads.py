"""Training speed on 1 against 2 torch threads, on an idle machine and on one kept busy, for each architecture.

Each cell is a fresh process that trains ``--steps`` steps of the architecture's quick preset (start-up
excluded: the clock runs from the first step's end to the last's, read from the trainer's ``stop``
poll) and then times ``--forwards`` hooked forwards of one evaluation batch. "Loaded" runs
``--load`` busy-looping processes beside it, as other users' work on a shared machine does (the load
average then reads about that number plus one). Thread counts alternate within a round, so drift in
the machine's speed falls on both.

    python benchmarks/threads.py [--steps 150] [--rounds 2] [--load 2]

Prints JSON: per architecture and load, the median steps per second and the median forward in ms on
1 and 2 threads, and ``two_over_one`` (> 1: two threads are faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CELL = """
import json, sys, tempfile, time, torch
from ictd_interp.config.train import TrainConfig
from ictd_interp.training.trainer import train
from ictd_interp.tasks.sampling import sample_from
from ictd_interp.models.registry import build_model
preset, architecture = sys.argv[1], sys.argv[2]
threads, steps, forwards = (int(a) for a in sys.argv[3:6])
torch.set_num_threads(threads)
settings = {} if architecture == "-" else {"architecture": architecture}
cfg = TrainConfig.from_preset(preset, steps=steps, eval_every=10**6, checkpoint_every=10**6, **settings)
marks = []
with tempfile.TemporaryDirectory() as tmp:
    train(cfg, tmp + "/run", progress=False, keep_freed_memory=True,
          stop=lambda: marks.append(time.perf_counter()))  # polled after every step; None: go on
model = build_model(cfg.model).eval()
prompt = sample_from(cfg.tasks, 64, seed=0).prompt.to(torch.float32)
with torch.no_grad():
    model.run_with_cache(prompt)
    start = time.perf_counter()
    for _ in range(forwards):
        model.run_with_cache(prompt)
    forward_ms = (time.perf_counter() - start) / forwards * 1e3
print(json.dumps({"steps_per_s": (len(marks) - 1) / (marks[-1] - marks[0]), "forward_ms": forward_ms}))
"""

ARCHITECTURES = {
    "stylised tied (quick)": ("quick", "-"),
    "standard (standard-quick)": ("standard-quick", "-"),
    "linear (quick, linear-ictd)": ("quick", "linear-ictd"),
}
SPIN = "while True: pass"


def cell(preset: str, architecture: str, threads: int, steps: int, forwards: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CELL, preset, architecture, str(threads), str(steps), str(forwards)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure(args, load: int) -> dict:
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(load)]
    try:
        results = {}
        for name, (preset, architecture) in ARCHITECTURES.items():
            runs = {1: [], 2: []}
            for round_ in range(args.rounds):
                for threads in (1, 2) if round_ % 2 == 0 else (2, 1):
                    runs[threads].append(cell(preset, architecture, threads, args.steps, args.forwards))
            median = {
                t: {k: statistics.median(r[k] for r in rs) for k in ("steps_per_s", "forward_ms")}
                for t, rs in runs.items()
            }
            results[name] = {
                "1_thread": median[1],
                "2_threads": median[2],
                "two_over_one": round(median[2]["steps_per_s"] / median[1]["steps_per_s"], 3),
            }
        return {"load_average_1min_at_end": round(os.getloadavg()[0], 2), "architectures": results}
    finally:
        for spinner in spinners:
            spinner.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--forwards", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--load", type=int, default=2, help="busy processes beside the cell when loaded")
    args = parser.parse_args()
    print(
        json.dumps(
            {
                "setting": vars(args),
                "cpus": os.cpu_count(),
                "idle": measure(args, 0),
                "loaded": measure(args, args.load),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
