"""``ictd-interp analyze``: compute -> typed summary -> words and figures -> files, for a checkpoint or a run.

``REPORTS`` holds the reports, by model architecture, as found: each is a vertical slice, one module of
``ictd_interp.analyses.reports`` that names its ``ARCHITECTURE`` and holds its ``compute`` (every number once, into a
typed ``Summary``), its ``lines`` (summary.md's words) and its own ``figures`` (``reports.stylised``,
``reports.standard``, ``reports.linear``); what every report shares is in ``reports.summary_md`` (words) and
``reports.shared_figures`` (figures). A new architecture's report is one new module there and no line here.
``analyze`` validates the path, computes, saves ``summary.json`` (``ictd_interp.analyses.summary``), then
draws every figure from those saved numbers (PNG and SVG) and writes ``summary.md``.
"""

from __future__ import annotations

import pkgutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import NamedTuple, Optional, Union

import ictd_interp.analyses.reports as report_modules
from ictd_interp.analyses.figures.style import Figure
from ictd_interp.analyses.metrics.stability import over_training
from ictd_interp.analyses.reports.shared_figures import common_figures
from ictd_interp.analyses.reports.summary_md import write_with_figures
from ictd_interp.analyses.summary.sections import Summary
from ictd_interp.analyses.summary.store import write_summary
from ictd_interp.config import ARCHITECTURES, TaskDistribution, TrainConfig
from ictd_interp.io.checkpoint import CONFIG, CheckpointError
from ictd_interp.io.pretrained import resolve as resolve_name
from ictd_interp.io.run_folder import METRICS, is_run, latest_checkpoint, load_run_config, read_metrics
from ictd_interp.io.staging import staged
from ictd_interp.models.loading import load_checkpoint
from ictd_interp.models.registry import HookedModel


@dataclass(frozen=True)
class Report:
    """One architecture's report: ``compute(model, config, source, curves, metadata, neu)`` its typed summary,
    ``lines(summary)`` the words of its summary.md, ``figures(summary)`` the figures only it draws."""

    compute: Callable[..., Summary]
    lines: Callable[[Summary], list[str]]
    figures: Callable[[Summary], dict[str, Figure]]


def find_reports() -> dict[str, Report]:
    """Every module of ``ictd_interp.analyses.reports`` that names an ``ARCHITECTURE``, by that name (two for one
    is refused)."""
    found: dict[str, Report] = {}
    for info in pkgutil.iter_modules(report_modules.__path__):
        module = import_module(f"ictd_interp.analyses.reports.{info.name}")
        if (name := getattr(module, "ARCHITECTURE", None)) is None:
            continue
        if name in found:
            raise ImportError(f"analyses/reports/{info.name}.py: a second report for the {name!r} architecture")
        found[name] = Report(module.compute, module.lines, module.figures)
    return found


REPORTS = find_reports()


def report_for(architecture: str) -> Report:
    """The report of ``architecture``; an architecture registered without one is named with where to add it."""
    if architecture not in REPORTS:
        raise ValueError(
            f"architecture {architecture!r} (one of {', '.join(ARCHITECTURES)}) has no report: add "
            f"analyses/reports/<name>.py with ARCHITECTURE = {architecture!r}, compute, lines, figures"
        )
    return REPORTS[architecture]


CURVES = ("step", "eval_msve", "cos_A", "cos_V", "kernel_diagonality_mean", "kernel_diagonality_heads")


class Resolved(NamedTuple):
    """What ``analyze`` works on: the model, the task settings to evaluate it on, the folder holding its
    training curves (``metrics.jsonl``: a run folder or a shipped model; None for a bare checkpoint) and
    the checkpoint's metadata (an imported run's own logged metrics among them)."""

    model: HookedModel
    config: TrainConfig
    curves: Optional[Path]
    metadata: dict


