"""Study overhead: wall time of a 4-cell study on 2 workers against the cells' own run times.

The ideal wall time is the sum of the cells' own times (each cell's ``status.json``: train + analyse
in its worker) divided by the number of workers; the ratio measures what scheduling, worker start-up,
result collection and the report add. Ray's own start-up is timed apart. Target: ratio <= 1.2.

Usage: python benchmarks/study_overhead.py [--steps 300] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import ray

from ictd_interp.analyses.studies.run import run_study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    spec = {
        "name": "overhead",
        "preset": "quick",
        "seeds": [0, 1],
        "grid": {"tied": [True, False]},
        "fixed": {"steps": args.steps, "eval_every": max(1, args.steps // 4), "n_eval_tasks": 64},
    }
    start = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=args.workers,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        configure_logging=False,
    )
    ray_startup = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        study = run_study(spec, Path(tmp) / "s", progress=False)
        wall = time.perf_counter() - start
        cell_times = [
            json.loads(p.read_text())["wall_time"] for p in sorted((Path(tmp) / "s" / "cells").glob("*/status.json"))
        ]
    ray.shutdown()
    ideal = sum(cell_times) / args.workers
    print(
        json.dumps(
            {
                "cells": len(cell_times),
                "workers": args.workers,
                "steps": args.steps,
                "done": int((study.results.drop_duplicates("cell")["status"] == "done").sum()),
                "ray_startup_s": round(ray_startup, 2),
                "study_wall_s": round(wall, 2),
                "cell_times_s": [round(t, 2) for t in cell_times],
                "ideal_s": round(ideal, 2),
                "ratio": round(wall / ideal, 3),
                "target_ratio": 1.2,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
