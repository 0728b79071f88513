"""Pretrained models shipped with the package, by name (``from_pretrained("quick-td-s0")``).

Each lives in ``ictd_interp/pretrained/<name>/``: the checkpoint (``model.safetensors`` and its
header ``config.json``), its training curves (``metrics.jsonl``) and ``card.json``, its provenance: the command that trained it, its full
``TrainConfig``, the training metrics at the end, the package and torch versions and the torch thread
count (re-running the command at that thread count reproduces the weights bit for bit on CPU).
"""

from __future__ import annotations

import difflib
import json
import platform
import shutil
from importlib import metadata
from pathlib import Path
from typing import Any, Union

from ictd_interp import run_folder
from ictd_interp.checkpoint import CONFIG, WEIGHTS, CheckpointNotFoundError

PRETRAINED_DIR = Path(__file__).parent / "pretrained"
CARD = "card.json"
HEADLINE = ("eval_msve", "theta_star_msve", "cos_A", "cos_V", "signature_match")


def names() -> list[str]:
    return sorted(p.parent.name for p in PRETRAINED_DIR.glob(f"*/{CARD}"))


def card(name: str) -> dict[str, Any]:
    return json.loads((pretrained_path(name) / CARD).read_text())


def list_pretrained() -> list[dict[str, Any]]:
    """Every shipped model: name, one-line description, headline metrics and the training command."""
    out = []
    for name in names():
        c = card(name)
        out.append({"name": name, "description": c["description"], "command": c["command"],
                    **{k: c["final_metrics"].get(k) for k in HEADLINE}})  # None: not measured for that architecture
    return out


def pretrained_path(name: str) -> Path:
    folder = PRETRAINED_DIR / name
    if not (folder / CARD).exists():
        known = names()
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise CheckpointNotFoundError(f"{name}: no such pretrained model or path.{hint} Known models: {', '.join(known)}")
    return folder


def resolve(name_or_path: Union[str, Path]) -> Path:
    """A path that exists is used as it is; anything else must be a registry name."""
    path = Path(name_or_path)
    return path if path.exists() else pretrained_path(str(name_or_path))


def export_run(run_dir: Union[str, Path], name: str, description: str, command: str) -> Path:
    """Copy a finished run's final checkpoint into the registry with its card."""
    run_dir = Path(run_dir)
    final = run_folder.final_dir(run_dir)
    if not (final / WEIGHTS).exists():
        raise FileNotFoundError(f"{run_dir}: no finished model ({final / WEIGHTS} is missing)")
    metrics = run_folder.read_metrics(run_dir)[-1]
    folder = PRETRAINED_DIR / name
    folder.mkdir(parents=True, exist_ok=True)
    for file in (WEIGHTS, CONFIG):
        shutil.copyfile(final / file, folder / file)
    shutil.copyfile(run_dir / run_folder.METRICS, folder / run_folder.METRICS)  # the training curves
    import torch

    entry = {"name": name, "description": description, "command": command,
             "train_config": run_folder.load_run_config(run_dir).to_dict(),
             "final_metrics": {k: v for k, v in metrics.items() if k != "wall_time"},
             "train_wall_time_s": metrics.get("wall_time"), "torch_threads": metrics.get("torch_threads"),
             "package_version": metadata.version("ictd-interp"), "torch_version": torch.__version__,
             "machine": platform.machine()}
    (folder / CARD).write_text(json.dumps(entry, indent=1))
    return folder
