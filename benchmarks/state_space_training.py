"""One training step, and one training-time evaluation, of the `deep` preset through the positional fast path
against the state-space forward.

Usage: python benchmarks/state_space_training.py [--lengths 30 100] [--depth 48] [--rounds 5] [--threads 1]

For each context length n, the same batch (64 tasks × 17 windows, one seeded draw) goes through one training step
(loss, backward) on each path, ``--rounds`` times, alternating the paths; prints one JSON line per n with the median
seconds of each and their ratio (positional / state-space: how many times faster the state-space path steps), and the
relative difference of the two losses (the same function, float32 rounding apart); then the run's evaluation
(``training.evaluation.evaluate`` on its 256 evaluation tasks: error and kernel diagonality) once on each path,
``eval_*``. The ratios are the goal: measured in one run, never as a timed test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace

import torch

from ictd_interp import TrainConfig
from ictd_interp.models.registry import build_model
from ictd_interp.training.batch_stream import BatchStream
from ictd_interp.training.evaluation import EvalSet, evaluate
from ictd_interp.training.trainer import step_loss


def one_step(config: TrainConfig, model, batch) -> tuple[float, float]:
    """Seconds of one loss and backward, and the loss."""
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    loss = step_loss(BatchStream(config, torch.Generator(), torch.float32).objective, model, batch, None, config)
    loss.backward()
    return time.perf_counter() - start, float(loss.detach())


def measure(n: int, depth: int, rounds: int) -> dict:
    configs = {
        forward: TrainConfig.from_preset("deep", context_len=n, n_layers=depth, forward=forward)
        for forward in ("positional", "state-space")
    }
    model = build_model(configs["positional"].model)
    batches = {f: next(BatchStream(c, torch.Generator().manual_seed(0), torch.float32))[0] for f, c in configs.items()}
    times: dict[str, list[float]] = {f: [] for f in configs}
    losses: dict[str, float] = {}
    for _ in range(rounds):
        for forward, config in configs.items():
            seconds, losses[forward] = one_step(config, model, batches[forward])
            times[forward].append(seconds)
    median = {f: statistics.median(t) for f, t in times.items()}
    return {**step_times(n, depth, median, losses), **eval_times(configs["state-space"], model)}


def step_times(n: int, depth: int, median: dict[str, float], losses: dict[str, float]) -> dict:
    return {
        "context_len": n,
        "depth": depth,
        "positional_s": median["positional"],
        "state_space_s": median["state-space"],
        "speedup": median["positional"] / median["state-space"],
        "loss_relative_difference": abs(losses["positional"] - losses["state-space"]) / abs(losses["positional"]),
    }


def eval_times(config: TrainConfig, model) -> dict:
    """Seconds of one ``evaluate`` on each path, their ratio and the errors' relative difference."""
    eval_set, seconds, errors = EvalSet.build(config), {}, {}
    for state_space in (False, True):
        start = time.perf_counter()
        errors[state_space] = evaluate(model, replace(eval_set, state_space=state_space)).eval_msve
        seconds[state_space] = time.perf_counter() - start
    return {
        "eval_positional_s": seconds[False],
        "eval_state_space_s": seconds[True],
        "eval_speedup": seconds[False] / seconds[True],
        "eval_msve_relative_difference": abs(errors[False] - errors[True]) / abs(errors[False]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[30, 100])
    parser.add_argument("--depth", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for n in args.lengths:
        print(json.dumps(measure(n, args.depth, args.rounds)), flush=True)


if __name__ == "__main__":
    main()
