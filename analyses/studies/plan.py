"""A study on a batch scheduler (SLURM job arrays): ``plan_units`` fixes the split of its cells into units in
``DIR/units.json``, ``run_unit`` runs one unit in its own process without Ray (one array job), resumable, and
``ictd-interp study`` then writes the report from the finished cells (docs/guide.md has a worked example)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ictd_interp.analyses.studies.cells import read_status, run_cell, run_stacked_cells
from ictd_interp.analyses.studies.grouping import stack_groups
from ictd_interp.analyses.studies.run import STOP_FILE, prepare_folder
from ictd_interp.analyses.studies.spec import StudySpecError, stored_spec
from ictd_interp.io.run_folder import other_request

PLAN = "units.json"  # a study folder's fixed split into units, for a cluster scheduler (``--plan``, ``--unit``)


def plan_units(spec, out_dir: Path, n: int) -> list[list[str]]:
    """Split ``spec``'s cells into at least ``n`` units (``grouping.stack_groups`` with ``n`` workers: stacks of one
    shape, each as large as the device takes) and record the split in ``DIR/units.json``, so each unit is one job
    of a scheduler's array (``run_unit``). The same plan again is a no-op; another plan is refused once any cell
    has started (a started cell stays in its unit)."""
    if n < 1:
        raise ValueError(f"--plan: needs at least 1 unit, got {n}")
    prepare_folder(spec, out_dir)
    units = [[c.name for c in unit] for unit in stack_groups(spec.cells(), n)]
    path = out_dir / PLAN
    stored = json.loads(path.read_text())["units"] if path.exists() else units
    if stored != units:
        begun = [c.name for c in spec.cells() if read_status(out_dir / "cells" / c.name)]
        if begun:
            raise ValueError(
                other_request(
                    path,
                    "a plan",
                    [f"units: {len(stored)} -> {len(units)}"],
                    f"cells have started ({', '.join(begun[:3])}); run its units (--unit K, K < {len(stored)}) or "
                    "choose another --out",
                )
            )
    path.write_text(json.dumps({"units": units}, indent=1))
    return units


def run_unit(spec, out_dir: Path, k: int, keep_freed_memory: bool = False) -> list[dict[str, Any]]:
    """Train and analyse unit ``k`` of the folder's plan in this process, no Ray (one job of a SLURM array: ``k``
    is ``$SLURM_ARRAY_TASK_ID``); run again, it resumes its cells from their checkpoints and redoes no done cell."""
    path = out_dir / PLAN
    if not path.exists():
        raise FileNotFoundError(f"{path}: no plan; write one first with `ictd-interp study SPEC --out DIR --plan N`")
    changed = stored_spec(out_dir).differences(spec)  # read only: the array's jobs start together
    if changed:
        raise StudySpecError(other_request(out_dir, "a planned study", changed, "run the planned spec"))
    units = json.loads(path.read_text())["units"]
    if not 0 <= k < len(units):
        raise ValueError(f"--unit: {k} is not a unit of {path} (0 to {len(units) - 1})")
    cells = {c.name: c for c in spec.cells()}
    dirs = [str(out_dir / "cells" / name) for name in units[k]]
    configs = [cells[name].config.to_dict() for name in units[k]]
    stop_file = str(out_dir / STOP_FILE)
    if len(dirs) == 1:
        return [run_cell(dirs[0], configs[0], stop_file, keep_freed_memory)]
    return run_stacked_cells(dirs, configs, stop_file, keep_freed_memory)
