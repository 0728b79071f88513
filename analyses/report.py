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
from analyses import baselines
from analyses.algorithm_id import (
    depth_extrapolation, depths_up_to, exact_read_unavailable, identify_layers, iteration_map, read_layer,
    spectral_depth,
)
from analyses.attention import state_kernels
from analyses.convergence import errors_by_context, errors_by_depth, fit_geometric
from analyses.diagonality import kernel_diagonality_mean, model_margin
from analyses.heads import head_kernels, most_like
from analyses.probes import activation_cosines, circuit_cosines, prediction_gap, sensitivity_cosine
from analyses.neu import neu_grid
from analyses.report_md import eval_tasks_label, write_markdown
from analyses.standard_report import compute_standard, draw_standard, write_standard_markdown
from ictd_interp import HookedICTDTransformer
from ictd_interp.architectures import ICTDModel, is_stylised
from ictd_interp.checkpoint import CONFIG, CheckpointError, load_checkpoint
from ictd_interp.evaluation import EvalSet, evaluate
from ictd_interp.registry import resolve as resolve_name
from ictd_interp.run_folder import METRICS, is_run, latest_checkpoint, load_run_config, read_metrics
from ictd_interp.tasks import TaskBatch
from ictd_interp.train_config import TrainConfig

CONTEXT_LENGTHS = (4, 8, 16, 32, 64, 128)
FIT_TASKS = 64  # the function-space fit (and its bootstrap) runs on the first 64 evaluation tasks
# NEU at the training setting and toward Theorem 3's limit (a longer context, a deeper model); the
# full grid of Theorem 3 (n up to 300, L up to 24) is ``analyses.neu.neu_grid``'s default, minutes long
NEU_LONG, NEU_DEEP = 100, (12,)
LIMIT_LENGTHS, LIMIT_TASKS = (30, 100, 300, 1000), 32  # theta*'s limit (fixed point) versus context length


def theta_star_coefficients(gamma: float) -> dict[str, float]:
    """theta*'s (a, b, c) in the TD family."""
    return {"step": 1.0, "b": gamma, "c": -1.0}


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


def compute(model: HookedICTDTransformer, config: TrainConfig, run_dir: Optional[Path], neu: bool = True) -> dict[str, Any]:
    """All numbers of the report, JSON-ready (``neu=False`` leaves out the NEU section, the slowest)."""
    eval_set = EvalSet.build(replace(config, device="cpu"))
    model = model.to("cpu")
    tasks, star = eval_set.tasks, HookedICTDTransformer.from_theta_star(model.cfg)
    depth = max(2 * model.cfg.n_layers, 16)
    long_tasks = config.tasks.sample(64, seed=config.eval_seed + 1, length=max(CONTEXT_LENGTHS))
    star_depth = errors_by_depth(HookedICTDTransformer.from_theta_star(model.cfg, depth=depth), tasks).mean(-1).tolist()
    C = model_margin(star, tasks)
    with torch.no_grad():
        model_values, star_values = model(tasks.prompt), star(tasks.prompt)
    return {
        "config": config.applicable_dict(), "model_config": model.cfg.to_dict(), "n_eval_tasks": len(tasks),
        "eval_tasks": eval_tasks_label(config, len(tasks)),
        "metrics": evaluate(model, eval_set).to_dict(),
        "baselines": baselines.compare(model_values, tasks, config.gamma, model.cfg.n_layers,
                                       extra={"theta_star": star_values}),
        "probes": {**prediction_gap(model, tasks, star), "sensitivity_cosine": sensitivity_cosine(model, tasks, star),
                   "circuits": circuit_cosines(model, star), "activation_cosines": activation_cosines(model, tasks, star)},
        "diagonality": {"model": kernel_diagonality_mean(model, tasks).tolist(),
                        "theta_star": kernel_diagonality_mean(star, tasks)[0, 0].item(),
                        "threshold": (1 + config.gamma) / 2},
        "margin": {"model_mean": model_margin(model, tasks).mean().item(), "theta_star_mean": C.mean().item(),
                   "theta_star_min": C.min().item()},
        "algorithm": algorithm_answers(model, star, tasks),
        "circuit": {"heads": (heads := head_kernels(model, tasks)), **most_like(heads)},
        "convergence": {
            "depth": {"theta_star": star_depth, "model": errors_by_depth(model, tasks).mean(-1).tolist()},
            "theta_star_fit": fit_geometric(star_depth), "one_minus_C": 1 - C.mean().item(),
            "theta_star_limit": theta_star_limit(model.cfg, config),
            "context_lengths": list(CONTEXT_LENGTHS),
            "context": {name: errors_by_context(m, long_tasks, CONTEXT_LENGTHS).mean(-1).tolist()
                        for name, m in (("trained model", model), ("theta* (same depth)", star))},
        },
        "neu": neu_grid(model.cfg, config.tasks, model, lengths=sorted({config.context_len, NEU_LONG}),
                        depths=sorted({model.cfg.n_layers, *NEU_DEEP}), tasks_per_batch=16, n_windows=5,
                        repeats=3, seed=config.eval_seed) if neu else None,
        "curves": _curves(run_dir),
        "example": _example(model, star, tasks),
    }


