"""A study's cells as Ray tasks: one cell alone (``run_cell``) or cells of one shape stacked in one process
(``run_stacked_cells``, ``ictd_interp.training.stacked``), and each cell's ``status.json``.

Cells of one shape (``stacked.FREE``: seed, rate, schedule, steps, clipping, task pool may differ; with the device
sampler also the objective and sampled depths: ``stack_refusal``) share a stack; at small batches their steps cost
mostly operation overhead,
so one process stepping them together trains them faster (measured: ``benchmarks/model_stack.py``,
docs/performance.md, "Many models in one process"). At the default batch (64 tasks) a stack is slower than its
runs one by one, so a study stacks cells only at small batches, split over the cluster's workers
(``grouping.stack_groups``).

Which cells share a stack depends on the number of workers, and a stacked model's weights equal its run alone
only up to float rounding (1e-5 relative in float32 after 12 steps, tested). So each cell's ``status.json``
records how it was trained, ``trained_in``: one entry per stretch, the cells stepped together (itself alone,
or its stack) ``from_step`` ``until_step``; a cell is reproduced bit for bit by the same stretches at the same
thread count. A re-run keeps a started cell in its last stretch's unit (``grouping.stack_groups``' ``previous``), so a
study stopped and resumed trains as the same study uninterrupted; a cell trained before ``trained_in`` was
recorded starts with a stretch of unknown cells (``None``) and continues alone. Finished cells are never redone,
not even by a retried unit. A stacked cell's ``wall_time`` is its
unit's, from the unit's start to the end of the cell's analysis.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from ictd_interp.analyses.studies.spec import StudySpecError
from ictd_interp.io.threads import worker_threads

if TYPE_CHECKING:
    from ictd_interp.config.train import TrainConfig

STATUS_FILE = "status.json"
# a cell's status (status.json): running, then trained (a GPU unit's, waiting for its analysis), done, failed or
# interrupted; the one home of these names
RUNNING, TRAINED, DONE, FAILED, INTERRUPTED = "running", "trained", "done", "failed", "interrupted"
FINAL = (DONE, FAILED, INTERRUPTED)
TRAINING_OVER = (DONE, TRAINED)  # a cell whose training is over: TRAINED waits for its analysis


def run_stacked_cells(
    cell_dirs: list[str],
    configs: list[dict[str, Any]],
    stop_file: str,
    keep_freed_memory: bool = False,
    analyse: bool = True,
) -> list[dict[str, Any]]:
    """Train cells of one shape as one stack (or resume them together), then analyse each; runs inside a Ray
    worker on one torch thread. Cells whose runs cannot continue together (some started, some not, no step at
    which all have a checkpoint, a stored run with other settings, a last stretch in another unit) or whose
    stack stopped on one model's non-finite loss continue one by one with ``run_cell``, from their
    checkpoints: the diverging one fails alone, the others finish. ``analyse=False`` (a GPU unit) leaves each cell
    ``trained`` for ``units.analyse_cell`` to analyse in a CPU task, so the GPU is not held meanwhile."""
    from ictd_interp.config.train import TrainConfig
    from ictd_interp.training.allocator import apply_allocator_choice

    worker_threads()
    apply_allocator_choice(keep_freed_memory)
    cells, started_at = [Path(c) for c in cell_dirs], time.perf_counter()
    if Path(stop_file).exists():
        return [write_status(c, INTERRUPTED) for c in cells]
    one_by_one = lambda: [
        run_cell(str(c), cfg, stop_file, keep_freed_memory, started_at, analyse)  # noqa: E731
        for c, cfg in zip(cells, configs)
    ]
    if any(read_status(c).get("status") in TRAINING_OVER for c in cells):  # a retry after some finished: never redone
        return one_by_one()
    cfgs = [TrainConfig.from_dict(c) for c in configs]
    started = _stack_start(cells, cfgs)
    if started is None:
        return one_by_one()
    return _train_as_stack(cells, cfgs, all(started), stop_file, one_by_one, started_at, analyse)


def _train_as_stack(
    cells: list[Path],
    cfgs: list["TrainConfig"],
    resuming: bool,
    stop_file: str,
    one_by_one: Callable[[], list[dict[str, Any]]],
    started_at: float,
    analyse: bool,
) -> list[dict[str, Any]]:
    """``run_stacked_cells``'s stack: opened (``resuming``: reopened at the step its runs share), stepped and each
    cell analysed; ``one_by_one()`` where the runs cannot go on together, every cell failed on any other error."""
    from ictd_interp.io.checkpoint import CheckpointError
    from ictd_interp.training.stacked import open_stack, reopen_stack, step_stack
    from ictd_interp.training.trainer import TrainingDiverged

    run_dirs, names = [c / "run" for c in cells], [c.name for c in cells]
    earlier, together, paths = {c: attempts(c) for c in cells}, {"models_in_process": len(cells)}, {}

    def failed(err: Exception) -> list[dict[str, Any]]:
        wall = time.perf_counter() - started_at
        return [
            record_failure(
                c,
                err,
                wall_time=wall,
                earlier_attempts=earlier[c],
                **together,
                **({"trained_in": ended(paths[c], c / "run")} if c in paths else {}),
            )
            for c in cells
        ]

    try:
        loops = reopen_stack(run_dirs) if resuming else open_stack(cfgs, run_dirs)
    except CheckpointError:  # no step at which all their checkpoints stand: each continues alone
        return one_by_one()
    except Exception as err:
        return failed(err)
    for cell in cells:
        paths[cell] = trained_in(cell, loops[0].run.step, names)
        write_status(cell, RUNNING, earlier_attempts=earlier[cell], trained_in=paths[cell], **together)
    try:
        runs = step_stack(loops, progress=False, stop=lambda: Path(stop_file).exists())
    except TrainingDiverged:  # one model's loss went non-finite: the others go on alone, it fails alone
        for cell in cells:
            write_status(cell, RUNNING, earlier_attempts=earlier[cell], trained_in=ended(paths[cell], cell / "run"))
        return one_by_one()
    except Exception as err:
        return failed(err)
    return [
        _analyse_stacked(
            cell,
            run,
            {
                "wall_time": time.perf_counter() - started_at,
                "earlier_attempts": earlier[cell],
                "trained_in": ended(paths[cell], run.step),
                **together,
            },
            analyse,
        )
        for cell, run in zip(cells, runs)
    ]


def _stack_start(cells: list[Path], cfgs: list) -> Optional[list[bool]]:
    """Whether each cell's run has begun, once the stack can (re)start together; None when the cells must
    continue one by one (some started and some not after another unit stepped them, or a stored run holds other
    settings). Runs stopped before their first checkpoint are cleared; if this unit was killed between its runs'
    first checkpoints, every run starts again from step 0."""
    from ictd_interp.io import run_folder

    run_dirs, names = [c / "run" for c in cells], [c.name for c in cells]
    for run_dir in run_dirs:
        if run_folder.config_path(run_dir).exists() and run_folder.latest_checkpoint(run_dir) is None:
            shutil.rmtree(run_dir)  # stopped before its first checkpoint: only step 0's log to redo
    started = [run_folder.config_path(r).exists() for r in run_dirs]
    ours = all(sorted(last_unit(c) or names) == sorted(names) for c in cells)  # last stepped as this unit
    if ours and any(started) and not all(started):  # killed between the runs' first checkpoints: all from step 0
        for run_dir in (r for r, begun in zip(run_dirs, started) if begun):
            set_aside_run(run_dir)
        started = [False] * len(cells)
    if any(started) and (
        not all(started)
        or not ours
        or any(run_folder.load_run_config(r).differences(c) for r, c in zip(run_dirs, cfgs))
    ):
        return None
    return started


def record_failure(cell: Path, err: Exception, **info: Any) -> dict[str, Any]:
    """The cell's status after ``err`` (raised in the ``except`` block this is called from: its trace is kept)."""
    trace = traceback.format_exc(limit=-3)
    return write_status(cell, FAILED, error=f"{type(err).__name__}: {err}", trace=trace, **info)


