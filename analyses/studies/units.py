"""A study's units on accelerators. On a GPU a unit trains its cells and leaves them ``trained``; each is then
analysed by ``analyse_cell`` in a CPU task of its own, so the GPU goes on to the next unit instead of waiting on
analyses (``run._run_on_ray`` submits both; on a CPU a unit analyses its own cells as it ends)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ictd_interp.analyses.studies.cells import DONE, read_status, record_failure, write_status
from ictd_interp.io.threads import worker_threads


def analyses_apart(device: str) -> bool:
    """Whether a unit on ``device`` leaves its analyses to CPU tasks: on a GPU, where holding the device for them
    idles it."""
    return device == "cuda"


def analyse_cell(cell_dir: str) -> dict[str, Any]:
    """Analyse a ``trained`` cell (its final weights on disk) on the CPU, one torch thread: ``done`` or
    ``failed``; a cell already done is returned as it is."""
    from ictd_interp.analyses.analyze import analyze

    worker_threads()
    cell, started = Path(cell_dir), time.perf_counter()
    before = read_status(cell)
    if before.get("status") == DONE:
        return before
    trained = before.get("wall_time") or 0.0  # the unit's training time, kept beside the analysis's
    try:
        analyze(cell / "run", cell / "analysis", neu=False, draw=False)
    except Exception as err:
        return record_failure(cell, err, wall_time=trained, analysis_time=time.perf_counter() - started)
    return write_status(cell, DONE, wall_time=trained, analysis_time=time.perf_counter() - started)
