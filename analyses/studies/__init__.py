"""Studies: grids of training runs × seeds on Ray (``spec`` reads a TOML spec, ``run`` schedules cells as Ray
tasks and resumes, ``grouping`` decides which cells train as one stack and in what order, ``cells`` trains and
analyses one cell or a stack of them, ``units`` analyses a GPU unit's cells
in CPU tasks, ``plan`` splits a study into units for a batch scheduler, ``results`` tabulates each cell's typed
summary, ``report`` draws the aggregate figures and ``study.md``, ``phase`` its phase diagram, ``td_map`` where
the models run TD and the learned discount beside γ). They import
``analyze`` (each cell is analysed), ``summary``, ``metrics`` and ``figures``, and the core's ``config``, ``io``
(progress bars), ``models`` and ``training``. Names are imported on first use; the built-in specs are this folder's
``*.toml``.
"""

from ictd_interp._lazy import lazy_exports

_EXPORTS = {
    "StudySpecError": "spec",
    "Cell": "spec",
    "StudySpec": "spec",
    "builtin_studies": "spec",
    "load_spec": "spec",
    "cell_name": "spec",
    "condition_label": "spec",
    "Study": "run",
    "run_study": "run",
    "load_study": "run",
    "run_cell": "cells",
    "run_stacked_cells": "cells",
    "stack_groups": "grouping",
    "collect": "results",
    "read_tables": "results",
    "band_lines": "report",
    "write_report": "report",
    "cells_cosine_curves": "report",
    "curve": "report",
    "msve_curves": "report",
    "signature": "report",
    "cells_error_vs_depth": "report",
    "cells_depth_extrapolation": "report",
    "markdown": "report",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
