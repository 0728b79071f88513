"""Training-step time of this tree against another commit, measured alternately in one sitting.

Usage: python benchmarks/against.py [REV] [--rounds 5] [--steps 20] [--threads 2] [--compile]

REV (default: the commit before the speed work, 641fead) is checked out into a temporary git
worktree; each round runs one fresh process per tree (alternately, so machine load drifts out of
the ratio) that times, for three models (``standard-quick``, 16 tasks x 17 windows; the stylised
``quick`` (tied) and ``paper`` (per-layer) models, 64 x 17):

* ``model``: the TD model step (forward + backward on a fixed batch);
* ``train``: the whole training step as each tree's own ``train()`` runs it (fresh data, forward,
  backward, optimiser): the wall time between its evaluations at steps ``S`` and ``3 S`` over ``2 S``
  (one evaluation of 256 tasks included, a few per cent of it);
* ``products``: the model step's matrix products alone, replayed (``benchmarks/products.py``, the same
  recorder in both trees), and ``train_ceiling``: the other tree's ``train`` step over this tree's
  products, the most any change that keeps this tree's matrix products could gain against it.

* ``--compile``: also this tree's compiled model step (``compile_fast_path()``) and whole training step
  (``train()`` with ``TrainConfig.compile``; compiling happens in its first step, outside the timed
  steps), ``model_*_compiled`` and ``train_*_compiled``, against the other tree's eager ones (where that
  tree has no such option); timed after every eager measurement of the process.

Prints the median ms per step of each tree and the ratio old / new (> 1: this tree is faster), as the
median of the per-round ratios and as the ratio of the medians. Only API both trees have is used
(presets, ``build_model``, ``window_batch``, ``td_loss``, ``train``); both keep freed memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "641fead"

PROBE = """
import json, sys, tempfile, time, torch
from ictd_interp.config.train import TrainConfig
from ictd_interp.models.registry import build_model
from ictd_interp.training.allocator import keep_freed_memory
from ictd_interp.training.batches import window_batch
from ictd_interp.training.objectives import td_loss
from ictd_interp.training.trainer import train
from products import MatrixProducts
keep_freed_memory(); torch.set_num_threads(int(sys.argv[1])); steps = int(sys.argv[2])
MODELS = (("standard", "standard-quick", {}), ("tied", "quick", {"tied": True}), ("per_layer", "paper", {}))


def train_ms(preset, flat, **extra):
    run_cfg = TrainConfig.from_preset(preset, steps=3 * steps, eval_every=steps, checkpoint_every=10**6,
                                      **flat, **extra)
    with tempfile.TemporaryDirectory() as tmp:
        wall = [m["wall_time"] for m in train(run_cfg, tmp + "/run", progress=False, keep_freed_memory=True).metrics]
    return (wall[3] - wall[1]) / (2 * steps) * 1e3


def model_ms(model, batch):
    return step_ms(lambda: td_loss(model, batch).backward())


def step_ms(step):
    for _ in range(3):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps * 1e3


out, kept = {}, {}
for name, preset, flat in MODELS:
    out["train_" + name] = train_ms(preset, flat)
    cfg = TrainConfig.from_preset(preset, **flat)
    gen = torch.Generator().manual_seed(0)
    batch = window_batch(cfg.tasks, cfg.tasks_per_batch, cfg.windows_per_task + 1, generator=gen)
    batch = batch.to("cpu", torch.float32)
    model = build_model(cfg.model)
    out["model_" + name] = model_ms(model, batch)
    with MatrixProducts() as products:
        td_loss(model, batch).backward()
    out["products_" + name] = step_ms(products.replay)
    kept[name] = (model, batch)
# compiled last: once a process has compiled, its eager steps run slower (benchmarks/train_throughput.py)
for name, preset, flat in MODELS:
    model, batch = kept[name]
    if sys.argv[3] == "compile" and hasattr(model, "compile_fast_path"):
        model.compile_fast_path()
        out["model_" + name + "_compiled"] = model_ms(model, batch)
        out["train_" + name + "_compiled"] = train_ms(preset, flat, compile=True)
print(json.dumps(out))
"""


def time_tree(tree: Path, threads: int, steps: int, compiled: bool) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT / "benchmarks")]),
    }  # products.py: this tree's
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(threads), str(steps), "compile" if compiled else "eager"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", nargs="?", default=BASELINE)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="also time this tree's compiled model steps")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(old), args.rev], cwd=ROOT, check=True, capture_output=True
        )
        try:
            rounds = [
                (
                    time_tree(old, args.threads, args.steps, args.compile),
                    time_tree(ROOT, args.threads, args.steps, args.compile),
                )
                for _ in range(args.rounds)
            ]
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=True)
    result = {"against": args.rev, "rounds": args.rounds, "threads": args.threads}
    for name in rounds[0][1]:
        base = name if name in rounds[0][0] else name.removesuffix("_compiled")  # compiled: against the old eager
        old_ms = statistics.median(o[base] for o, _ in rounds)
        new_ms = statistics.median(n[name] for _, n in rounds)
        result[name] = {
            "old_ms": round(old_ms, 2),
            "new_ms": round(new_ms, 2),
            "old_over_new": round(statistics.median(o[base] / n[name] for o, n in rounds), 3),
            "ratio_of_medians": round(old_ms / new_ms, 3),
        }
    models = [k.removeprefix("products_") for k in rounds[0][1] if k.startswith("products_")]
    result["train_ceiling"] = {
        m: round(statistics.median(o["train_" + m] / n["products_" + m] for o, n in rounds), 3) for m in models
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