def _loop_for(run_dir: Path, cfg):
    """The cell's training loop: its stored run reopened at its last checkpoint (refused, naming the folder, when
    it holds other settings), or a new run."""
    from ictd_interp.io import run_folder
    from ictd_interp.training.trainer import reopen_loop, rewind, start_loop

    if not run_folder.config_path(run_dir).exists():
        return start_loop(cfg, run_dir)
    changed = run_folder.load_run_config(run_dir).differences(cfg)
    if changed:
        raise StudySpecError(f"{run_dir}: holds a run with other settings ({'; '.join(changed)})")
    return rewind(reopen_loop(run_dir))


def _analyse_stacked(cell: Path, run, info: dict[str, Any], analyse: bool = True) -> dict[str, Any]:
    """A stacked cell's status once its training stopped: interrupted, trained (``analyse=False``), or analysed
    (done or failed)."""
    from ictd_interp.analyses.analyze import analyze

    if run.interrupted or not analyse:
        return write_status(cell, INTERRUPTED if run.interrupted else TRAINED, **info)
    try:
        analyze(run.out_dir, cell / "analysis", neu=False, draw=False)
    except Exception as err:
        return record_failure(cell, err, **info)
    return write_status(cell, DONE, **info)


def run_cell(
    cell_dir: str,
    config: dict[str, Any],
    stop_file: str,
    keep_freed_memory: bool = False,
    started_at: Optional[float] = None,
    analyse: bool = True,
) -> dict[str, Any]:
    """Train (or resume) and analyse one cell; runs inside a Ray worker on one torch thread (``started_at``: the
    start of its unit, when it continues a stack's work; ``analyse=False``: leave it ``trained``)."""
    from ictd_interp.analyses.analyze import analyze
    from ictd_interp.config.train import TrainConfig
    from ictd_interp.io import run_folder
    from ictd_interp.training.allocator import apply_allocator_choice
    from ictd_interp.training.trainer import run_loop

    worker_threads()
    apply_allocator_choice(keep_freed_memory)
    cell, started = Path(cell_dir), time.perf_counter() if started_at is None else started_at
    run_dir, stop, path = cell / "run", (lambda: Path(stop_file).exists()), None
    before = read_status(cell).get("status")
    if before == DONE or before == TRAINED and not analyse:  # a unit's retry after this cell finished
        return read_status(cell)
    if stop():
        return write_status(cell, INTERRUPTED)
    earlier = attempts(cell)  # a retry after a killed worker: say so, and resume from the last checkpoint
    write_status(cell, RUNNING, earlier_attempts=earlier)
    try:
        cfg = TrainConfig.from_dict(config)
        if run_folder.config_path(run_dir).exists() and run_folder.latest_checkpoint(run_dir) is None:
            shutil.rmtree(run_dir)  # stopped before its first checkpoint: only step 0's log to redo
        if run_folder.final_dir(run_dir).exists():  # trained, its analysis cut short (a killed worker): analyse
            if analyse:
                analyze(run_dir, cell / "analysis", neu=False, draw=False)
            wall = time.perf_counter() - started
            return write_status(cell, DONE if analyse else TRAINED, wall_time=wall, earlier_attempts=earlier)
        loop = _loop_for(run_dir, cfg)
        path = trained_in(cell, loop.run.step, [cell.name])
        write_status(cell, RUNNING, earlier_attempts=earlier, trained_in=path, models_in_process=1)
        run = run_loop(loop, progress=False, stop=stop)
        path = ended(path, run.step)
        if run.interrupted:
            return write_status(
                cell, INTERRUPTED, wall_time=time.perf_counter() - started, trained_in=path, models_in_process=1
            )
        # NEU per (n, L): ictd_interp.analyses.metrics.neu.neu_grid, not per cell; figures: the study's, across cells
        if analyse:
            analyze(run_dir, cell / "analysis", neu=False, draw=False)
    except Exception as err:
        trained = {} if path is None else {"trained_in": ended(path, run_dir)}
        return record_failure(cell, err, wall_time=time.perf_counter() - started, earlier_attempts=earlier, **trained)
    return write_status(
        cell,
        DONE if analyse else TRAINED,
        wall_time=time.perf_counter() - started,
        earlier_attempts=earlier,
        trained_in=path,
        models_in_process=1,
    )


