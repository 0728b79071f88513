"""Retraining a shipped model from its card, compared with the shipped weights: bit for bit on a machine
with the card's fingerprint, within the card's ``cross_machine_rtol`` on any other (docs/theory.md §11);
and re-exporting it (``reexport``) when a change of the training code changes its bits."""

from __future__ import annotations

import json
import platform
import shutil
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any, Optional, Union

import torch
from safetensors.torch import load_file

from ictd_interp.config.train import TrainConfig
from ictd_interp.io import provenance, run_folder
from ictd_interp.io.checkpoint import CONFIG, WEIGHTS
from ictd_interp.io.pretrained import CARD, PREFIX, card, pretrained_path
from ictd_interp.io.threads import chosen
from ictd_interp.training.trainer import train

# The cards' cross-machine tolerance of a retrain, relative to the largest weight. Measured between the CPU the
# models were first trained on and an AMD EPYC with AVX-512 (same torch 2.13.0, same threads): 6e-8 to
# 4.5e-7 for the 3,000-step models (depth3-full-s0 the largest), and 2.4e-7 on a third machine (AVX-512 +
# AMX), and 3.3e-7 for paper-td-s0 after 30,000 per-layer steps. The stylised cards' 1e-5 leaves a factor 20 above the
# largest measured drift. The standard architecture (LayerNorm, GELU, 2 threads) drifts more: 4.4e-4 for
# standard-quick-s0 (its eval MSVE still agrees to 1.3e-7), so its card says 5e-3.
CROSS_MACHINE_RTOL = 1e-5
# The deep recipes (48+ tied layers, warm-up, cosine decay, clipping) amplify rounding: deep-td-s0 retrained on an
# Intel Xeon with AMX from its AMD EPYC card drifts 2.3e-2, and on one machine a 1e-7 relative nudge of its initial
# weights ends 1.5e-2 away, while the eval MSVE agrees to 1.1e-3. Their cards say 5e-2, and a retrain's eval MSVE
# must also agree to EVAL_RTOL: the weights alone cannot tell a rounding from a wrong recipe at this tolerance.
AMPLIFYING_RTOL = 5e-2
EVAL_RTOL = 1e-2


def within_tolerance(max_rel: float, eval_rel: Optional[float], rtol: float) -> bool:
    """A retrain on another machine passes: its weights within ``rtol`` of the card's (relative to the largest) and,
    where the whole run was retrained (``eval_rel`` not None), its final eval MSVE within ``EVAL_RTOL`` of the
    card's."""
    return max_rel <= rtol and (eval_rel is None or eval_rel <= EVAL_RTOL)


def retrain(name: str, out_dir: Union[str, Path], steps: Optional[int] = None) -> dict[str, Any]:
    """Retrain a shipped model from its card at the recorded thread count (the first ``steps`` steps
    only, compared with the card's recorded prefix, when given) and compare the weights: bit for bit
    when this machine's fingerprint equals the card's, within ``cross_machine_rtol`` otherwise (and, retrained
    whole, the eval MSVE within ``EVAL_RTOL``: ``within_tolerance``). Returns the comparison: ``mode``
    (``"bit-exact"`` or ``"tolerance"``), the fingerprint differences, the drift, ``eval_rel`` and whether it
    passes."""
    entry, folder = card(name), pretrained_path(name)
    threads = torch.get_num_threads()
    torch.set_num_threads(entry["fingerprint"]["threads"])
    chosen()  # the card's count, never the toolkit's default
    try:
        config = TrainConfig.from_dict(entry["train_config"])
        if steps is not None and config.lr_schedule != "constant":  # a shorter run is the full run's prefix only
            raise ValueError(f"{name}: its {config.lr_schedule} schedule depends on the step count: retrain it whole")
        run = train(config if steps is None else replace(config, steps=steps), out_dir, progress=False)
        reference = load_file(str(folder / (WEIGHTS if steps is None else PREFIX)))
        again = {k: v.detach().cpu() for k, v in run.model.state_dict().items() if k in reference}
        differs = provenance.differences(entry["fingerprint"], provenance.fingerprint(threads=torch.get_num_threads()))
    finally:
        torch.set_num_threads(threads)
    drift = provenance.weight_drift(reference, again)
    eval_rel = None
    if steps is None:
        shipped = entry["final_metrics"]["eval_msve"]
        eval_rel = abs(run_folder.read_metrics(out_dir)[-1]["eval_msve"] - shipped) / abs(shipped)
    mode = "tolerance" if differs else "bit-exact"
    rtol = entry["cross_machine_rtol"]
    ok = drift["bit_equal"] if mode == "bit-exact" else within_tolerance(drift["max_rel"], eval_rel, rtol)
    return {"mode": mode, "differences": differs, **drift, "eval_rel": eval_rel, "tolerance": rtol, "passes": ok}