def algorithm_answers(model: HookedICTDTransformer, star: HookedICTDTransformer, tasks: TaskBatch) -> dict[str, Any]:
    """Which algorithm each layer runs (read from the weights where the layer is a fixed linear map,
    fitted otherwise), what iterating the last layer does (from the spectrum of its map), the error
    curve run as deep as that spectrum needs, and theta*'s own map and fixed point on the same tasks."""
    reason = exact_read_unavailable(model.cfg)
    last = model.cfg.n_layers - 1
    if reason is None:
        layers = [read_layer(model, layer) for layer in range(model.cfg.n_layers)]
    else:
        layers = identify_layers(model, tasks[:FIT_TASKS])
    for row in layers:
        usable = row["b"] is not None and row["identifiable"]
        if model.cfg.tied and reason is None and row["layer"] > 0:  # one layer, read once: its map is layer 0's
            row["iteration"] = layers[0]["iteration"]
        else:
            row["iteration"] = iteration_map(model, tasks, row["layer"], row) if usable else None
    iterated = layers[last]["iteration"]
    star_map = iteration_map(star, tasks, 0, theta_star_coefficients(model.cfg.gamma))
    deepest = spectral_depth(iterated["spectral_radius"], model.cfg.n_layers) if iterated else 8 * model.cfg.n_layers
    extrapolation = depth_extrapolation(model, star, tasks, depths_up_to(deepest, model.cfg.n_layers))
    if iterated is not None:  # the spectrum decides; the error curve is shown beside it
        extrapolation = {**extrapolation, "curve_verdict": extrapolation["verdict"],
                         "verdict": iterated["verdict"], "converges": iterated["converges"],
                         "verdict_from": "spectrum of the last layer's map on state values"}
    else:
        extrapolation["verdict_from"] = "error curve (no linear map could be read or fitted)"
    return {"source": "weights" if reason is None else "fit", "exact_read_unavailable": reason, "layers": layers,
            "extrapolation": extrapolation, "theta_star_map": _without_radii(star_map)}


def theta_star_limit(cfg, config: TrainConfig) -> dict[str, Any]:
    """theta*'s limit as depth grows, computed rather than extrapolated: per context length, the sup
    error of the fixed point of its map (``iteration_map``) and that map's spectral radius (the
    asymptotic rate of its geometric decay), on ``LIMIT_TASKS`` tasks with trajectories of the
    longest length (prefixes for the shorter ones)."""
    tasks = config.tasks.sample(LIMIT_TASKS, seed=config.eval_seed + 2, length=max(LIMIT_LENGTHS))
    star = HookedICTDTransformer.from_theta_star(replace(cfg, dtype="float64", n_layers=1, tied=True))
    rows = []
    for n in LIMIT_LENGTHS:
        prefix = TaskBatch(tasks.mrp, tasks.features, tasks.states[:, : n + 1])
        result = iteration_map(star, prefix, 0, theta_star_coefficients(cfg.gamma))
        rows.append({"context_len": n, "fixed_point_error": result["fixed_point_error"],
                     "fixed_point_error_interval": result["fixed_point_error_interval"],
                     "spectral_radius_mean": result["spectral_radius_mean"],
                     "fraction_contracting": result["fraction_contracting"]})
    return {"n_tasks": LIMIT_TASKS, "rows": rows}


def _without_radii(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "spectral_radius"}


def _curves(run_dir: Optional[Path]) -> Optional[dict[str, list]]:
    if run_dir is None:
        return None
    rows = read_metrics(run_dir)
    keys = ("step", "eval_msve", "cos_A", "cos_V", "kernel_diagonality_mean", "kernel_diagonality_heads")
    return {key: [r[key] for r in rows] for key in keys if key in rows[0]}


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
                                                                     c.get("kernel_diagonality_heads"),
                                                                     summary["diagonality"]["theta_star"])
        out["cosine_over_training"] = figures.cosine_curves(c["step"], c["cos_A"], c["cos_V"], tied=tied)
    return out


def analyze(path: Union[str, Path], out_dir: Union[str, Path], neu: bool = True) -> dict[str, Any]:
    """Write ``summary.json``, ``summary.md`` and every figure (PNG and SVG) to ``out_dir`` (``neu``: with
    the NEU section, stylised models only)."""
    model, config, run_dir = resolve(path)
    stylised = is_stylised(model)
    computed = compute(model, config, run_dir, neu) if stylised else compute_standard(model, config, run_dir, _curves(run_dir))
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
