"""Studies: a grid of conditions x seeds, each cell an ordinary reproduce folder, run on Ray.

::

    DIR/spec.toml, spec.json        the spec as given, and as validated (compared on re-runs)
    DIR/cells/<cell>/run/           the cell's training run (``ictd-interp train`` layout)
    DIR/cells/<cell>/analysis/      ``ictd-interp analyze`` of it
    DIR/cells/<cell>/status.json    running | retrying | done | failed | interrupted, error, wall time, the pid of
                                    the worker process running it (how to find a cell's process: while it
                                    is "running", that pid is alive; ``earlier_attempts`` lists attempts
                                    whose worker died, with their pids)
    DIR/results.csv, curves.csv, depth.csv, extrapolation.csv, study.md, figures/

Ray does all the scheduling: every unfinished cell is one Ray task (one CPU, one torch thread).
A worker killed mid-cell makes Ray retry the task, which resumes the cell from its last checkpoint
(the same weights as an undisturbed run: the resume is exact at equal thread counts). A cell that
raises is recorded ``failed`` with its message. Ctrl-C writes ``DIR/STOP``: running cells checkpoint
and stop, and the same command resumes them later. Finished cells are never recomputed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import pandas as pd

from analyses.studies.results import collect, read_tables
from analyses.studies.spec import StudySpec, StudySpecError, load_spec
from ictd_interp.io.progress import computed, progress_bar

STOP_FILE, STATUS_FILE = "STOP", "status.json"
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
        return cells[cells["status"] != "done"][["cell", "status", "error"]]


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


def run_study(spec: Union[str, Path, dict, StudySpec], out_dir: Union[str, Path], address: Optional[str] = None,
              workers: Optional[int] = None, progress: bool = True, keep_freed_memory: bool = False,
              session: Optional[RaySession] = None) -> Study:
    """Run every unfinished cell of ``spec`` into ``out_dir`` on Ray, then write the tables and report.

    ``address=None`` starts a local Ray instance with ``workers`` CPUs (default: all cores);
    ``address="HOST:PORT"`` joins an existing cluster (``out_dir`` must then be storage every node sees).
    ``keep_freed_memory``: the study's Ray workers set the allocator for their own processes
    (``ictd_interp.training.allocator``; the ``ictd-interp study`` command asks for it).
    """
    spec, out_dir = load_spec(spec), Path(out_dir)
    _prepare_folder(spec, out_dir)
    sparse = sorted({c.condition for c in spec.cells() if c.config.steps < c.config.eval_every})
    if sparse:
        warnings.warn(f"{', '.join(sparse)}: steps < eval_every, so training curves have two points only (steps 0 "
                      "and the last); lower --eval-every for a curve", stacklevel=2)
    todo = [c for c in spec.cells() if _status(out_dir / "cells" / c.name).get("status") != "done"]
    interrupted = False
    if todo:
        own = session is None
        session = RaySession(address, workers) if own else session
        try:
            interrupted = _run_on_ray(todo, out_dir, session, progress, keep_freed_memory)
        finally:
            if own:
                session.close()
    from analyses.studies.report import write_report

    computed({"collect the cells' results": lambda: collect(spec, out_dir),
              "figures and study.md": lambda: write_report(out_dir)}, desc="study report", disable=not progress)
    return Study(out_dir, spec, *read_tables(out_dir), interrupted=interrupted)


def load_study(out_dir: Union[str, Path]) -> Study:
    """The tables of a study folder (written by ``run_study``) as pandas DataFrames."""
    out_dir = Path(out_dir)
    if not (out_dir / "spec.json").exists():
        raise FileNotFoundError(f"{out_dir}: not a study folder (no spec.json)")
    spec = load_spec(json.loads((out_dir / "spec.json").read_text()))
    return Study(out_dir, spec, *read_tables(out_dir))


def _prepare_folder(spec: StudySpec, out_dir: Path) -> None:
    """A new folder gets the spec; an existing one must hold the same spec (nothing is reused for a
    different request)."""
    stored = out_dir / "spec.json"
    if stored.exists():
        before = load_spec(json.loads(stored.read_text()))
        changed = before.differences(spec)
        if changed:
            raise StudySpecError(f"{out_dir}: holds a study with another spec ({'; '.join(changed)}); "
                                 "run the same spec to resume it, or choose another --out")
    elif out_dir.exists() and any(out_dir.iterdir()):
        raise StudySpecError(f"{out_dir}: not empty and not a study folder; choose another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps(spec.to_dict(), indent=2))
    if Path(spec.source).exists():
        shutil.copyfile(spec.source, out_dir / "spec.toml")
    (out_dir / STOP_FILE).unlink(missing_ok=True)


def _run_on_ray(cells, out_dir: Path, session: RaySession, progress: bool, keep_freed_memory: bool) -> bool:
    """Submit every cell as a Ray task and follow them; True if interrupted by Ctrl-C."""
    ray = session.ray()
    task = ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(run_cell)
    refs = {task.remote(str(out_dir / "cells" / c.name), c.config.to_dict(), str(out_dir / STOP_FILE),
                        keep_freed_memory): c
            for c in cells}
    bar = progress_bar(total=len(refs), disable=not progress, desc="study cells")
    counts = {"done": 0, "failed": 0, "interrupted": 0}
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
                status = _result_of(ray, ref, refs[ref], out_dir)
                counts[status] = counts.get(status, 0) + 1
                bar.update(1)
            running = 0
            for r in pending:  # a worker that died mid-cell: say why, before Ray's retry resumes the cell
                cell_dir = out_dir / "cells" / refs[r].name
                status = _status(cell_dir)
                alive = _is_running(status)
                running += alive
                if status.get("status") == "running" and not alive:
                    _write_status(cell_dir, "retrying", pid=status.get("pid"), earlier_attempts=_attempts(cell_dir))
                    bar.write(f"{refs[r].name}: its worker process {status.get('pid')} died (killed, or out of "
                              "memory); Ray retries the cell from its last checkpoint")
            bar.set_postfix(done=counts["done"], running=running, failed=counts["failed"])
    finally:
        bar.close()
        (out_dir / STOP_FILE).unlink(missing_ok=True)
    return interrupted


def _result_of(ray, ref, cell, out_dir: Path) -> str:
    """The cell's final status; a task whose retries all died is recorded as failed."""
    try:
        return ray.get(ref)["status"]
    except Exception as err:  # a RayError: the worker died on every attempt
        cell_dir = out_dir / "cells" / cell.name
        reason = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
        _write_status(cell_dir, "failed", error=f"{type(err).__name__}: the worker process died on all "
                      f"{TASK_RETRIES + 1} attempts "
                      "(killed, or out of memory)" + (f"; Ray: {reason}" if reason else ""),
                      earlier_attempts=_attempts(cell_dir))
        return "failed"