def reexport(folder: Union[str, Path], work_dir: Union[str, Path], trained: bool = False) -> dict[str, Any]:
    """Retrain the model in a shipped model's ``folder`` from its card (its config, at its thread count)
    in ``work_dir`` and replace the folder's weights, prefix weights, curves and card with the new run's:
    what a change that alters training's bits (a faster kernel, a fused path) must do to every shipped
    model in the same change. The card keeps its name, description, command and tolerance; its config,
    final metrics, timing and fingerprint are the new run's. ``trained``: ``work_dir`` is a finished run of
    exactly the card's config at its thread count on this machine (a study's cell), taken as it is. Returns the
    new card."""
    folder, work_dir = Path(folder), Path(work_dir)
    entry = json.loads((folder / CARD).read_text())
    config = TrainConfig.from_dict(entry["train_config"])
    if trained:
        _check_trained(work_dir, config, entry["fingerprint"]["threads"])
    threads = torch.get_num_threads()
    torch.set_num_threads(entry["fingerprint"]["threads"])
    chosen()  # the card's count, never the toolkit's default
    try:
        if not trained:
            train(config, work_dir, progress=False)
        fingerprint = provenance.fingerprint(threads=torch.get_num_threads())
    finally:
        torch.set_num_threads(threads)
    final, metrics = run_folder.final_dir(work_dir), run_folder.read_metrics(work_dir)[-1]
    for file in (WEIGHTS, CONFIG):
        shutil.copyfile(final / file, folder / file)
    shutil.copyfile(work_dir / run_folder.METRICS, folder / run_folder.METRICS)
    if entry.get("prefix_steps"):
        shutil.copyfile(run_folder.checkpoint_dir(work_dir, entry["prefix_steps"]) / WEIGHTS, folder / PREFIX)
    entry.update(
        train_config=config.to_dict(),
        final_metrics={k: v for k, v in metrics.items() if k != "wall_time"},
        train_wall_time_s=metrics["wall_time"],
        torch_threads=metrics["torch_threads"],
        package_version=metadata.version("ictd-interp"),
        torch_version=torch.__version__,
        machine=platform.machine(),
        fingerprint=fingerprint,
    )
    (folder / CARD).write_text(json.dumps(entry, indent=1))
    return entry


def _check_trained(work_dir: Path, config: TrainConfig, threads: int) -> None:
    """A finished run of ``config`` at ``threads`` torch threads, or a ``ValueError`` naming what differs."""
    changed = run_folder.load_run_config(work_dir).differences(config)
    if changed:
        raise ValueError(f"{work_dir}: trained with other settings than the card's ({'; '.join(changed)})")
    last = run_folder.read_metrics(work_dir)[-1]
    if last["step"] != config.steps or last["torch_threads"] != threads:
        raise ValueError(
            f"{work_dir}: not a finished run at {threads} thread(s) (step {last['step']} of {config.steps}, "
            f"{last['torch_threads']} thread(s))"
        )