def trained_in(cell: Path, step: int, cells: list[str]) -> list[dict[str, Any]]:
    """The cell's stretches so far (its ``status.json``'s ``trained_in``) up to ``step``, where it continues
    (a resume from an earlier checkpoint drops what came after), and a new stretch from there with ``cells``.
    A run trained before ``trained_in`` was recorded starts with a stretch of unknown cells (``None``)."""
    status, path = read_status(cell), []
    unknown = [{"cells": None, "from_step": 0, "until_step": None}] if step > 0 else []  # before trained_in was kept
    for stretch in status.get("trained_in", unknown):
        if stretch["from_step"] >= step:
            break
        end = stretch["until_step"]
        path.append({**stretch, "until_step": step if end is None else min(end, step)})
    return [*path, {"cells": cells, "from_step": step, "until_step": None}]


def ended(path: list[dict[str, Any]], at: int | Path) -> list[dict[str, Any]]:
    """``path`` with its last stretch ended at step ``at``, or at its run folder's latest checkpoint (where the
    next attempt continues); a stretch that trained nothing is dropped."""
    if isinstance(at, Path):
        from ictd_interp.io import run_folder

        latest = run_folder.latest_checkpoint(at)
        at = 0 if latest is None else run_folder.checkpoint_step(latest)
    last = {**path[-1], "until_step": at}
    return [*path[:-1], last] if last["until_step"] > last["from_step"] else path[:-1]