def resolve(path: Union[str, Path]) -> Resolved:
    """The model at ``path`` (a run folder, a checkpoint or a shipped model's name) and what goes with it."""
    path = resolve_name(path)  # a registry name (``depth3-td-s0``) or a path
    if is_run(path):
        ckpt = path / "final" if (path / "final").exists() else latest_checkpoint(path)
        if ckpt is None:
            raise CheckpointError(f"{path}: run directory without any checkpoint yet")
        if ckpt.name != "final":  # a run still training (or stopped): say which weights are read
            warnings.warn(f"{path}: training not finished; reading its latest checkpoint, {ckpt.name}", stacklevel=2)
        return Resolved(load_checkpoint(ckpt).model, load_run_config(path), path, {})
    if not (path / CONFIG).exists() and not path.is_file():
        raise CheckpointError(
            f"{path}: neither a run directory (train_config.json + metrics.jsonl) nor a "
            f"checkpoint ({CONFIG} + model.safetensors)"
        )
    model, meta = load_checkpoint(path)
    cfg = type(model.cfg).from_dict(model.cfg.to_dict())  # the config's own copy, not the model's object
    try:  # settings stored beside the weights: an error names the file, not a flag nobody typed
        if "train_config" in meta:
            curves = path if path.is_dir() and (path / METRICS).exists() else None  # shipped models keep theirs
            return Resolved(model, TrainConfig.from_dict(meta["train_config"]), curves, meta)
        tasks = TaskDistribution(d_features=cfg.d_features, gamma=cfg.gamma)
        return Resolved(model, TrainConfig(model=cfg, tasks=tasks).with_flat(**meta.get("task", {})), None, meta)
    except (TypeError, ValueError) as err:
        header = (path if path.is_file() else path / CONFIG).with_name(CONFIG)
        raise CheckpointError(f"{header}: the stored training settings are invalid ({err})") from None


def training_curves(run_dir: Optional[Path]) -> Optional[dict[str, list]]:
    """The logged evaluation metrics over training (None without a run folder)."""
    if run_dir is None:
        return None
    rows = read_metrics(run_dir)
    return {key: [r[key] for r in rows] for key in CURVES if key in rows[0]}


def analyze(
    path: Union[str, Path],
    out_dir: Union[str, Path],
    neu: bool = True,
    draw: bool = True,
    resolved: Optional[Resolved] = None,
    stamp: bool = True,
) -> Summary:
    """Write ``summary.json``, ``summary.md`` and every figure (PNG and SVG) to ``out_dir`` (``neu``: with
    the NEU section, stylised models only; ``draw=False``: the numbers and words without figures, as a
    study cell keeps them, its study drawing across cells); returns the typed summary. ``resolved``: the model
    at ``path`` already read by ``resolve`` (the CLI reads it before it claims ``out_dir``); ``stamp=False``: the
    figures without the run's name in their corner."""
    model, config, run_dir, metadata = resolved or resolve(path)
    report = report_for(model.cfg.architecture)
    summary = report.compute(model, config, str(path), training_curves(run_dir), metadata, neu)
    if summary.in_context is not None and run_dir is not None and is_run(run_dir):
        summary.in_context.over_training = over_training(run_dir, config)
    label = source_label(summary.source)
    with staged(Path(out_dir)) as work:  # every file, or none (an interruption leaves the folder as it was)
        (work / "figures").mkdir()
        write_summary(summary, work / "summary.json")
        for name, fig in figures(summary).items() if draw else ():
            if stamp:  # which run this figure shows (off for a figure going into a paper)
                fig.suptitle(label, fontsize=8, color="dimgray", x=0.01, ha="left")
            for ext in ("png", "svg"):
                fig.savefig(work / "figures" / f"{name}.{ext}", dpi=120)
        write_with_figures(report.lines(summary), work, drawn=draw)
    (Path(out_dir) / "figures").mkdir(exist_ok=True)
    return summary


def figures(summary: Summary) -> dict[str, Figure]:
    """Every figure of a summary's report, by file name: the shared ones and its architecture's own."""
    return {**common_figures(summary), **report_for(summary.architecture).figures(summary)}


def source_label(source: str) -> str:
    """``runs/quick/run`` -> ``quick/run``: the run (or pretrained model) a figure shows."""
    parts = Path(source).parts
    return "/".join(parts[-2:]) if len(parts) > 1 else source
