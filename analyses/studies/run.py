"""Studies: a grid of conditions x seeds, each cell an ordinary reproduce folder, run on Ray.

::

    DIR/spec.toml, spec.json        the spec as given, and as validated (compared on re-runs)
    DIR/cells/<cell>/run/           the cell's training run (``ictd-interp train`` layout)
    DIR/cells/<cell>/analysis/      ``ictd-interp analyze`` of it
    DIR/cells/<cell>/status.json    running | retrying | done | failed | interrupted, error, wall time, the pid of
                                    the worker process running it (how to find a cell's process: while it
                                    is "running", that pid is alive; ``earlier_attempts`` lists attempts
                                    whose worker died, with their pids; ``trained_in``: the cells it
                                    was stepped with, from which step until which; ``models_in_process``;
                                    a stacked cell's ``wall_time`` is its stack's)
    DIR/results.csv, curves.csv, depth.csv, extrapolation.csv, study.md, figures/

Ray does all the scheduling: every unfinished cell is one Ray task (one CPU, one torch thread), or, for cells
of one shape at small batches, one task trains several as a stack (``grouping.stack_groups``, where that wins).
A worker killed mid-cell makes Ray retry the task, which resumes the cell (or the stack) from its last
checkpoint (the same weights as an undisturbed run: the resume is exact at equal thread counts). Which cells
share a stack depends on the number of workers; a stacked cell's weights equal its run alone up to float
rounding, so a cell is reproduced bit for bit by the same stretches (``trained_in``) at the same thread count,
and a re-run keeps each started cell in the unit it was last stepped in. A cell that
raises is recorded ``failed`` with its message. Ctrl-C writes ``DIR/STOP``: running cells checkpoint
and stop, and the same command resumes them later. Finished cells are never recomputed.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import pandas as pd

from ictd_interp.analyses.studies.cells import (
    DONE,
    FAILED,
    INTERRUPTED,
    RUNNING,
    TRAINED,
    TRAINING_OVER,
    attempts,
    is_running,
    last_unit,
    read_status,
    run_cell,
    run_stacked_cells,
    write_status,
)
from ictd_interp.analyses.studies.grouping import seed_major, stack_groups
from ictd_interp.analyses.studies.results import collect, read_tables
from ictd_interp.analyses.studies.spec import StudySpec, StudySpecError, load_spec, stored_spec
from ictd_interp.analyses.studies.units import analyse_cell, analyses_apart
from ictd_interp.io.progress import computed, progress_bar
from ictd_interp.io.run_folder import other_request

STOP_FILE = "STOP"
TASK_RETRIES = 3  # Ray retries a cell whose worker process died (killed, out of memory)


@dataclass
class Study:
    """A study folder and its tidy tables (``results``: one row per cell and layer; ``curves``: cell x
    step x layer; ``depth``: cell x depth; ``extrapolation``: cell x depth beyond the trained one)."""

    out_dir: Path
    spec: StudySpec
    results: pd.DataFrame
    curves: pd.DataFrame
    depth: pd.DataFrame
    extrapolation: pd.DataFrame
    interrupted: bool = False

    @property
    def failed(self) -> pd.DataFrame:
        cells = self.results.drop_duplicates("cell")
        return cells[cells["status"] != DONE][["cell", "status", "error"]]


class RaySession:
    """A Ray instance started on first use (``ray()``) and shut down by ``close()`` only if started here: one
    study makes its own; several studies in a row (the claims report) share one and pay its start once."""

    def __init__(self, address: Optional[str] = None, workers: Optional[int] = None):
        self.address, self.workers, self.started = address, workers, False

    def ray(self):
        ray = import_ray()
        if not ray.is_initialized():
            init_ray(ray, self.address, self.workers)
            self.started = True
        return ray

    def close(self) -> None:
        if self.started:
            import_ray().shutdown()
            self.started = False


def run_study(
    spec: Union[str, Path, dict, StudySpec],
    out_dir: Union[str, Path],
    address: Optional[str] = None,
    workers: Optional[int] = None,
    progress: bool = True,
    keep_freed_memory: bool = False,
    session: Optional[RaySession] = None,
) -> Study:
    """Run every unfinished cell of ``spec`` into ``out_dir`` on Ray, then write the tables and report.

    ``address=None`` starts a local Ray instance with ``workers`` CPUs (default: all cores);
    ``address="HOST:PORT"`` joins an existing cluster (``out_dir`` must then be storage every node sees).
    ``keep_freed_memory``: the study's Ray workers set the allocator for their own processes
    (``ictd_interp.training.allocator``; the ``ictd-interp study`` command asks for it).
    """
    spec, out_dir = load_spec(spec), Path(out_dir)
    prepare_folder(spec, out_dir)
    sparse = sorted({c.condition for c in spec.cells() if c.config.steps < c.config.eval_every})
    if sparse:
        warnings.warn(
            f"{', '.join(sparse)}: steps < eval_every, so training curves have two points only (steps 0 "
            "and the last); lower --eval-every for a curve",
            stacklevel=2,
        )
    todo = [c for c in spec.cells() if read_status(out_dir / "cells" / c.name).get("status") != DONE]
    interrupted = False
    if todo:
        own = session is None
        session = RaySession(address, workers) if own else session
        try:
            interrupted = _run_on_ray(todo, out_dir, session, progress, keep_freed_memory)
        finally:
            if own:
                session.close()
    from ictd_interp.analyses.studies.report import write_report

    computed(
        {
            "collect the cells' results": lambda: collect(spec, out_dir),
            "figures and study.md": lambda: write_report(out_dir),
        },
        desc="study report",
        disable=not progress,
    )
    return Study(out_dir, spec, *read_tables(out_dir), interrupted=interrupted)


def load_study(out_dir: Union[str, Path]) -> Study:
    """The tables of a study folder (written by ``run_study``) as pandas DataFrames."""
    out_dir = Path(out_dir)
    if not (out_dir / "spec.json").exists():
        raise FileNotFoundError(f"{out_dir}: not a study folder (no spec.json)")
    return Study(out_dir, stored_spec(out_dir), *read_tables(out_dir))


def prepare_folder(spec: StudySpec, out_dir: Path) -> None:
    """A new folder gets the spec; an existing one must hold the same spec (nothing is reused for a
    different request)."""
    stored = out_dir / "spec.json"
    if stored.exists():
        before = stored_spec(out_dir)
        changed = before.differences(spec)
        if changed:
            raise StudySpecError(
                other_request(out_dir, "a study", changed, "run the same spec to resume it, or choose another --out")
            )
    elif out_dir.exists() and any(out_dir.iterdir()):
        raise StudySpecError(f"{out_dir}: not empty and not a study folder; choose another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps(spec.to_dict(), indent=2))
    if Path(spec.source).exists():
        shutil.copyfile(spec.source, out_dir / "spec.toml")
    (out_dir / STOP_FILE).unlink(missing_ok=True)


def _run_on_ray(cells, out_dir: Path, session: RaySession, progress: bool, keep_freed_memory: bool) -> bool:
    """Submit every unit of cells (one cell, or cells stacked in one process: ``grouping.stack_groups``) as a Ray
    task and follow them; True if interrupted by Ctrl-C."""
    ray = session.ray()
    analysis = ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(analyse_cell)  # a CPU task: never holds a GPU
    refs = _submit(ray, cells, out_dir, analysis, keep_freed_memory)
    bar = progress_bar(total=len(cells), disable=not progress, desc="study cells")
    counts = {DONE: 0, FAILED: 0, INTERRUPTED: 0}
    interrupted, pending = False, list(refs)
    try:
        while pending:
            try:
                ready, pending = ray.wait(pending, num_returns=1, timeout=2.0)
            except KeyboardInterrupt:
                if interrupted:
                    raise
                interrupted = True  # running cells checkpoint and return; waiting cells return at once
                (out_dir / STOP_FILE).touch()
                continue
            for ref in ready:
                for cell, status in zip(refs[ref], _results_of(ray, ref, refs[ref], out_dir)):
                    if status == TRAINED:  # a GPU unit's cell: analysed in a CPU task while the GPU goes on
                        pending.append(again := analysis.remote(str(out_dir / "cells" / cell.name)))
                        refs[again] = [cell]
                        continue
                    counts[status] = counts.get(status, 0) + 1
                    bar.update(1)
            running = _running([cell for r in pending for cell in refs[r]], out_dir, bar)
            bar.set_postfix(done=counts[DONE], running=running, failed=counts[FAILED])
    finally:
        bar.close()
        (out_dir / STOP_FILE).unlink(missing_ok=True)
    return interrupted


def _submit(ray, cells, out_dir: Path, analysis, keep_freed_memory: bool) -> dict:
    """Every unit of cells as a Ray task (``grouping.stack_groups``, submitted by ``grouping.seed_major``; a trained
    cell's analysis alone): ref -> its cells."""
    alone = ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(run_cell)
    stacked = ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(run_stacked_cells)
    stop_file = str(out_dir / STOP_FILE)
    trained = [c for c in cells if read_status(out_dir / "cells" / c.name).get("status") == TRAINED]
    refs = {analysis.remote(str(out_dir / "cells" / c.name)): [c] for c in trained}
    to_train = [c for c in cells if c not in trained]
    previous = {c.name: unit for c in to_train if (unit := last_unit(out_dir / "cells" / c.name))}
    for unit in seed_major(stack_groups(to_train, _slots(ray, to_train), previous)):
        dirs, configs = [str(out_dir / "cells" / c.name) for c in unit], [c.config.to_dict() for c in unit]
        gpus = {"num_gpus": 1} if unit[0].config.device == "cuda" else {}  # Ray spreads GPU units over the GPUs
        apart = analyses_apart(unit[0].config.device)
        ref = (
            alone.options(**gpus).remote(dirs[0], configs[0], stop_file, keep_freed_memory, None, not apart)
            if len(unit) == 1
            else stacked.options(**gpus).remote(dirs, configs, stop_file, keep_freed_memory, not apart)
        )
        refs[ref] = unit
    return refs


def _running(cells, out_dir: Path, bar) -> int:
    """How many of these cells' workers are alive; a worker that died mid-cell is said, and its cell marked
    retrying, before Ray's retry resumes it from its last checkpoint."""
    running = 0
    for cell in cells:
        cell_dir = out_dir / "cells" / cell.name
        status = read_status(cell_dir)
        alive = is_running(status)
        running += alive
        if status.get("status") == RUNNING and not alive:
            write_status(cell_dir, "retrying", pid=status.get("pid"), earlier_attempts=attempts(cell_dir))
            bar.write(
                f"{cell.name}: its worker process {status.get('pid')} died (killed, or out of "
                "memory); Ray retries the cell from its last checkpoint"
            )
    return running


def _slots(ray, cells) -> int:
    """How many units the cells are split into at least: one per GPU for GPU cells (each unit as large as the
    device takes, ``grouping.stack_rule``), one per CPU otherwise."""
    resources = ray.cluster_resources()
    on_gpu = any(c.config.device == "cuda" for c in cells)
    return max(1, int(resources.get("GPU" if on_gpu else "CPU", 1)))


def _results_of(ray, ref, unit, out_dir: Path) -> list[str]:
    """The final status of each of a unit's cells; a task whose retries all died records its cells failed."""
    try:
        result = ray.get(ref)
        return [r["status"] for r in (result if isinstance(result, list) else [result])]
    except Exception as err:  # a RayError: the worker died on every attempt
        reason = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
        outcomes = []
        for cell in unit:
            cell_dir = out_dir / "cells" / cell.name
            if read_status(cell_dir).get("status") not in TRAINING_OVER:  # a cell that finished before the deaths
                write_status(
                    cell_dir,
                    FAILED,
                    error=f"{type(err).__name__}: the worker process died on all "
                    f"{TASK_RETRIES + 1} attempts "
                    "(killed, or out of memory)" + (f"; Ray: {reason}" if reason else ""),
                    earlier_attempts=attempts(cell_dir),
                )
            outcomes.append(read_status(cell_dir)["status"])
        return outcomes


def import_ray():
    try:
        import ray
    except ImportError:
        raise ImportError("studies run on Ray: pip install 'ictd-interp[study]'") from None
    return ray


def host_port(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) split, or a one-line error."""
    host, sep, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit():
        raise ValueError(f"--address {address}: expected HOST:PORT of a Ray head (e.g. 127.0.0.1:6379)")
    return host, int(port)


def check_address(address: str, timeout: float = 5.0) -> None:
    """A Ray head answers at ``address`` (a TCP connection to its GCS port), else a one-line error: Ray itself
    retries an unreachable head for minutes."""
    import socket

    host, port = host_port(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        raise ValueError(
            f"--address {address}: no Ray head answers there ({err.strerror or err}); start one "
            f"with `ray start --head --node-ip-address={host} --port={port}`"
        ) from None


def init_ray(ray, address: Optional[str], workers: Optional[int]) -> None:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # local and loopback clusters only need none
    if address is None:
        ray.init(
            address="local",
            num_cpus=workers or os.cpu_count(),
            include_dashboard=False,
            log_to_driver=False,
            _node_ip_address="127.0.0.1",
            configure_logging=False,
        )
        return
    check_address(address)
    host = host_port(address)[0]
    local = host in ("localhost", "::1") or host.startswith("127.")
    ray.init(
        address=address,
        log_to_driver=False,
        configure_logging=False,
        **({"_node_ip_address": "127.0.0.1"} if local else {}),
    )
