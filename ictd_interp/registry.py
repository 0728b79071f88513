"""Pretrained models shipped with the package, by name (``from_pretrained("quick-td-s0")``).

Each lives in ``ictd_interp/pretrained/<name>/``: the checkpoint (``model.safetensors`` and its
header ``config.json``), its training curves (``metrics.jsonl``) and ``card.json``, its provenance: the command that trained it, its full
``TrainConfig``, the training metrics at the end, and its ``fingerprint``: what decides the bits of a CPU
run (``provenance.fingerprint``: torch, MKL and oneDNN versions, thread count, CPU model and the
instruction-set flags the kernels dispatch on). Re-running the command on a machine with the same
fingerprint reproduces the weights bit for bit; on any other machine within ``cross_machine_rtol`` of the
largest weight (``retrain``; measured in docs/theory.md §11).
"""

from __future__ import annotations

import difflib
from dataclasses import replace
import json
import platform
import shutil
from importlib import metadata
from pathlib import Path
from typing import Any, Optional, Union

from ictd_interp import provenance, run_folder
from ictd_interp.checkpoint import CONFIG, WEIGHTS, CheckpointNotFoundError

PRETRAINED_DIR = Path(__file__).parent / "pretrained"
CARD = "card.json"
PREFIX = "prefix.safetensors"  # the weights after the card's ``prefix_steps``, for a quick retrain check
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


# Cross-machine tolerance of a retrain, relative to the largest weight. Measured between the CPU the
# models were first trained on and an AMD EPYC with AVX-512 (same torch 2.13.0, same threads): 6e-8 to
# 4.5e-7 for the 3,000-step models (quick-full-s0 the largest), and 2.4e-7 on a third machine (AVX-512 +
# AMX), and 3.3e-7 for paper-td-s0 after 30,000 per-layer steps. 1e-5 leaves a factor 20 above the
# largest measured drift. The standard architecture (LayerNorm, GELU, 2 threads) drifts more: 4.4e-4 for
# standard-quick-s0 (its eval MSVE still agrees to 1.3e-7), so its card says 5e-3.
CROSS_MACHINE_RTOL = 1e-5


def retrain(name: str, out_dir: Union[str, Path], steps: Optional[int] = None) -> dict[str, Any]:
    """Retrain a shipped model from its card at the recorded thread count (the first ``steps`` steps
    only, compared with the card's recorded prefix, when given) and compare the weights: bit for bit
    when this machine's fingerprint equals the card's, within ``cross_machine_rtol`` otherwise.
    Returns the comparison: ``mode`` (``"bit-exact"`` or ``"tolerance"``), the fingerprint differences,
    the drift and whether it passes."""
    import torch
    from safetensors.torch import load_file

    from ictd_interp.train import train
    from ictd_interp.train_config import TrainConfig

    entry, folder = card(name), pretrained_path(name)
    threads = torch.get_num_threads()
    torch.set_num_threads(entry["fingerprint"]["threads"])
    try:
        config = TrainConfig.from_dict(entry["train_config"])
        # no schedule depends on the total step count, so a shorter run is the full run's prefix
        run = train(config if steps is None else replace(config, steps=steps), out_dir, progress=False)
        reference = load_file(str(folder / (WEIGHTS if steps is None else PREFIX)))
        again = {k: v.detach().cpu() for k, v in run.model.state_dict().items() if k in reference}
        differs = provenance.differences(entry["fingerprint"], provenance.fingerprint(threads=torch.get_num_threads()))
    finally:
        torch.set_num_threads(threads)
    drift = provenance.weight_drift(reference, again)
    mode = "tolerance" if differs else "bit-exact"
    ok = drift["bit_equal"] if mode == "bit-exact" else drift["max_rel"] <= entry["cross_machine_rtol"]
    return {"mode": mode, "differences": differs, **drift, "tolerance": entry["cross_machine_rtol"], "passes": ok}


def export_run(run_dir: Union[str, Path], name: str, description: str, command: str,
               prefix_steps: int = 0, rtol: float = CROSS_MACHINE_RTOL) -> Path:
    """Copy a finished run's final checkpoint into the registry with its card, this machine's
    fingerprint at the run's thread count, and (``prefix_steps > 0``) the weights after that many steps
    for the quick reproducibility check (from the run's checkpoint at that step)."""
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
             "machine": platform.machine(), "fingerprint": provenance.fingerprint(threads=metrics.get("torch_threads")),
             "cross_machine_rtol": rtol}
    if prefix_steps:
        shutil.copyfile(run_folder.checkpoint_dir(run_dir, prefix_steps) / WEIGHTS, folder / PREFIX)
        entry["prefix_steps"] = prefix_steps
    (folder / CARD).write_text(json.dumps(entry, indent=1))
    return folder
