"""Multi-task pretraining (docs/theory.md §6): seeded, resumable, with metrics against theta* as it goes.

The run folder's layout belongs to ``run_folder.py``. Resuming from a checkpoint replays the exact
same batches, so it reaches the same weights as an uninterrupted run (bit-exact at equal torch
thread counts; the count is recorded in ``metrics.jsonl``).
"""

from __future__ import annotations

import math
import pickle
import signal
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import torch

from ictd_interp.config.train import TrainConfig
from ictd_interp.io import run_folder
from ictd_interp.io.checkpoint import STATE as STATE_FILE
from ictd_interp.io.checkpoint import CheckpointError, save_checkpoint
from ictd_interp.io.progress import progress_bar
from ictd_interp.models.loading import load_checkpoint
from ictd_interp.models.registry import HookedModel, build_model
from ictd_interp.models.stylised.state_space import window_value_map_radius
from ictd_interp.training.allocator import apply_allocator_choice
from ictd_interp.training.batch_stream import BatchStream
from ictd_interp.training.device_stream import DeviceBatches
from ictd_interp.training.evaluation import EvalSet, evaluate
from ictd_interp.training.streams import open_stream

__all__ = ["Loop", "Run", "TrainingDiverged", "resume", "train"]


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the message names the step and the last good checkpoint."""


@dataclass
class Run:
    """A training run on disk and in memory."""

    out_dir: Path
    config: TrainConfig
    model: HookedModel
    step: int = 0
    metrics: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False


@dataclass
class Loop:
    """A run being stepped: what a checkpoint saves and ``log_metrics`` reads (``models_in_process``: how many
    models one process steps together, logged when more than one: ``training/stacked.py``)."""

    run: Run
    optimizer: torch.optim.Optimizer
    batches: Union[BatchStream, DeviceBatches]
    eval_set: EvalSet
    loss_sum: float = 0.0
    loss_count: int = 0
    started: float = field(default_factory=time.perf_counter)
    elapsed_before: float = 0.0
    models_in_process: int = 1
    unread: list = field(default_factory=list)  # (step, [True], loss on the device) since the last ``settle``

    def settle(self) -> None:
        """This run's losses since the last read (``settle_losses``)."""
        settle_losses([self], self.unread)


def settle_losses(loops: list[Loop], unread: list[tuple[int, list[bool], torch.Tensor]]) -> None:
    """Read the losses of the steps since the last read, once, onto the host (no step waits for the device): each
    stepped run's sum for its next log, or ``TrainingDiverged`` naming the first step with a non-finite loss and every
    run it is non-finite in, before any log or checkpoint is written (so the last checkpoint is always a good one).
    ``unread``: per step, ``(step, which of loops stepped, their losses [loop])``; emptied."""
    rows = torch.stack([losses.reshape(-1) for *_, losses in unread]).tolist() if unread else []
    for (at, active, _), row in zip(unread, rows):
        bad = [
            f"{loop.run.out_dir} ({value}; last good checkpoint: "
            f"{run_folder.latest_checkpoint(loop.run.out_dir) or 'none yet'})"
            for loop, value, on in zip(loops, row, active)
            if on and not math.isfinite(value)
        ]
        if bad:
            raise TrainingDiverged(f"non-finite loss at step {at} of {'; '.join(bad)}")
        for loop, value, on in zip(loops, row, active):
            if on:
                loop.loss_sum, loop.loss_count = loop.loss_sum + value, loop.loss_count + 1
    unread.clear()


StopFlag = Callable[[], bool]
STATE_KEYS = ("step", "optimizer", "generator", "loss_sum", "loss_count", "elapsed")  # save_state's


def train(
    config: TrainConfig,
    out_dir: Union[str, Path],
    *,
    progress: bool = True,
    stop: Optional[StopFlag] = None,
    keep_freed_memory: Optional[bool] = None,
) -> Run:
    """Train from scratch into ``out_dir`` (which must not already hold a run or other files).

    ``stop`` is polled after every step; when it returns True the run checkpoints and returns
    interrupted (studies use it to stop cells on Ctrl-C), as Ctrl-C does in the main thread.
    ``keep_freed_memory``: set glibc's allocator for this process so a CPU step reuses warm pages (faster,
    process-wide and permanent, so off unless asked; None reads ``ICTD_INTERP_KEEP_FREED_MEMORY``;
    ``ictd_interp.training.allocator``)."""
    apply_allocator_choice(keep_freed_memory)
    return run_loop(start_loop(config, out_dir), progress, stop)


