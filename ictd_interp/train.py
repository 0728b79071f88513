"""Multi-task pretraining (SPEC §6): seeded, resumable, with metrics against theta* as it goes.

A run directory holds ``config.json``, ``metrics.jsonl``, ``checkpoints/step_XXXXXXX/`` (each a core
checkpoint plus ``training_state.pt``: optimiser, data-generator state and step) and ``final/``.
Resuming from a checkpoint replays the exact same batches, so it reaches the same weights as an
uninterrupted run.
"""

from __future__ import annotations

import json
import signal
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import torch
from tqdm.auto import tqdm

from ictd_interp.checkpoint import STATE as STATE_FILE
from ictd_interp.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ictd_interp.data import window_batch
from ictd_interp.evaluation import EvalSet, evaluate
from ictd_interp.model import HookedICTDTransformer
from ictd_interp.objectives import LOSSES
from ictd_interp.train_config import PRESETS, TrainConfig

__all__ = ["PRESETS", "Run", "TrainConfig", "TrainingDiverged", "read_metrics", "resume", "train"]

class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message names the step and the last good checkpoint."""


@dataclass
class Run:
    """A training run on disk and in memory."""

    out_dir: Path
    config: TrainConfig
    model: HookedICTDTransformer
    step: int = 0
    metrics: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False


@dataclass
class _Loop:
    run: Run
    optimizer: torch.optim.Optimizer
    generator: torch.Generator
    eval_set: EvalSet
    loss_sum: float = 0.0
    loss_count: int = 0
    started: float = field(default_factory=time.perf_counter)
    elapsed_before: float = 0.0


def train(config: TrainConfig, out_dir: Union[str, Path], *, progress: bool = True) -> Run:
    """Train from scratch into ``out_dir`` (which must not already hold a run)."""
    out_dir = Path(out_dir)
    if (out_dir / "config.json").exists():
        raise FileExistsError(f"{out_dir}: already holds a run; use resume({str(out_dir)!r}) or another folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    (out_dir / "metrics.jsonl").write_text("")
    model = HookedICTDTransformer(config.model).to(config.device)
    loop = _Loop(Run(out_dir, config, model), _optimizer(config, model),
                 torch.Generator().manual_seed(config.seed), EvalSet.build(config))
    _log(loop, loss=None)
    return _run(loop, progress)


def resume(out_dir: Union[str, Path], *, progress: bool = True) -> Run:
    """Continue a run from its latest checkpoint; a finished run is returned as is."""
    out_dir = Path(out_dir)
    config = load_run_config(out_dir)
    ckpt = latest_checkpoint(out_dir)
    if ckpt is None:
        raise CheckpointError(f"{out_dir}: no checkpoint to resume from; start again with train()")
    model = load_checkpoint(ckpt, device=config.device).model
    state = torch.load(ckpt / STATE_FILE, weights_only=True)
    loop = _Loop(Run(out_dir, config, model, step=state["step"]), _optimizer(config, model),
                 torch.Generator(), EvalSet.build(config), state["loss_sum"], state["loss_count"],
                 elapsed_before=state["elapsed"])
    loop.optimizer.load_state_dict(state["optimizer"])
    loop.generator.set_state(state["generator"])
    loop.run.metrics = _truncate_metrics(out_dir, loop.run.step)
    return _run(loop, progress)


def load_run_config(out_dir: Path) -> TrainConfig:
    path = Path(out_dir) / "config.json"
    if not path.exists():
        raise FileNotFoundError(f"{out_dir}: not a training run (no config.json)")
    return TrainConfig.from_dict(json.loads(path.read_text()))


def latest_checkpoint(out_dir: Path) -> Optional[Path]:
    steps = sorted((Path(out_dir) / "checkpoints").glob("step_*"))
    return steps[-1] if steps else None


def read_metrics(out_dir: Union[str, Path]) -> list[dict[str, Any]]:
    lines = (Path(out_dir) / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _truncate_metrics(out_dir: Path, step: int) -> list[dict[str, Any]]:
    """Drop lines logged after the checkpoint, which the resumed run will log again."""
    kept = [m for m in read_metrics(out_dir) if m["step"] <= step]
    (out_dir / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in kept))
    return kept


def _optimizer(config: TrainConfig, model: HookedICTDTransformer) -> torch.optim.Optimizer:
    params = list(model.parameters())
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, weight_decay=config.weight_decay)
    cls = torch.optim.AdamW if config.optimizer == "adamw" else torch.optim.Adam
    return cls(params, lr=config.lr, weight_decay=config.weight_decay)


def _run(loop: _Loop, progress: bool) -> Run:
    run, cfg = loop.run, loop.run.config
    bar = tqdm(total=cfg.steps, initial=run.step, disable=not progress, desc="train", dynamic_ncols=True)
    with _sigint_as_flag() as interrupted:
        while run.step < cfg.steps and not interrupted():
            _step(loop)
            bar.update(1)
            if run.step % cfg.eval_every == 0 or run.step == cfg.steps:
                bar.set_postfix(_postfix(_log(loop, loss=loop.loss_sum / max(loop.loss_count, 1))))
            if run.step % cfg.checkpoint_every == 0 or run.step == cfg.steps or interrupted():
                _checkpoint(loop)
    bar.close()
    run.interrupted = run.step < cfg.steps
    if not run.interrupted:
        save_checkpoint(run.model, run.out_dir / "final", step=run.step, train_config=cfg.to_dict())
    return run


def _step(loop: _Loop) -> None:
    run, cfg = loop.run, loop.run.config
    batch = window_batch(cfg.tasks_per_batch, cfg.windows_per_task + 1, cfg.n_states, cfg.d_features,
                         cfg.context_len, cfg.gamma, feature_kind=cfg.feature_kind,
                         feature_scale=cfg.feature_scale, generator=loop.generator,
                         mc_horizon=cfg.mc_horizon if cfg.objective == "mc" else 0)
    loss = LOSSES[cfg.objective](run.model, batch.to(cfg.device, run.model.cfg.torch_dtype))
    if not torch.isfinite(loss):
        last = latest_checkpoint(run.out_dir)
        raise TrainingDiverged(f"non-finite loss ({loss.item()}) at step {run.step + 1}; "
                               f"last good checkpoint: {last if last else 'none yet'}")
    loop.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    loop.optimizer.step()
    loop.loss_sum, loop.loss_count = loop.loss_sum + loss.item(), loop.loss_count + 1
    run.step += 1


def _log(loop: _Loop, loss: Optional[float]) -> dict[str, Any]:
    run = loop.run
    wall = loop.elapsed_before + time.perf_counter() - loop.started
    entry = {"step": run.step, "loss": loss, **evaluate(run.model, loop.eval_set), "wall_time": wall}
    loop.loss_sum, loop.loss_count = 0.0, 0
    run.metrics.append(entry)
    with open(run.out_dir / "metrics.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")
    return entry


def _postfix(entry: dict[str, Any]) -> dict[str, str]:
    return {"loss": f"{entry['loss']:.4f}", "cos_V": f"{min(entry['cos_V']):.3f}",
            "msve": f"{entry['eval_msve']:.3f}"}


def _checkpoint(loop: _Loop) -> None:
    run = loop.run
    state = {"step": run.step, "optimizer": loop.optimizer.state_dict(), "generator": loop.generator.get_state(),
             "loss_sum": loop.loss_sum, "loss_count": loop.loss_count,
             "elapsed": loop.elapsed_before + time.perf_counter() - loop.started}
    save_checkpoint(run.model, run.out_dir / "checkpoints" / f"step_{run.step:07d}",
                    training_state=state, step=run.step, train_config=run.config.to_dict())


@contextmanager
def _sigint_as_flag():
    """Ctrl-C finishes the current step, writes a checkpoint and stops; a second Ctrl-C aborts at
    once. Outside the main thread, where signals cannot be caught, Ctrl-C behaves as usual."""
    flag = {"set": False}

    def handler(signum, frame):
        if flag["set"]:
            raise KeyboardInterrupt
        flag["set"] = True

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:
        previous = None
    try:
        yield lambda: flag["set"]
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