def _is_running(status: dict[str, Any]) -> bool:
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


def _attempts(cell: Path) -> list[dict[str, Any]]:
    """Earlier attempts at a cell whose worker died, kept in its status.json."""
    status = _status(cell)
    attempts = list(status.get("earlier_attempts", []))
    if (
        status.get("status") == "running"
        and not _is_running(status)
        and status.get("pid") not in [a.get("pid") for a in attempts]
    ):
        attempts.append({"pid": status.get("pid"), "outcome": "the worker process died (killed or out of memory)"})
    return attempts


def import_ray():
    try:
        import ray
    except ImportError:
        raise ImportError("studies run on Ray: pip install 'ictd-interp[study]'") from None
    return ray


def init_ray(ray, address: Optional[str], workers: Optional[int]) -> None:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # local and loopback clusters only need none
    if address is None:
        ray.init(address="local", num_cpus=workers or os.cpu_count(), include_dashboard=False, log_to_driver=False,
                 _node_ip_address="127.0.0.1", configure_logging=False)
        return
    host = address.rsplit(":", 1)[0]
    local = host in ("localhost",) or host.startswith("127.")
    ray.init(address=address, log_to_driver=False, configure_logging=False,
             **({"_node_ip_address": "127.0.0.1"} if local else {}))


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
        return _write_status(cell, "interrupted")
    earlier = _attempts(cell)  # a retry after a killed worker: say so, and resume from the last checkpoint
    _write_status(cell, "running", earlier_attempts=earlier)
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
            return _write_status(cell, "interrupted", wall_time=time.perf_counter() - started)
        # NEU per (n, L): analyses.metrics.neu.neu_grid, not per cell; figures: the study's, across cells
        analyze(run_dir, cell / "analysis", neu=False, draw=False)
    except Exception as err:
        trace = traceback.format_exc(limit=-3)
        return _write_status(cell, "failed", error=f"{type(err).__name__}: {err}", trace=trace,
                             wall_time=time.perf_counter() - started, earlier_attempts=earlier)
    return _write_status(cell, "done", wall_time=time.perf_counter() - started, earlier_attempts=earlier)


def _write_status(cell: Path, status: str, **info: Any) -> dict[str, Any]:
    """``status.json``: running | retrying | done | failed | interrupted, with the pid (this process's
    unless given) and host of the process, so a reader can find a cell's process."""
    cell.mkdir(parents=True, exist_ok=True)
    entry = {"status": status, "pid": os.getpid(), "host": socket.gethostname(), "error": None, **info}
    tmp = cell / f".{STATUS_FILE}.tmp"
    tmp.write_text(json.dumps(entry, indent=1))
    os.replace(tmp, cell / STATUS_FILE)
    return entry


def _status(cell: Path) -> dict[str, Any]:
    path = cell / STATUS_FILE
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except json.JSONDecodeError:
        return {}  # a status being rewritten: treated as unknown, re-read on the next poll