def resume(
    out_dir: Union[str, Path],
    *,
    progress: bool = True,
    stop: Optional[StopFlag] = None,
    keep_freed_memory: Optional[bool] = None,
) -> Run:
    """Continue a run from its latest usable checkpoint; a finished run is returned as is.

    A checkpoint whose files are corrupt or truncated (an interrupted disk, a killed copy) is set
    aside (renamed ``unusable_step_…``, kept as it was) with a warning and the previous one is used:
    nothing is lost but the steps since."""
    apply_allocator_choice(keep_freed_memory)
    return run_loop(rewind(reopen_loop(out_dir)), progress, stop)


def start_loop(config: TrainConfig, out_dir: Union[str, Path], eval_set: Optional[EvalSet] = None) -> Loop:
    """A new run's folder, model, optimiser and data stream, with step 0 logged (``eval_set``: one already built
    for an equal evaluation, shared)."""
    out_dir = Path(out_dir)
    check_device(config.device)
    if run_folder.config_path(out_dir).exists() and not run_folder.never_started(out_dir):
        raise FileExistsError(
            f"{out_dir}: already holds a run; continue it with `ictd-interp train --resume "
            f"{out_dir}` or choose another --out"
        )
    if run_folder.never_started(out_dir):  # a request that failed before its first step: nothing to lose
        run_folder.clear_unstarted(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir}: not empty and not a training run; choose another --out")
    run_folder.write_run_config(out_dir, config)
    model = prepare_model(build_model(config.model).to(config.device), config)
    loop = Loop(
        Run(out_dir, config, model),
        make_optimizer(config, model),
        open_stream(config, torch.Generator().manual_seed(config.seed), model.cfg.torch_dtype),
        EvalSet.build(config) if eval_set is None else eval_set,
    )
    log_metrics(loop, loss=None)
    return loop


def reopen_loop(out_dir: Union[str, Path], eval_set: Optional[EvalSet] = None, up_to: Optional[int] = None) -> Loop:
    """A run's state at its latest usable checkpoint (with ``up_to``, the latest at or before that step), read
    only: an unusable checkpoint is set aside, nothing else on disk changes until ``rewind``."""
    out_dir = Path(out_dir)
    config = run_folder.load_run_config(out_dir)
    check_device(config.device)
    usable = [c for c in run_folder.checkpoints(out_dir) if up_to is None or run_folder.checkpoint_step(c) <= up_to]
    for ckpt in reversed(usable):
        try:
            model = prepare_model(load_checkpoint(ckpt, device=config.device).model, config)
            state = _training_state(ckpt / STATE_FILE)
            break
        except (CheckpointError, RuntimeError, OSError) as err:
            kept = run_folder.set_aside(ckpt)
            warnings.warn(
                f"{ckpt}: unusable checkpoint ({(str(err).splitlines() or [type(err).__name__])[0]}); "
                f"set aside as {kept.name}, trying the one before",
                stacklevel=3,
            )
    else:
        raise CheckpointError(f"{out_dir}: no usable checkpoint to resume from; start again in another folder")
    generator = torch.Generator()
    generator.set_state(state["generator"])
    loop = Loop(
        Run(out_dir, config, model, step=state["step"]),
        make_optimizer(config, model),
        open_stream(config, generator, model.cfg.torch_dtype, state["step"]),
        EvalSet.build(config) if eval_set is None else eval_set,
        state["loss_sum"],
        state["loss_count"],
        elapsed_before=state["elapsed"],
    )
    loop.optimizer.load_state_dict(state["optimizer"])
    loop.run.metrics = [m for m in run_folder.read_metrics(out_dir) if m["step"] <= loop.run.step]
    return loop


def rewind(loop: Loop) -> Loop:
    """Make a reopened run's folder agree with its step before it steps on: metrics logged after it are dropped
    (the run logs them again) and checkpoints after it set aside as ``superseded_step_…`` (a stack resumed from
    the step its runs share: ``stacked.resume_stack``), so no later resume starts from them."""
    run = loop.run
    for ckpt in run_folder.checkpoints(run.out_dir):
        if run_folder.checkpoint_step(ckpt) > run.step:
            run_folder.set_aside(ckpt, "superseded")
    run.metrics = run_folder.truncate_metrics(run.out_dir, run.step)
    return loop


