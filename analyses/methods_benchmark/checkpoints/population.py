"""The checkpoint track's population: trained checkpoints with a label from function space and their objective.

Every finished run of a study folder (``cells/*/run``, the studies' engine), or a run folder of ``ictd-interp
train`` (alone or a folder of them), gives the track ``len(FRACTIONS)`` checkpoints
along its training (the saved step nearest each fraction of its steps, the last one its final weights) and its
untrained initialisation (``build_model`` of its config: objective ``untrained``). Checkpoints of one run share a
seed and a data stream, so the scores' intervals resample runs, not checkpoints (``scores``).

**Label** (``label``): the verdict ladder's level on held-out contexts (docs/theory.md §7b), the first level
decided on ``N_TASKS`` evaluation tasks of the run's own distribution (``baselines.first_level``), the ladder on its
named draw:

* ``runs TD`` — the ladder's top level;
* ``stopped early`` — learns in context (or beats Monte Carlo) but does not run TD;
* ``learns nothing`` — does not learn in context;
* ``undecided`` — the first level's sample cannot tell; left out of every score and counted.

**Objective**: ``td``, ``mc``, ``supervised``, ``shuffled`` (the TD objective on rewards permuted in time) or
``untrained``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ictd_interp.analyses.metrics.baselines import REQUIRED, error_parts, first_level
from ictd_interp.analyses.metrics.draws import draw_seed
from ictd_interp.analyses.metrics.intervals import paired
from ictd_interp.analyses.metrics.ladder import ESTIMATORS, LEVELS, UNDECIDED, ladder
from ictd_interp.config.train import TrainConfig
from ictd_interp.io import run_folder
from ictd_interp.models.registry import HookedModel
from ictd_interp.tasks.sampling import TaskBatch

FRACTIONS = (0.2, 0.6, 1.0)  # where along training a run's checkpoints are taken
N_TASKS = 256  # the first level's sample (the ladder's own is ladder.LADDER_TASKS)
LABELS = ("runs TD", "stopped early", "learns nothing")
OBJECTIVES = ("td", "mc", "supervised", "shuffled", "untrained")
INIT = 0  # the step of the untrained initialisation


@dataclass(frozen=True)
class Entry:
    """One checkpoint: ``run`` names its run (``study/cell``, the unit the intervals resample), ``step`` its step
    (``INIT``: the initialisation), ``folder`` its checkpoint folder (the run folder for the initialisation)."""

    run: str
    recipe: str
    step: int
    folder: str
    objective: str


def objective_of(config: TrainConfig) -> str:
    return "shuffled" if config.shuffle_rewards else config.objective


def run_entries(study: str, name: str, run: Path) -> list[Entry]:
    """The checkpoints a finished run (``run``, a run folder; ``name`` its cell's or folder's name) gives the track
    (``FRACTIONS`` of its steps, and its initialisation)."""
    config = run_folder.load_run_config(run)
    saved = {run_folder.checkpoint_step(p): p for p in run_folder.checkpoints(run)}
    if not saved:
        raise ValueError(f"{run}: no saved checkpoints; the track needs a finished run")
    recipe = name.split("__")[0]
    name = f"{study}/{name}"
    entries = [Entry(name, recipe, INIT, str(run), "untrained")]
    for fraction in FRACTIONS:
        step = min(saved, key=lambda s: (abs(s - fraction * config.steps), -s))
        if step not in [e.step for e in entries]:
            entries.append(Entry(name, recipe, step, str(saved[step]), objective_of(config)))
    return entries


def class_of(level: str) -> str:
    """The track's label of a ladder level."""
    if level == UNDECIDED:
        return UNDECIDED
    if level == LEVELS[3]:
        return LABELS[0]
    return LABELS[2] if level == LEVELS[0] else LABELS[1]


@torch.no_grad()
def label(model: HookedModel, config: TrainConfig, tasks: TaskBatch) -> dict[str, Any]:
    """The checkpoint's ladder level and the track's label; ``tasks``: ``N_TASKS`` evaluation tasks of
    ``config.tasks`` at ``config.eval_seed``."""
    gamma = config.tasks.gamma
    model_err = error_parts(model(tasks.prompt.to(model.device)), tasks)["msve"]
    minus = {name: paired(model_err, error_parts(ESTIMATORS[name](tasks, gamma), tasks)["msve"]) for name in REQUIRED}
    learns = first_level(minus)
    lad = ladder(model, config.tasks, draw_seed(config.eval_seed, "ladder"), learns, top=False)
    return {"level": lad.level, "label": class_of(lad.level), "msve": float(model_err.mean())}
