"""A study's cells as Ray tasks: one cell alone (``run_cell``) or cells of one shape stacked in one process
(``run_stacked_cells``, ``ictd_interp.training.stacked``), and each cell's ``status.json``.

Cells that differ only in their seed share a shape; at small batches their steps cost mostly operation overhead,
so one process stepping them together trains them faster (measured: ``benchmarks/model_stack.py``,
docs/performance.md, "Many models in one process"). At the default batch (64 tasks) a stack is slower than its
runs one by one, so a study stacks cells only at ``tasks_per_batch <= STACK_MAX_TASKS_PER_BATCH``, at most
``STACK_TASKS // tasks_per_batch`` models per stack, split over the cluster's workers (``stack_groups``).

Which cells share a stack depends on the number of workers, and a stacked model's weights equal its run alone
only up to float rounding (1e-5 relative in float32 after 12 steps, tested): a cell's weights are reproduced bit
for bit by the same grouping at the same thread count, which its ``status.json`` records (``stacked_with``).
A stacked cell's ``wall_time`` is its stack's, from the stack's start to the end of the cell's analysis.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import time
import traceback
from pathlib import Path
from typing import Any

from analyses.studies.spec import Cell, StudySpecError

STATUS_FILE = "status.json"
STACK_MAX_TASKS_PER_BATCH = 16  # where a stack's step loop wins: 2.1x at 4 tasks, 1.25x at 16; ties at 32, 0.76x at 64
STACK_TASKS = 128  # the most tasks of all a stack's models per step measured winning (4 tasks x 32 models: 2.2x)


def stack_groups(cells: list[Cell], workers: int) -> list[list[Cell]]:
    """``cells`` in units of work: a list of one cell runs alone (``run_cell``), a longer one as a stack
    (``run_stacked_cells``). Cells of one shape are split into near-equal stacks, as many as their share of the
    ``workers`` (so every worker has a unit while cells remain) and at least enough that none steps more than
    ``STACK_TASKS`` tasks; a share of one cell per stack runs them alone. Order is kept within each unit."""
    from ictd_interp.training.stacked import stack_refusal

    shapes: list[list[Cell]] = []
    for cell in cells:
        fits = cell.config.tasks_per_batch <= STACK_MAX_TASKS_PER_BATCH and stack_refusal([cell.config]) is None
        group = next((g for g in shapes if fits and stack_refusal([g[0].config, cell.config]) is None), None)
        if group is None:
            shapes.append([cell])
        else:
            group.append(cell)
    stackable = sum(len(g) for g in shapes if len(g) > 1)
    units = []
    for group in shapes:
        share = max(1, workers * len(group) // max(stackable, 1))
        parts = min(len(group), max(share, math.ceil(len(group) * group[0].config.tasks_per_batch / STACK_TASKS)))
        bounds = [len(group) * k // parts for k in range(parts + 1)]
        units.extend(group[a:b] for a, b in zip(bounds, bounds[1:]))
    return units


def run_stacked_cells(cell_dirs: list[str], configs: list[dict[str, Any]], stop_file: str,
                      keep_freed_memory: bool = False) -> list[dict[str, Any]]:
    """Train cells of one shape as one stack (or resume them together), then analyse each; runs inside a Ray
    worker on one torch thread. Cells whose runs cannot continue together (some started, some not, no step at
    which all have a checkpoint, a stored run with other settings) or whose stack stopped on one model's
    non-finite loss continue one by one with ``run_cell``, from their checkpoints: the diverging one fails
    alone, the others finish."""
    import torch

    from analyses.analyze import analyze
    from ictd_interp.config.train import TrainConfig
    from ictd_interp.io.checkpoint import CheckpointError
    from ictd_interp.training import run_folder
    from ictd_interp.training.stacked import resume_stack, train_stack
    from ictd_interp.training.trainer import TrainingDiverged

    torch.set_num_threads(1)
    cells, started_at = [Path(c) for c in cell_dirs], time.perf_counter()
    run_dirs, stop = [c / "run" for c in cells], (lambda: Path(stop_file).exists())
    if stop():
        return [write_status(c, "interrupted") for c in cells]
    one_by_one = lambda: [run_cell(str(c), cfg, stop_file, keep_freed_memory)  # noqa: E731
                          for c, cfg in zip(cells, configs)]
    cfgs = [TrainConfig.from_dict(c) for c in configs]
    for run_dir in run_dirs:
        if run_folder.config_path(run_dir).exists() and run_folder.latest_checkpoint(run_dir) is None:
            shutil.rmtree(run_dir)  # stopped before its first checkpoint: only step 0's log to redo
    started = [run_folder.config_path(r).exists() for r in run_dirs]
    if any(started) and (not all(started) or any(run_folder.load_run_config(r).differences(c)
                                                 for r, c in zip(run_dirs, cfgs))):
        return one_by_one()
    earlier = {c: attempts(c) for c in cells}
    together = {"models_in_process": len(cells), "stacked_with": [c.name for c in cells]}
    for cell in cells:
        write_status(cell, "running", earlier_attempts=earlier[cell], **together)
    try:
        runs = (resume_stack(run_dirs, progress=False, stop=stop, keep_freed_memory=keep_freed_memory) if all(started)
                else train_stack(cfgs, run_dirs, progress=False, stop=stop, keep_freed_memory=keep_freed_memory))
    except CheckpointError:  # no step at which all their checkpoints stand: each continues alone
        return one_by_one()
    except TrainingDiverged:  # one model's loss went non-finite: the others go on alone, it fails alone
        return one_by_one()
    except Exception as err:
        trace = traceback.format_exc(limit=-3)
        wall = time.perf_counter() - started_at
        return [write_status(c, "failed", error=f"{type(err).__name__}: {err}", trace=trace, wall_time=wall,
                             earlier_attempts=earlier[c], **together) for c in cells]
    statuses = []
    for cell, run in zip(cells, runs):
        info = {"wall_time": time.perf_counter() - started_at, "earlier_attempts": earlier[cell], **together}
        if run.interrupted:
            statuses.append(write_status(cell, "interrupted", **info))
            continue
        try:
            analyze(run.out_dir, cell / "analysis", neu=False, draw=False)
        except Exception as err:
            statuses.append(write_status(cell, "failed", error=f"{type(err).__name__}: {err}",
                                          trace=traceback.format_exc(limit=-3), **info))
            continue
        statuses.append(write_status(cell, "done", **info))
    return statuses


def run_cell(cell_dir: str, config: dict[str, Any], stop_file: str, keep_freed_memory: bool = False) -> dict[str, Any]:
    """Train (or resume) and analyse one cell; runs inside a Ray worker on one torch thread."""
    import torch

    from analyses.analyze import analyze
    from ictd_interp.training import run_folder
    from ictd_interp.training.trainer import resume, train
    from ictd_interp.config.train import TrainConfig

    torch.set_num_threads(1)
    cell, started = Path(cell_dir), time.perf_counter()
    run_dir, stop = cell / "run", (lambda: Path(stop_file).exists())
    if stop():
        return write_status(cell, "interrupted")
    earlier = attempts(cell)  # a retry after a killed worker: say so, and resume from the last checkpoint
    write_status(cell, "running", earlier_attempts=earlier)
    try:
        cfg = TrainConfig.from_dict(config)
        if run_folder.config_path(run_dir).exists() and run_folder.latest_checkpoint(run_dir) is None:
            shutil.rmtree(run_dir)  # stopped before its first checkpoint: only step 0's log to redo
        if run_folder.config_path(run_dir).exists():
            changed = run_folder.load_run_config(run_dir).differences(cfg)
            if changed:
                raise StudySpecError(f"{run_dir}: holds a run with other settings ({'; '.join(changed)})")
            run = resume(run_dir, progress=False, stop=stop, keep_freed_memory=keep_freed_memory)
        else:
            run = train(cfg, run_dir, progress=False, stop=stop, keep_freed_memory=keep_freed_memory)
        if run.interrupted:
            return write_status(cell, "interrupted", wall_time=time.perf_counter() - started)
        # NEU per (n, L): analyses.metrics.neu.neu_grid, not per cell; figures: the study's, across cells
        analyze(run_dir, cell / "analysis", neu=False, draw=False)
    except Exception as err:
        trace = traceback.format_exc(limit=-3)
        return write_status(cell, "failed", error=f"{type(err).__name__}: {err}", trace=trace,
                             wall_time=time.perf_counter() - started, earlier_attempts=earlier)
    return write_status(cell, "done", wall_time=time.perf_counter() - started, earlier_attempts=earlier)


def is_running(status: dict[str, Any]) -> bool:
    """A cell counts as running only while the process its status names is alive (a killed worker leaves
    "running" behind until Ray retries the cell). On a remote node the pid is not ours to check."""
    if status.get("status") != "running":
        return False
    if status.get("host") not in (None, socket.gethostname()):
        return True
    try:
        os.kill(int(status["pid"]), 0)
    except (OSError, KeyError, TypeError, ValueError):
        return False
    return True


def attempts(cell: Path) -> list[dict[str, Any]]:
    """Earlier attempts at a cell whose worker died, kept in its status.json."""
    status = read_status(cell)
    earlier = list(status.get("earlier_attempts", []))
    if (
        status.get("status") == "running"
        and not is_running(status)
        and status.get("pid") not in [a.get("pid") for a in earlier]
    ):
        earlier.append({"pid": status.get("pid"), "outcome": "the worker process died (killed or out of memory)"})
    return earlier


def write_status(cell: Path, status: str, **info: Any) -> dict[str, Any]:
    """``status.json``: running | retrying | done | failed | interrupted, with the pid (this process's
    unless given) and host of the process, so a reader can find a cell's process."""
    cell.mkdir(parents=True, exist_ok=True)
    entry = {"status": status, "pid": os.getpid(), "host": socket.gethostname(), "error": None, **info}
    tmp = cell / f".{STATUS_FILE}.tmp"
    tmp.write_text(json.dumps(entry, indent=1))
    os.replace(tmp, cell / STATUS_FILE)
    return entry


def read_status(cell: Path) -> dict[str, Any]:
    path = cell / STATUS_FILE
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except json.JSONDecodeError:
        return {}  # a status being rewritten: treated as unknown, re-read on the next poll