def _training_state(path: Path) -> dict[str, Any]:
    """A checkpoint's optimiser, generator and counters (``save_state``'s), or a ``CheckpointError`` naming
    what is wrong with the file: torch.load fails on a cut or garbled file in many ways."""
    try:
        state = torch.load(path, weights_only=True)
    except (EOFError, pickle.UnpicklingError, RuntimeError, IndexError, ValueError) as err:
        raise CheckpointError(f"{path}: unreadable ({type(err).__name__}: {err})") from None
    missing = set(STATE_KEYS) - (set(state) if isinstance(state, dict) else set())
    if missing:
        raise CheckpointError(f"{path}: not a training state (missing {', '.join(sorted(missing))})")
    return state


def check_device(device: str) -> None:
    """Asked when a run starts, not when a config is built (a config stays a plain value)."""
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: 'cuda' requested but torch sees no CUDA device; use --device cpu")


def prepare_model(model: HookedModel, config: TrainConfig) -> HookedModel:
    """The model with its training path compiled when asked: on a GPU in CUDA graphs (``reduce-overhead``: one
    replay per step instead of a launch per kernel, the small-step floor), on a CPU by inductor alone."""
    if config.compile:
        allow_graphs(len(depths_trained(config)))
        model.compile_fast_path(**({"mode": "reduce-overhead"} if config.device == "cuda" else {}))
    return model


def depths_trained(config: TrainConfig) -> tuple[Optional[int], ...]:
    """Every depth a run's steps use: one compiled graph each (None: the model's own depth)."""
    if config.depth_range is not None:
        return tuple(range(config.depth_range[0], config.depth_range[1] + 1))
    return config.depth_list or (None,)


def allow_graphs(n: int) -> None:
    """Let torch keep ``n`` compiled graphs of the training path: past dynamo's recompile limit (8 by default) it
    falls back to eager for good, so a run sampling 12 depths would train mostly uncompiled."""
    import torch._dynamo

    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"  # its name before 2.6
    setattr(config, name, max(getattr(config, name), n + 2))


def make_optimizer(config: TrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    """The update as ``config.optimizer_kernel`` says: ``fused`` (one kernel per parameter) or ``foreach``
    (one multi-tensor kernel per update term, not a Python loop over the parameters: measured bit-identical
    to the loop on CPU for Adam, AdamW and SGD, a test holds it; torch's CPU default is the loop). Fused is
    the faster of the two on every model here (docs/performance.md, "Choices measured")."""
    params, kernel = list(model.parameters()), {config.optimizer_kernel: True}
    cls = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[config.optimizer]
    try:
        return cls(params, lr=config.lr, weight_decay=config.weight_decay, **kernel)
    except RuntimeError as err:  # a torch without this device's fused kernel
        raise ValueError(
            f"optimizer_kernel: 'fused' is not available here ({err}); use --optimizer-kernel foreach"
        ) from None


def run_loop(loop: Loop, progress: bool = True, stop: Optional[StopFlag] = None) -> Run:
    """Step one run until done or stopped (``drive``): what ``train`` and ``resume`` run after opening it."""
    return drive([loop], lambda: _step(loop), progress, stop)[0]


def drive(
    loops: list[Loop],
    step: Callable[[], None],
    progress: bool,
    stop: Optional[StopFlag],
    sync: Optional[Callable[[], None]] = None,
) -> list[Run]:
    """Step ``loops`` (runs at one step, sharing their evaluation and checkpoint schedule; a stack's runs may stop
    at different step counts) with ``step()`` until every run is done or a stop is asked: each run's metrics every
    ``eval_every`` steps and at its last, its checkpoint every ``checkpoint_every``, at its last and on a stop, its
    final weights when it is done. ``step()`` advances the runs not yet done (a done run stays in place). ``sync()``
    runs before each log and checkpoint (a stack writes its weights and optimiser state back into each run's model
    and optimiser)."""
    cfg, finished = loops[0].run.config, []
    undone = lambda: [loop for loop in loops if loop.run.step < loop.run.config.steps]  # noqa: E731
    bar = progress_bar(
        total=max(loop.run.config.steps for loop in loops),
        initial=loops[0].run.step,
        disable=not progress,
        desc="train",
    )
    with sigint_as_flag(stop) as interrupted:
        stopping = interrupted()  # polled once per step, so a stop is always followed by a checkpoint
        while (active := undone()) and not stopping:
            step()
            bar.update(1)
            at_end = [loop for loop in active if loop.run.step == loop.run.config.steps]
            logging = [loop for loop in active if loop.run.step % cfg.eval_every == 0 or loop in at_end]
            if logging:
                for loop in active:  # one read of the losses since the last: raises on a non-finite one
                    loop.settle()
                if sync is not None:
                    sync()
                entries = [log_metrics(loop, loss=loop.loss_sum / max(loop.loss_count, 1)) for loop in logging]
                bar.set_postfix(_postfix(entries[0]))
            stopping = interrupted()  # after the evaluation, so a stop asked during it still checkpoints now
            saving = [l for l in active if l.run.step % cfg.checkpoint_every == 0 or l in at_end or stopping]
            if saving and not logging:
                for loop in active:
                    loop.settle()
                if sync is not None:
                    sync()
            for loop in saving:
                save_state(loop)
            for loop in at_end:
                finished.append(finish(loop.run))
    bar.close()
    return [loop.run if any(loop.run is r for r in finished) else finish(loop.run) for loop in loops]


def finish(run: Run) -> Run:
    """Mark a run stopped early as interrupted; save a finished one's final weights."""
    run.interrupted = run.step < run.config.steps
    if not run.interrupted:
        save_checkpoint(run.model, run_folder.final_dir(run.out_dir), step=run.step, train_config=run.config.to_dict())
    return run


def step_loss(objective, model, batch, depth: Optional[int], config: TrainConfig) -> torch.Tensor:
    """The objective its batches were built for, at the step's depth, or averaged over ``config.loss_depths``;
    plus ``config.spectral_penalty`` times the mean radius of the layer's value map over the batch's tasks."""
    if not config.depth_list:
        loss = objective(model, batch, depth=depth)
    else:
        loss = torch.stack([objective(model, batch, depth=d) for d in config.depth_list]).mean(0)
    if config.spectral_penalty:
        loss = loss + config.spectral_penalty * window_value_map_radius(model, batch.space).mean()
    return loss


def set_learning_rate(optimizer: torch.optim.Optimizer, config: TrainConfig, step: int) -> None:
    """The learning rate of ``step`` (``TrainConfig.lr_at``), from the step alone: a resumed run needs no state."""
    for group in optimizer.param_groups:
        group["lr"] = config.lr_at(step)


def _step(loop: Loop) -> None:
    run, config = loop.run, loop.run.config
    batch, depth = next(loop.batches)
    loss = step_loss(loop.batches.objective, run.model, batch, depth, config)
    loop.unread.append((run.step + 1, [True], loss.detach()))  # read at the next log or checkpoint (``settle``)
    loop.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if config.grad_clip:
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), config.grad_clip)
    set_learning_rate(loop.optimizer, config, run.step)
    loop.optimizer.step()
    run.step += 1


