"""``ictd-interp analyze``: every metric and figure for a checkpoint or a run, written to a folder.

Validates the path first, computes each result once, saves the numbers (``summary.json``), then
draws every figure from those saved numbers (PNG and SVG) and writes ``summary.md``.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Union

import torch

from analyses import figures
from analyses.algorithm_id import best_in_family, depth_extrapolation, identify_layers, iteration_map
from analyses.attention import state_kernels
from analyses.convergence import errors_by_context, errors_by_depth, fit_geometric
from analyses.diagonality import kernel_diagonality_mean, model_margin
from analyses.heads import head_kernels, most_like
from analyses.probes import activation_cosines, circuit_cosines, prediction_gap, sensitivity_cosine
from analyses.report_md import write_markdown
from analyses.standard_report import compute_standard, draw_standard, write_standard_markdown
from ictd_interp import HookedICTDTransformer
from ictd_interp.architectures import ICTDModel, is_stylised
from ictd_interp.checkpoint import CONFIG, CheckpointError, load_checkpoint
from ictd_interp.evaluation import EvalSet, evaluate, msve
from ictd_interp.registry import resolve as resolve_name
from ictd_interp.run_folder import METRICS, is_run, latest_checkpoint, load_run_config, read_metrics
from ictd_interp.train_config import TrainConfig

CONTEXT_LENGTHS = (4, 8, 16, 32, 64, 128)


def resolve(path: Union[str, Path]) -> tuple[ICTDModel, TrainConfig, Optional[Path]]:
    """Model, the task settings to evaluate it on, and the folder holding its training curves
    (``metrics.jsonl``: a run folder or a shipped model; None for a bare checkpoint)."""
    path = resolve_name(path)  # a registry name (``quick-td-s0``) or a path
    if is_run(path):
        ckpt = path / "final" if (path / "final").exists() else latest_checkpoint(path)
        if ckpt is None:
            raise CheckpointError(f"{path}: run directory without any checkpoint yet")
        return load_checkpoint(ckpt).model, load_run_config(path), path
    if not (path / CONFIG).exists() and not path.is_file():
        raise CheckpointError(f"{path}: neither a run directory (train_config.json + metrics.jsonl) nor a "
                              f"checkpoint ({CONFIG} + model.safetensors)")
    model, meta = load_checkpoint(path)
    if "train_config" in meta:
        curves = path if path.is_dir() and (path / METRICS).exists() else None  # shipped models keep theirs
        return model, TrainConfig.from_dict(meta["train_config"]), curves
    return model, TrainConfig.for_model(model.cfg, **meta.get("task", {})), None


def compute(model: HookedICTDTransformer, config: TrainConfig, run_dir: Optional[Path]) -> dict[str, Any]:
    """All numbers of the report, JSON-ready."""
    eval_set = EvalSet.build(replace(config, device="cpu"))
    model = model.to("cpu")
    tasks, star = eval_set.tasks, HookedICTDTransformer.from_theta_star(model.cfg)
    depth = max(2 * model.cfg.n_layers, 16)
    long_tasks = config.tasks.sample(64, seed=config.eval_seed + 1, length=max(CONTEXT_LENGTHS))
    star_depth = errors_by_depth(HookedICTDTransformer.from_theta_star(model.cfg, depth=depth), tasks).mean(-1).tolist()
    C = model_margin(star, tasks)
    return {
        "config": config.to_dict(), "model_config": model.cfg.to_dict(), "n_eval_tasks": len(tasks),
        "metrics": evaluate(model, eval_set).to_dict(),
        "probes": {**prediction_gap(model, tasks, star), "sensitivity_cosine": sensitivity_cosine(model, tasks, star),
                   "circuits": circuit_cosines(model, star), "activation_cosines": activation_cosines(model, tasks, star)},
        "diagonality": {"model": kernel_diagonality_mean(model, tasks).tolist(),
                        "theta_star": kernel_diagonality_mean(star, tasks)[0, 0].item(),
                        "threshold": (1 + config.gamma) / 2},
        "margin": {"model_mean": model_margin(model, tasks).mean().item(), "theta_star_mean": C.mean().item(),
                   "theta_star_min": C.min().item()},
        "algorithm": algorithm_answers(model, star, tasks),
        "circuit": {"heads": (heads := head_kernels(model, tasks[:128])), **most_like(heads)},
        "convergence": {
            "depth": {"theta_star": star_depth, "model": errors_by_depth(model, tasks).mean(-1).tolist()},
            "theta_star_fit": fit_geometric(star_depth), "one_minus_C": 1 - C.mean().item(),
            "context_lengths": list(CONTEXT_LENGTHS),
            "context": {name: errors_by_context(m, long_tasks, CONTEXT_LENGTHS).mean(-1).tolist()
                        for name, m in (("trained model", model), ("theta* (same depth)", star))},
        },
        "curves": _curves(run_dir),
        "example": _example(model, star, tasks),
    }


def algorithm_answers(model: HookedICTDTransformer, star: HookedICTDTransformer, tasks) -> dict[str, Any]:
    """Which algorithm each layer runs, what iterating it does, and how it compares with the best
    softmax TD of the same depth (``analyses.algorithm_id``)."""
    layers = identify_layers(model, tasks[:64])
    for row in layers:
        row["iteration"] = (iteration_map(model, tasks[:64], row["layer"], row["b"], row["c"], row["step"])
                            if row["b"] is not None else None)
    few = tasks[:128]
    return {"layers": layers, "extrapolation": depth_extrapolation(model, star, few),
            "best_in_family": {**best_in_family(star, few), "model_msve": msve(model, few),
                               "theta_star_msve": msve(star, few)}}


def _curves(run_dir: Optional[Path]) -> Optional[dict[str, list]]:
    if run_dir is None:
        return None
    rows = read_metrics(run_dir)
    return {key: [r[key] for r in rows] for key in ("step", "eval_msve", "cos_A", "cos_V", "kernel_diagonality_mean")
            if key in rows[0]}


@torch.no_grad()
def _example(model: HookedICTDTransformer, star: HookedICTDTransformer, tasks) -> dict[str, Any]:
    """One prompt's patterns and grouped kernel, and every query prediction (for the figures)."""
    prompt = tasks.prompt
    _, mine = model.run_with_cache(prompt[:1], names_filter=lambda n: n.endswith("hook_pattern"))
    _, ref = star.run_with_cache(prompt[:1], names_filter=lambda n: n.endswith("hook_pattern"))
    M, _ = state_kernels(mine["pattern", 0][:, 0].double(), tasks.states[:1], tasks.mrp.n_states)
    return {"pattern_model": mine["pattern", 0][0, 0].tolist(), "pattern_theta_star": ref["pattern", 0][0, 0].tolist(),
            "grouped_kernel": M[0].nan_to_num(0.0).tolist(),
            "predicted": {"model": model(prompt)[:, -1].tolist(), "theta_star": star(prompt)[:, -1].tolist()},
            "true": tasks.v_true[:, -1].tolist()}


