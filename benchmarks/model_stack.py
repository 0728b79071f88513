"""Many models in one process (``ictd_interp.training.stacked``) against one process per model: models x steps per
second, at the default batch and at small batches.

For each batch size (tasks per step), each round trains ``M`` seeds of ``--preset`` two ways, in fresh processes on
``--threads`` torch threads (a study's Ray worker uses 1):

* **alone**: one process per model, one after the other, each a whole ``train()``;
* **stacked**: one process, one ``train_stack()`` of the ``M`` runs.

Two times are measured inside each process: the **step loop** (from before the first step to after the last:
data, forward, backward, optimiser; the ``stop`` poll is its clock) and the **whole run** (``train`` /
``train_stack``: the loop, the evaluations at steps 0 and ``--steps``, whose tasks a stack builds once for all
its runs, the folders and checkpoints). Imports and process start-up are left out, which favours the processes
per model. The two ways alternate round by round so the machine's drift leaves the ratio; ``*_alone_over_stacked``
is the median of the per-round ratios (> 1: the stack trains the same models sooner), with the smallest and
largest.

    python benchmarks/model_stack.py [--preset quick] [--models 8] [--batches 4 8 16 64] [--steps 200] [--rounds 3]
                                     [--device cuda]

The studies' rule (``ictd_interp.analyses.studies.cells``: stack only at ``tasks_per_batch <=
STACK_MAX_TASKS_PER_BATCH``, at most ``STACK_TASKS`` tasks per stack) comes from these numbers; the JSON repeats it
beside them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from ictd_interp.io.progress import progress_bar

RUN = """
import json, sys, tempfile, time, torch
from ictd_interp.config.train import TrainConfig
from ictd_interp.training.stacked import train_stack
from ictd_interp.training.trainer import train
preset, threads, steps, batch, device = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
seeds = sys.argv[6:]
torch.set_num_threads(threads)
configs = [TrainConfig.from_preset(preset, steps=steps, eval_every=steps, checkpoint_every=steps, n_eval_tasks=64,
                                   tasks_per_batch=batch, seed=int(s), device=device) for s in seeds]
polls = []  # polled once before the first step and after each: the step loop's clock, evaluations outside it
stop = lambda: polls.append(time.perf_counter()) and False
with tempfile.TemporaryDirectory() as tmp:
    start = time.perf_counter()
    if len(configs) == 1:
        train(configs[0], tmp + "/run", progress=False, stop=stop)
    else:
        train_stack(configs, [f"{tmp}/{s}" for s in seeds], progress=False, stop=stop)
    print(json.dumps([polls[-1] - polls[0], time.perf_counter() - start]))
"""


def seconds(args: argparse.Namespace, batch: int, seeds: list[int]) -> tuple[float, float]:
    """Wall seconds of the step loop and of the whole ``train`` (one seed) or ``train_stack`` (several), in a
    fresh process."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            RUN,
            args.preset,
            str(args.threads),
            str(args.steps),
            str(batch),
            args.device,
            *map(str, seeds),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    loop, whole = json.loads(out.stdout.strip().splitlines()[-1])
    return loop, whole


def measure(args: argparse.Namespace, batch: int) -> dict:
    """One batch size: ``--rounds`` rounds of (each model alone, the stack), alternating."""
    seeds, rounds = list(range(args.models)), []
    for _ in range(args.rounds):
        alone = [sum(t) for t in zip(*(seconds(args, batch, [s]) for s in seeds))]
        rounds.append((alone, seconds(args, batch, seeds)))
    row = {"tasks_per_batch": batch}
    for k, name in enumerate(("step_loop", "whole_run")):
        ratios = [a[k] / s[k] for a, s in rounds]
        rate = lambda t: round(args.models * args.steps / t, 1)  # noqa: E731
        row |= {
            f"{name}_alone_models_steps_per_s": rate(statistics.median(a[k] for a, _ in rounds)),
            f"{name}_stacked_models_steps_per_s": rate(statistics.median(s[k] for _, s in rounds)),
            f"{name}_alone_over_stacked": round(statistics.median(ratios), 3),
            f"{name}_alone_over_stacked_rounds_min_max": [round(min(ratios), 3), round(max(ratios), 3)],
        }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--models", type=int, default=8, help="M: models per stack (seeds 0..M-1)")
    parser.add_argument("--batches", type=int, nargs="+", default=[4, 8, 16, 64], help="tasks per step")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cuda: the runs on the GPU (each loss read back every step)")
    args = parser.parse_args()
    from ictd_interp.analyses.studies.grouping import STACK_MAX_TASKS_PER_BATCH, STACK_TASKS

    bar, rows = progress_bar(total=len(args.batches), desc="batch sizes"), []
    for batch in args.batches:
        rows.append(measure(args, batch))
        bar.update(1)
    bar.close()
    print(
        json.dumps(
            {
                "setting": vars(args),
                "rows": rows,
                "studies_rule": {"STACK_MAX_TASKS_PER_BATCH": STACK_MAX_TASKS_PER_BATCH, "STACK_TASKS": STACK_TASKS},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