def last_unit(cell: Path) -> Optional[list[str]]:
    """The cells a started cell was last stepped with (itself included); itself alone for a run trained before
    ``trained_in`` was recorded (its stack unknown); None for a cell not started."""
    from ictd_interp.io import run_folder

    path = read_status(cell).get("trained_in")
    if path and path[-1]["cells"] is not None:
        return path[-1]["cells"]
    return [cell.name] if run_folder.latest_checkpoint(cell / "run") is not None else None


def set_aside_run(run_dir: Path) -> Path:
    """Rename a run folder a unit starts again from step 0 (``superseded_run``, numbered if taken): kept, never
    read again."""
    target, k = run_dir.with_name(f"superseded_{run_dir.name}"), 1
    while target.exists():
        target, k = run_dir.with_name(f"superseded_{run_dir.name}.{k}"), k + 1
    return run_dir.rename(target)


def is_running(status: dict[str, Any]) -> bool:
    """A cell counts as running only while the process its status names is alive (a killed worker leaves
    "running" behind until Ray retries the cell). On a remote node the pid is not ours to check."""
    if status.get("status") != RUNNING:
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
        status.get("status") == RUNNING
        and not is_running(status)
        and status.get("pid") not in [a.get("pid") for a in earlier]
    ):
        earlier.append({"pid": status.get("pid"), "outcome": "the worker process died (killed or out of memory)"})
    return earlier


def write_status(cell: Path, status: str, **info: Any) -> dict[str, Any]:
    """``status.json``: running | retrying | trained | done | failed | interrupted, with the pid (this process's
    unless given) and host of the process, so a reader can find a cell's process; ``trained_in`` and
    ``earlier_attempts`` are kept from the status before unless given, a final status closes an open stretch
    at the run's latest checkpoint, and ``models_in_process`` is the last stretch's unless given."""
    cell.mkdir(parents=True, exist_ok=True)
    before = read_status(cell)
    kept = {k: before[k] for k in ("trained_in", "earlier_attempts") if k in before}
    entry = {"status": status, "pid": os.getpid(), "host": socket.gethostname(), "error": None, **kept, **info}
    path = entry.get("trained_in")
    if status in (*FINAL, TRAINED) and path and path[-1]["until_step"] is None:  # an attempt ended, none wrote it
        entry["trained_in"] = path = ended(path, cell / "run")
    if path and path[-1]["cells"] is not None:
        entry.setdefault("models_in_process", len(path[-1]["cells"]))
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