def draw(summary: dict[str, Any]) -> dict[str, Any]:
    """Every figure, from the saved numbers only."""
    ex, conv, gamma = summary["example"], summary["convergence"], summary["config"]["gamma"]
    tied, ext = summary["model_config"]["tied"], summary["algorithm"]["extrapolation"]
    one_minus_c = conv["one_minus_C"]
    out = {
        "attention": figures.attention_comparison({"trained, layer 0": ex["pattern_model"],
                                                   "$\\theta^*$, layer 0": ex["pattern_theta_star"]}),
        "grouped_kernel": figures.grouped_kernel(ex["grouped_kernel"], "grouped kernel $\\hat M_n$ (model, layer 0)"),
        "signature": figures.signature_bars(summary["metrics"]["signature"], tied=tied),
        "error_vs_depth": figures.error_vs_depth(
            {"theta*": conv["depth"]["theta_star"], "trained model": conv["depth"]["model"]},
            {"theta*": conv["theta_star_fit"]["rate"]}, one_minus_c),
        "depth_extrapolation": figures.depth_extrapolation(ext["depths"], ext["model"], ext["theta_star"],
                                                           ext["trained_depth"], ext["verdict"]),
        "error_vs_context": figures.error_vs_context(conv["context_lengths"], conv["context"]),
        "predicted_vs_true": figures.predicted_vs_true(ex["predicted"], ex["true"]),
    }
    if summary["curves"]:
        c = summary["curves"]
        out["diagonality_over_training"] = figures.diagonality_curve(c["step"], c["kernel_diagonality_mean"], gamma,
                                                                     summary["diagonality"]["theta_star"])
        out["cosine_over_training"] = figures.cosine_curves(c["step"], c["cos_A"], c["cos_V"], tied=tied)
    return out


def analyze(path: Union[str, Path], out_dir: Union[str, Path]) -> dict[str, Any]:
    """Write ``summary.json``, ``summary.md`` and every figure (PNG and SVG) to ``out_dir``."""
    model, config, run_dir = resolve(path)
    stylised = is_stylised(model)
    computed = compute(model, config, run_dir) if stylised else compute_standard(model, config, run_dir, _curves(run_dir))
    summary = {"source": str(path), **computed}
    out_dir = Path(out_dir)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps(_finite(summary), indent=1))
    label = source_label(summary["source"])
    for name, fig in (draw(summary) if stylised else draw_standard(summary)).items():
        fig.suptitle(label, fontsize=8, color="dimgray", x=0.01, ha="left")  # which run this figure shows
        for ext in ("png", "svg"):
            fig.savefig(out_dir / "figures" / f"{name}.{ext}", dpi=120)
    (write_markdown if stylised else write_standard_markdown)(summary, out_dir)
    return summary


def source_label(source: str) -> str:
    """``runs/quick/run`` -> ``quick/run``: the run (or pretrained model) a figure shows."""
    parts = Path(source).parts
    return "/".join(parts[-2:]) if len(parts) > 1 else source


def _finite(value: Any) -> Any:
    """NaN and infinities become null, so summary.json is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
