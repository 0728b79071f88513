"""Wall time of ``analyze`` on a checkpoint with 256 evaluation tasks (target: under 30 s on 2 cores).

Usage: python benchmarks/analyze_time.py [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.analyses.analyze import analyze
from ictd_interp.io.checkpoint import save_checkpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model = HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=4, n_layers=3))
        save_checkpoint(model, Path(tmp) / "ckpt", task={"n_eval_tasks": 256})
        start = time.perf_counter()
        summary = analyze(Path(tmp) / "ckpt", Path(tmp) / "out")
        seconds = time.perf_counter() - start
    print(json.dumps({"n_eval_tasks": summary["n_eval_tasks"], "seconds": seconds, "target_seconds": 30}, indent=1))


if __name__ == "__main__":
    main()
