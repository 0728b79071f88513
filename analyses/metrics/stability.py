"""Is a run's verdict a property of the run or of its last step? The first level of the verdict ladder (learns in
context: below the constant and first-visit Monte Carlo, paired 95% t intervals over tasks) at every checkpoint of
the last ``WINDOW`` of the run's steps, on the run's own evaluation tasks (docs/theory.md §7b).

Rule: the verdict **holds over the window** when every checkpoint in it passes; it is **unstable** when some pass
and some do not (the share that pass, with its Wilson interval, and the worst checkpoint's MSVE are reported); a
window with fewer than ``MIN_CHECKPOINTS`` checkpoints is **too short to judge** (a preset that wants this verdict
checkpoints often enough: ``checkpoint_every`` at most a twenty-fifth of its steps).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from ictd_interp.analyses.metrics.baselines import constant, error_parts, first_level, first_visit_mc
from ictd_interp.analyses.metrics.intervals import Interval, paired, proportion_interval
from ictd_interp.config.train import TrainConfig
from ictd_interp.io import run_folder
from ictd_interp.models.loading import load_checkpoint
from ictd_interp.training.evaluation import EvalSet

WINDOW = 0.2  # the last 20% of the run's steps
MIN_CHECKPOINTS = 5


@dataclass(kw_only=True)
class OverTraining:
    """The first level's verdict at each checkpoint of the window, and the rule's answer."""

    steps: list[int]
    learns: list[bool]
    msve: list[float]
    share: Interval  # of the window's checkpoints that learn in context (Wilson 95%)
    worst_msve: float
    worst_step: int
    verdict: str  # "holds over the window" | "unstable" | "fails over the window" | "too short to judge"
    rule: str = (
        f"the learns-in-context verdict at every checkpoint of the last {WINDOW:.0%} of the steps: holds when all "
        f"pass, unstable when some do, too short to judge under {MIN_CHECKPOINTS} checkpoints"
    )


def window_checkpoints(run_dir: Path, steps: int) -> list[Path]:
    """The run's checkpoints (its final weights included) from step ``(1 - WINDOW) * steps`` on."""
    start = (1 - WINDOW) * steps
    found = {run_folder.checkpoint_step(c): c for c in run_folder.checkpoints(run_dir)}
    if run_folder.final_dir(run_dir).exists():
        found[steps] = run_folder.final_dir(run_dir)
    return [found[s] for s in sorted(found) if s >= start]


@torch.no_grad()
def over_training(run_dir: Path, config: TrainConfig) -> OverTraining:
    """The window's verdicts of the run in ``run_dir`` (trained with ``config``)."""
    tasks = EvalSet.build(replace(config, device="cpu")).tasks
    gamma = config.tasks.gamma
    base = {fn.__name__: error_parts(fn(tasks, gamma), tasks)["msve"] for fn in (constant, first_visit_mc)}
    steps, learns, msve = [], [], []
    for ckpt in window_checkpoints(Path(run_dir), config.steps):
        model = load_checkpoint(ckpt, device="cpu").model
        err = error_parts(model(tasks.prompt), tasks)["msve"]
        steps.append(config.steps if ckpt.name == "final" else run_folder.checkpoint_step(ckpt))
        learns.append(first_level({name: paired(err, b) for name, b in base.items()}) is True)
        msve.append(float(np.mean(err)))
    return judged(steps, learns, msve)


def judged(steps: list[int], learns: list[bool], msve: list[float]) -> OverTraining:
    """The rule (this module's docstring) on the window's verdicts."""
    if not steps:
        raise ValueError("over_training: the run has no checkpoint in its last 20% of steps")
    finite = [m if np.isfinite(m) else float("inf") for m in msve]
    worst = int(np.argmax(finite))
    if len(steps) < MIN_CHECKPOINTS:
        verdict = "too short to judge"
    elif all(learns):
        verdict = "holds over the window"
    elif any(learns):
        verdict = "unstable"
    else:
        verdict = "fails over the window"
    return OverTraining(
        steps=steps,
        learns=learns,
        msve=msve,
        share=proportion_interval(sum(learns), len(learns)),
        worst_msve=msve[worst],
        worst_step=steps[worst],
        verdict=verdict,
    )


def over_training_sentence(window: OverTraining) -> str:
    """``Over training: holds over the window — 5 of 5 checkpoints from step 1,200 learn in context ...``."""
    return (
        f"Over training: **{window.verdict}** — {sum(window.learns)} of {len(window.steps)} checkpoints from step "
        f"{window.steps[0]:,} learn in context (Wilson 95% [{window.share.lo:.0%}, {window.share.hi:.0%}]); the "
        f"worst MSVE {window.worst_msve:.3g} at step {window.worst_step:,}."
    )