def log_metrics(loop: Loop, loss: Optional[float]) -> dict[str, Any]:
    run = loop.run
    wall = loop.elapsed_before + time.perf_counter() - loop.started
    entry = {
        "step": run.step,
        "loss": loss,
        **evaluate(run.model, loop.eval_set).to_dict(),
        "wall_time": wall,
        "torch_threads": torch.get_num_threads(),
    }
    if loop.models_in_process > 1:
        entry["models_in_process"] = loop.models_in_process
    loop.loss_sum, loop.loss_count = 0.0, 0
    run.metrics.append(entry)
    run_folder.append_metrics(run.out_dir, entry)
    return entry


def _postfix(entry: dict[str, Any]) -> dict[str, str]:
    shown = {"loss": f"{entry['loss']:.4f}", "msve": f"{entry['eval_msve']:.3f}"}
    return {**shown, "cos_V": f"{min(entry['cos_V']):.3f}"} if "cos_V" in entry else shown


def save_state(loop: Loop) -> None:
    run = loop.run
    state = {
        "step": run.step,
        "optimizer": loop.optimizer.state_dict(),
        "generator": loop.batches.generator_state(),
        "loss_sum": loop.loss_sum,
        "loss_count": loop.loss_count,
        "elapsed": loop.elapsed_before + time.perf_counter() - loop.started,
    }
    save_checkpoint(
        run.model,
        run_folder.checkpoint_dir(run.out_dir, run.step),
        training_state=state,
        step=run.step,
        train_config=run.config.to_dict(),
    )


@contextmanager
def sigint_as_flag(stop: Optional[StopFlag] = None):
    """Ctrl-C (or ``stop()`` turning True) finishes the current step, writes a checkpoint and stops;
    a second Ctrl-C aborts at once. Outside the main thread, where signals cannot be caught,
    Ctrl-C behaves as usual."""
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
        yield (lambda: flag["set"]) if stop is None else (lambda: flag["set"] or stop())
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
