"""A study's tidy tables, built from its cells' own files (so a table never says more than a cell).

* ``results.csv``: one row per cell and layer: the cell, its condition and grid values, seed,
  status and error, then every tabulated field of the cell's typed summary (``summary.tables.flatten``:
  fields declared per layer become per-layer values, the signature's entries ``.reward``,
  ``.next value``, ``.current value``; detail fields stay in summary.json).
* ``curves.csv``: cell x step x layer, from the run's ``metrics.jsonl``.
* ``depth.csv``: cell x depth, the error after each layer for the model and for theta*.
* ``extrapolation.csv``: cell x depth, MSVE of the learned layers run to other depths, and of the construction they are
  compared with (``reference``, named by ``reference_name``: theta*, or a linear model's TD(0) construction).
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd

from ictd_interp.analyses.studies.cells import DONE
from ictd_interp.analyses.studies.spec import StudySpec
from ictd_interp.analyses.summary.store import read_summary
from ictd_interp.analyses.summary.tables import flatten
from ictd_interp.io import run_folder
from ictd_interp.training.evaluation import EvalMetrics

# the tables' own columns, beside the summary's flattened fields (``schema.summary_column``)
CELL, CONDITION, STATUS, STEP = "cell", "condition", "status", "step"
DEPTH, REFERENCE_NAME = "depth", "reference_name"
CURVE_IDS = ("step", "loss", "wall_time")  # curves.csv: these, then the logged metrics (``EvalMetrics``)


def curve_column(name: str) -> str:
    """A column of ``curves.csv``, checked against what a run logs (``EvalMetrics``'s fields)."""
    if name not in CURVE_IDS and name not in {f.name for f in fields(EvalMetrics)}:
        logged = ", ".join(f.name for f in fields(EvalMetrics))
        raise ValueError(f"{name}: curves.csv has no such column (a run logs {logged})")
    return name


def collect(spec: StudySpec, out_dir: Path) -> None:
    """Write ``results.csv``, ``curves.csv`` and ``depth.csv`` for every cell of ``spec``."""
    results, curves, depth, extrapolation = [], [], [], []
    for cell in spec.cells():
        folder = out_dir / "cells" / cell.name
        status = _read_json(folder / "status.json") or {"status": "not started"}
        ids = {
            "cell": cell.name,
            "condition": cell.condition,
            **cell.overrides,
            "status": status["status"],
            "error": status.get("error"),
        }
        path = folder / "analysis" / "summary.json"
        summary = read_summary(path) if status["status"] == DONE and path.exists() else None
        if summary is None:
            results.append({**ids, "layer": None})
            continue
        cell_scalars, per_layer = flatten(summary)
        results += [{**ids, "layer": layer, **cell_scalars, **row} for layer, row in enumerate(per_layer)]
        curves += _curves(folder / "run", ids)
        conv = summary.convergence.depth
        depth += [
            {**ids, "depth": d, "model": conv.model[d] if d < len(conv.model) else None, "theta_star": e}
            for d, e in enumerate(conv.theta_star)
        ]
        ext = summary.algorithm.extrapolation
        if ext is not None:
            extrapolation += [
                {
                    **ids,
                    "depth": d,
                    "model": m,
                    "reference": t,
                    "reference_name": ext.reference_name,
                    "trained_depth": ext.trained_depth,
                }
                for d, m, t in zip(ext.depths, ext.model, ext.reference)
            ]
    for name, rows in (("results", results), ("curves", curves), ("depth", depth), ("extrapolation", extrapolation)):
        pd.DataFrame.from_records(rows).to_csv(out_dir / f"{name}.csv", index=False)


TABLES = ("results", "curves", "depth", "extrapolation")


def read_tables(out_dir: Path) -> tuple[pd.DataFrame, ...]:
    """``results``, ``curves``, ``depth`` and ``extrapolation`` as DataFrames."""
    tables = []
    for name in TABLES:
        path = Path(out_dir) / f"{name}.csv"
        if not path.exists():
            raise FileNotFoundError(f"{path}: missing; re-run the study to write it")
        try:
            tables.append(pd.read_csv(path))
        except pd.errors.EmptyDataError:
            tables.append(pd.DataFrame())  # no cell has finished yet
        except (pd.errors.ParserError, UnicodeDecodeError) as err:
            raise ValueError(f"{path}: not a readable CSV ({err})") from None
    return tuple(tables)


def _curves(run_dir: Path, ids: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for entry in run_folder.read_metrics(run_dir):
        common = {
            k: entry.get(k)
            for k in ("step", "loss", "eval_msve", "theta_star_msve", "kernel_diagonality_mean", "wall_time")
        }
        if "cos_A" not in entry:  # a standard-architecture run: no weights to compare with θ*
            rows.append({**ids, **common, "layer": None})
            continue
        for layer, (cos_a, cos_v) in enumerate(zip(entry["cos_A"], entry["cos_V"])):
            rows.append({**ids, **common, "layer": layer, "cos_A": cos_a, "cos_V": cos_v})
    return rows


def _read_json(path: Path) -> Any:
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: corrupt or truncated JSON ({err})") from None
