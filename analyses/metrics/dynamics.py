"""Every metric along a run: the logged curves, and full probes of each saved checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Union

from ictd_interp.analyses.metrics.probes import circuit_cosines, prediction_gap, sensitivity_cosine
from ictd_interp.io.run_folder import load_run_config, read_metrics
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.loading import load_checkpoint
from ictd_interp.training.evaluation import EvalSet, evaluate


def logged_curves(run_dir: Union[str, Path]) -> dict[str, list]:
    """``metrics.jsonl`` as columns (step, loss, eval_msve, cos_A, cos_V, ...)."""
    rows = read_metrics(run_dir)
    return {key: [row.get(key) for row in rows] for key in rows[0]} if rows else {}


def checkpoint_probes(run_dir: Union[str, Path]) -> list[dict[str, Any]]:
    """The training metrics plus function-space probes for every checkpoint of the run."""
    run_dir = Path(run_dir)
    config = load_run_config(run_dir)
    eval_set, star = EvalSet.build(config), HookedICTDTransformer.from_theta_star(config.model)
    out = []
    for folder in sorted((run_dir / "checkpoints").glob("step_*")):
        model = load_checkpoint(folder).model
        out.append(
            {
                "step": int(folder.name.split("_")[1]),
                **evaluate(model, eval_set).to_dict(),
                **prediction_gap(model, eval_set.tasks, star),
                "sensitivity_cosine": sensitivity_cosine(model, eval_set.tasks, star),
                "circuits": circuit_cosines(model, star),
            }
        )
    return out
