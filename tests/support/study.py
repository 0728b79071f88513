"""Shared by tests/*/test_study.py."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from ictd_interp.training.trainer import train

TINY = {
    "steps": 12,
    "tasks_per_batch": 4,
    "windows_per_task": 2,
    "n_eval_tasks": 8,
    "eval_every": 4,
    "checkpoint_every": 4,
    "n_states": 5,
    "context_len": 8,
    "n_layers": 3,
}

ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}


def spec(grid=None, seeds=(0, 1), **fixed):
    grid = {"tied": [True, False]} if grid is None else grid
    return {
        "name": "t",
        "preset": "quick",
        "seeds": list(seeds),
        "fixed": {k: v for k, v in {**TINY, **fixed}.items() if k not in grid},
        "grid": grid,
    }


def standalone(config, out: Path) -> dict:
    """The same config trained outside the study, on one torch thread like a study cell."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(config, out, progress=False)
    finally:
        torch.set_num_threads(threads)
    return load_file(str(out / "final" / "model.safetensors"))


def final_weights(cell_dir: Path) -> dict:
    return load_file(str(cell_dir / "run" / "final" / "model.safetensors"))


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _cli(*args, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-m", "ictd_interp.cli", *args],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def _wait_for(predicate, timeout=120.0):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


def _write_spec(path: Path, data: dict) -> Path:
    lines = [f'preset = "{data["preset"]}"', f"seeds = {data['seeds']}", "[fixed]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in data["fixed"].items()]
    lines += ["[grid]"] + [f"{k} = {json.dumps(v)}" for k, v in data["grid"].items()]
    path.write_text("\n".join(lines) + "\n")
    return path
