"""A study's tidy tables, built from its cells' own files (so a table never says more than a cell).

* ``results.csv``: one row per cell and layer: the cell, its condition and grid values, seed,
  status and error, then every scalar of the cell's ``summary.json`` (per-layer lists become
  per-layer values; the signature's three entries become ``.reward``, ``.target``, ``.current``).
* ``curves.csv``: cell x step x layer, from the run's ``metrics.jsonl``.
* ``depth.csv``: cell x depth, the error after each layer for the model and for theta*.
* ``extrapolation.csv``: cell x depth, MSVE of the learned layers run to other depths, and theta*'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from analyses.study_spec import StudySpec
from ictd_interp import run_folder

SKIPPED = ("source", "example", "curves", "convergence.theta_star_limit", "algorithm.theta_star_map", "neu", "convergence.depth", "convergence.context", "convergence.context_lengths",
           "circuit.heads", "circuit.signatures", "circuit.quantity_r2", "circuit.theta_star_quantity_r2")
TRIPLE = ("reward", "target", "current")
ID_COLUMNS = ["cell", "condition", "seed", "status", "error"]


def collect(spec: StudySpec, out_dir: Path) -> None:
    """Write ``results.csv``, ``curves.csv`` and ``depth.csv`` for every cell of ``spec``."""
    results, curves, depth, extrapolation = [], [], [], []
    for cell in spec.cells():
        folder = out_dir / "cells" / cell.name
        status = _read_json(folder / "status.json") or {"status": "not started"}
        ids = {"cell": cell.name, "condition": cell.condition, **cell.overrides,
               "status": status["status"], "error": status.get("error")}
        summary = _read_json(folder / "analysis" / "summary.json") if status["status"] == "done" else None
        if summary is None:
            results.append({**ids, "layer": None})
            continue
        cell_scalars, per_layer = flatten_summary(summary, cell.config.n_layers)
        results += [{**ids, "layer": layer, **cell_scalars, **row} for layer, row in enumerate(per_layer)]
        curves += _curves(folder / "run", ids)
        conv = summary["convergence"]["depth"]
        depth += [{**ids, "depth": d, "model": conv["model"][d] if d < len(conv["model"]) else None,
                   "theta_star": e} for d, e in enumerate(conv["theta_star"])]
        ext = summary["algorithm"]["extrapolation"] or {"depths": [], "model": [], "theta_star": []}
        extrapolation += [{**ids, "depth": d, "model": m, "theta_star": t, "trained_depth": ext["trained_depth"]}
                          for d, m, t in zip(ext["depths"], ext["model"], ext["theta_star"])]
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


def flatten_summary(summary: dict[str, Any], n_layers: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(cell-level scalars, one dict per layer)`` from a ``summary.json``."""
    scalars: dict[str, Any] = {}
    per_layer: list[dict[str, Any]] = [{} for _ in range(n_layers)]

    def walk(value: Any, key: str) -> None:
        if key.startswith(SKIPPED):
            return
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{key}.{k}" if key else k)
        elif isinstance(value, list):
            if len(value) == n_layers:
                for layer, item in enumerate(value):
                    per_layer[layer].update(_layer_entries(item, key))
        else:
            scalars[key] = value

    walk(summary, "")
    return scalars, per_layer


def _layer_entries(item: Any, key: str) -> dict[str, Any]:
    if isinstance(item, dict):
        return {f"{key}.{k}": v for k, v in item.items() if not isinstance(v, (list, dict))}
    if isinstance(item, list):
        flat = [v[0] if isinstance(v, list) and len(v) == 1 else v for v in item]
        if len(flat) == 1:
            return {key: flat[0]}
        names = TRIPLE if len(flat) == 3 and key.endswith("signature") else range(len(flat))
        return {f"{key}.{n}": v for n, v in zip(names, flat)}
    return {key: item}


def _curves(run_dir: Path, ids: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for entry in run_folder.read_metrics(run_dir):
        common = {k: entry.get(k) for k in ("step", "loss", "eval_msve", "theta_star_msve", "kernel_diagonality_mean",
                                            "wall_time")}
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
