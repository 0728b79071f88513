"""Runs of one shape trained together in one process (``models/fast/ictd_stack.py``), each into its own run folder.

``train_stack(configs, out_dirs)`` trains ``M`` runs whose configs differ only in their seeds: each run draws its
own batches from its own data generator (the batches its run alone draws), the stack steps every model in the
same operations, one optimiser updates the stacked weights, and each run's folder is written as ``train`` writes
it (metrics, checkpoints with the run's own optimiser state and generator, final weights), so any run of a stack
resumes alone with ``resume`` and is analysed as any run. ``resume_stack`` continues them together. Each
model's weights equal its own run's up to the rounding of the stacked operations (the tolerance measured:
docs/performance.md, "Many models in one process").
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional, Union

import torch

from ictd_interp.config.model import ICTDConfig
from ictd_interp.config.train import TrainConfig
from ictd_interp.io.checkpoint import CheckpointError
from ictd_interp.models.fast.ictd_stack import ModelStack
from ictd_interp.training import run_folder
from ictd_interp.training.allocator import apply_allocator_choice
from ictd_interp.training.batches import WindowBatch
from ictd_interp.training.evaluation import EvalSet
from ictd_interp.training.objectives import objective as registered_objective
from ictd_interp.training.trainer import (
    Loop,
    Run,
    StopFlag,
    TrainingDiverged,
    drive,
    make_optimizer,
    reopen_loop,
    rewind,
    set_learning_rate,
    start_loop,
)


def stack_refusal(configs: list[TrainConfig]) -> Optional[str]:
    """Why these runs cannot be trained as one stack, or None: their configs must differ only in the seeds, on
    the stylised model with the paper mask, eager, with one depth for every step."""
    first = configs[0]
    if not isinstance(first.model, ICTDConfig) or first.model.mask != "paper":
        return "a stack runs the stylised model's paper-mask fast path"
    if first.depth_range is not None:
        return "depth-sampled runs draw each step's depth per run, so their steps differ in shape"
    if first.compile:
        return "a stack runs the eager fast path (compile is off for stacks)"
    if first.forward != "positional":
        return "a stack runs the positional fast path (forward state-space runs one model at a time)"
    if first.loss_depths or first.grad_clip:
        return "loss_depths and grad_clip are per model: such runs train one at a time"
    for i, config in enumerate(configs):
        if replace(config, seed=first.seed, model=replace(config.model, seed=first.model.seed)) != first:
            return f"configs[{i}]: differs from configs[0] beyond the seeds ({'; '.join(first.differences(config))})"
    return None


def train_stack(
    configs: list[TrainConfig],
    out_dirs: list[Union[str, Path]],
    *,
    progress: bool = True,
    stop: Optional[StopFlag] = None,
    keep_freed_memory: Optional[bool] = None,
) -> list[Run]:
    """Train ``configs`` (one shape, different seeds) in one process, run ``i`` into ``out_dirs[i]``."""
    apply_allocator_choice(keep_freed_memory)
    return step_stack(open_stack(configs, out_dirs), progress, stop)


def resume_stack(
    out_dirs: list[Union[str, Path]],
    *,
    progress: bool = True,
    stop: Optional[StopFlag] = None,
    keep_freed_memory: Optional[bool] = None,
) -> list[Run]:
    """Continue runs trained as a stack, together (``reopen_stack``)."""
    apply_allocator_choice(keep_freed_memory)
    return step_stack(reopen_stack(out_dirs), progress, stop)


def open_stack(configs: list[TrainConfig], out_dirs: list[Union[str, Path]]) -> list[Loop]:
    """New runs' folders, ready for ``step_stack``."""
    _check(configs, out_dirs)
    eval_set = EvalSet.build(configs[0])  # the evaluation tasks have their own seed: one set for every run
    return [start_loop(c, d, eval_set) for c, d in zip(configs, out_dirs)]


def reopen_stack(out_dirs: list[Union[str, Path]]) -> list[Loop]:
    """Runs trained as a stack, at the latest step at which every run has a usable checkpoint, ready for
    ``step_stack`` (a stack killed between its runs' checkpoint writes leaves some a checkpoint ahead: they go
    back to the shared one, their later checkpoints set aside as ``superseded_step_…`` and their later metrics
    dropped, only once every run has agreed on the step; a ``CheckpointError`` changes nothing on disk but
    setting aside unusable checkpoints)."""
    configs = [run_folder.load_run_config(Path(d)) for d in out_dirs]
    _check(configs, out_dirs)
    eval_set = EvalSet.build(configs[0])
    up_to = None
    while True:
        shared = set.intersection(
            *[
                {
                    run_folder.checkpoint_step(c)
                    for c in run_folder.checkpoints(d)
                    if up_to is None or run_folder.checkpoint_step(c) <= up_to
                }
                for d in out_dirs
            ]
        )
        if not shared:
            raise CheckpointError(
                "out_dirs: no step at which every run has a usable checkpoint; resume each alone "
                f"(`ictd-interp train --resume DIR`): {', '.join(map(str, out_dirs))}"
            )
        up_to = max(shared)
        loops = [reopen_loop(d, eval_set, up_to=up_to) for d in out_dirs]
        if len({loop.run.step for loop in loops}) == 1:  # else one was unusable (set aside): go back further
            return [rewind(loop) for loop in loops]
        up_to = min(loop.run.step for loop in loops)


