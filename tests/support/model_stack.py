"""Shared by tests/*/test_model_stack.py."""

from __future__ import annotations

import torch

SMALL = {
    "steps": 24,
    "eval_every": 8,
    "checkpoint_every": 8,
    "tasks_per_batch": 4,
    "windows_per_task": 3,
    "n_eval_tasks": 8,
    "n_states": 5,
    "context_len": 6,
    "dtype": "float64",
}


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach(), b.detach()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))