def _check(configs: list[TrainConfig], out_dirs: list[Union[str, Path]]) -> None:
    if not configs or len(configs) != len(out_dirs):
        raise ValueError(f"configs, out_dirs: one folder per run ({len(configs)} configs, {len(out_dirs)} folders)")
    if len({Path(d).resolve() for d in out_dirs}) != len(out_dirs):
        raise ValueError("out_dirs: two runs of a stack would share a folder")
    refusal = stack_refusal(configs)
    if refusal is not None:
        raise ValueError(f"configs: cannot be trained as one stack: {refusal}")


def step_stack(loops: list[Loop], progress: bool = True, stop: Optional[StopFlag] = None) -> list[Run]:
    """Step runs of one shape, all at one step, as one stack until done or stopped (``trainer.drive``)."""
    config = loops[0].run.config
    stack = ModelStack([loop.run.model for loop in loops])
    optimizer = make_optimizer(config, stack)
    _stack_optimizer_state(stack, optimizer, loops)
    objective = registered_objective(config.objective)
    for loop in loops:
        loop.models_in_process = len(loops)

    def step() -> None:
        batch = WindowBatch.stack([next(loop.batches)[0] for loop in loops])
        losses = objective(stack, batch)
        if not torch.isfinite(losses).all():
            bad = [
                f"{loop.run.out_dir} ({value}; last good checkpoint: "
                f"{run_folder.latest_checkpoint(loop.run.out_dir) or 'none yet'})"
                for loop, value in zip(loops, losses.tolist())
                if not torch.isfinite(torch.tensor(value))
            ]
            raise TrainingDiverged(f"non-finite loss at step {loops[0].run.step + 1} of {'; '.join(bad)}")
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()  # each model's gradient is its own loss's
        set_learning_rate(optimizer, config, loops[0].run.step)
        optimizer.step()
        for loop, value in zip(loops, losses.tolist()):
            loop.loss_sum, loop.loss_count = loop.loss_sum + value, loop.loss_count + 1
            loop.run.step += 1

    def sync() -> None:
        for i, loop in enumerate(loops):
            stack.model(i)
            loop.optimizer.load_state_dict(_model_optimizer_state(stack, optimizer, loop.optimizer, i))

    return drive(loops, step, progress, stop, sync)


def _model_optimizer_state(
    stack: ModelStack, optimizer: torch.optim.Optimizer, own: torch.optim.Optimizer, i: int
) -> dict:
    """Model ``i``'s optimiser state, read from the stack's (the per-entry tensors sliced, the step copied), in
    the form its own run's optimiser saves."""
    stacked = dict(zip("AV", stack.parameters()))
    state = {}
    for k, (name, u) in enumerate(stack.parameter_slices(i)):
        entries = optimizer.state.get(stacked[name], {})
        state[k] = {
            key: (t[i, u].clone() if t.shape == stacked[name].shape else t.clone()) if torch.is_tensor(t) else t
            for key, t in entries.items()
        }
    return {"state": {k: v for k, v in state.items() if v}, "param_groups": own.state_dict()["param_groups"]}


def _stack_optimizer_state(stack: ModelStack, optimizer: torch.optim.Optimizer, loops: list[Loop]) -> None:
    """The stack's optimiser state from each run's (resumed) optimiser: nothing for runs that start fresh."""
    states = [loop.optimizer.state_dict()["state"] for loop in loops]
    if not any(states):
        return
    stacked = dict(zip("AV", stack.parameters()))
    slices = stack.parameter_slices(0)
    for name, param in stacked.items():
        ks = sorted((u, k) for k, (n, u) in enumerate(slices) if n == name)
        per_key = {}
        for key in states[0][ks[0][1]]:
            values = [[state[k][key] for _, k in ks] for state in states]
            per_key[key] = (
                torch.stack([torch.stack(v) for v in values]).to(param)
                if values[0][0].shape == param.shape[2:]
                else values[0][0].clone()
            )
        optimizer.state[param] = per_key
