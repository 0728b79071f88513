"""Runs of one shape trained together in one process (``models/stylised/stack.py``), each into its own run folder.

``train_stack(configs, out_dirs)`` trains ``M`` runs of one shape whose configs may differ in their seeds, learning
rates and schedules, step counts, clipping and task pools (``FREE``): each run draws its own batches from its own
data generator (the batches its run alone draws), the stack steps every model in the
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

from ictd_interp.config.train import TrainConfig
from ictd_interp.io import run_folder
from ictd_interp.io.checkpoint import CheckpointError
from ictd_interp.models.stylised.stack import ModelStack, fast_path_refusal
from ictd_interp.training.allocator import apply_allocator_choice
from ictd_interp.training.batch_recipe import batch_refusal
from ictd_interp.training.batches import WindowBatch
from ictd_interp.training.device_stream import DeviceBatches
from ictd_interp.training.evaluation import EvalSet
from ictd_interp.training.objectives import objective as registered_objective
from ictd_interp.training.trainer import (
    Loop,
    Run,
    StopFlag,
    drive,
    make_optimizer,
    reopen_loop,
    rewind,
    set_learning_rate,
    settle_losses,
    start_loop,
)

# What may differ between the runs of one stack: their data and their schedule, never their shape. The model's
# seed may differ too (the stack holds each model's own weights).
FREE = ("seed", "lr", "lr_schedule", "warmup_steps", "steps", "grad_clip", "task_pool", "shuffle_rewards")


def stack_refusal(configs: list[TrainConfig]) -> Optional[str]:
    """Why these runs cannot be trained as one stack, or None: on the stylised model with the paper mask
    (``fast_path_refusal``), reading one batch (``batch_refusal``), eager, positional, at one depth each step (sampled
    depths with the device sampler, whose depth draws the runs share), their configs may differ only in ``FREE``
    (seeds, learning rate and its schedule, step count, clipping, task pool, shuffled rewards)."""
    first = configs[0]
    if (refusal := fast_path_refusal(first.model)) is not None:
        return refusal
    free = (*FREE, "objective") if first.sampler == "device" else FREE  # one batch draws every objective's needs
    if first.depth_range is not None and first.sampler != "device":
        return (
            "depth-sampled runs draw each step's depth per run, so their steps differ in shape (with sampler device "
            "every run draws the same depths: those stack)"
        )
    if first.compile:
        return "a stack runs the eager fast path (compile is off for stacks)"
    if first.forward != "positional":
        return "a stack runs the positional fast path (forward state-space runs one model at a time)"
    if first.loss_depths:
        return "loss_depths averages several depths per step: such runs train one at a time"
    shared = {name: getattr(first, name) for name in free}
    for i, config in enumerate(configs):
        if replace(config, **shared, model=replace(config.model, seed=first.model.seed)) != first:
            beyond = [d for d in first.differences(config) if d.split(":")[0] not in {*free, "model.seed"}]
            return f"configs[{i}]: differs from configs[0] beyond {', '.join(free)} ({'; '.join(beyond)})"
    return batch_refusal(configs)


def train_stack(
    configs: list[TrainConfig],
    out_dirs: list[Union[str, Path]],
    *,
    progress: bool = True,
    stop: Optional[StopFlag] = None,
    keep_freed_memory: Optional[bool] = None,
) -> list[Run]:
    """Train ``configs`` (one shape; ``FREE`` settings may differ) in one process, run ``i`` into ``out_dirs[i]``."""
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
    """Runs trained as a stack, ready for ``step_stack``: the runs still training at the latest step at which every
    one of them has a usable checkpoint (a stack killed between its runs' checkpoint writes leaves some a checkpoint
    ahead: they go back to the shared one, their later checkpoints set aside as ``superseded_step_…`` and their
    later metrics dropped, only once every run has agreed on the step; a ``CheckpointError`` changes nothing on disk
    but setting aside unusable checkpoints), and the runs already done (a stack's runs may stop at different step
    counts) at their own last step, where they stay."""
    configs = [run_folder.load_run_config(Path(d)) for d in out_dirs]
    _check(configs, out_dirs)
    eval_set = EvalSet.build(configs[0])
    done = {d for d in out_dirs if run_folder.final_dir(d).exists()}
    going = [d for d in out_dirs if d not in done]
    shared = dict(zip(going, _at_shared_step(going, eval_set))) if going else {}
    return [reopen_loop(d, eval_set) if d in done else shared[d] for d in out_dirs]


def _at_shared_step(out_dirs: list[Union[str, Path]], eval_set: EvalSet) -> list[Loop]:
    """``out_dirs`` reopened and rewound at the latest step at which each has a usable checkpoint."""
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
    """Step runs of one shape, all at one step, as one stack until done or stopped (``trainer.drive``). Runs whose
    learning rates differ (their rate, schedule, warm-up or step count) are stepped by ``_per_model_rates``; a run
    that is done stays in place while the others go on."""
    config = loops[0].run.config
    stack = ModelStack([loop.run.model for loop in loops])
    optimizer = make_optimizer(config, stack)
    _stack_optimizer_state(stack, optimizer, loops)
    objectives = {
        name: registered_objective(name) for name in dict.fromkeys(loop.run.config.objective for loop in loops)
    }
    trains = {  # which models train each objective (one objective: all of them, no mask)
        name: torch.tensor([loop.run.config.objective == name for loop in loops], device=stack.A.device)
        for name in objectives
    }
    one_rate = all(_schedule(loop.run.config) == _schedule(config) for loop in loops)  # decided once
    rates = None if one_rate else _rate_table(loops, stack.A)  # [step, model] on the device: no copy per step
    clips = torch.tensor([loop.run.config.grad_clip for loop in loops], dtype=stack.A.dtype, device=stack.A.device)
    clipping = any(loop.run.config.grad_clip for loop in loops)  # decided on the host: no read of ``clips``
    for loop in loops:
        loop.models_in_process = len(loops)

    unread: list[tuple[int, list[bool], torch.Tensor]] = []  # (step, runs stepped, losses on the device)
    drawn = (  # counter-based draws: every run's batch in one call on the device, else each run's own stream
        DeviceBatches([loop.run.config for loop in loops], stack.A.dtype, stacked=True)
        if config.sampler == "device"
        else None
    )

    def step() -> None:
        active = [loop.run.step < loop.run.config.steps for loop in loops]
        at = next(loop.run.step for loop, on in zip(loops, active) if on)  # the runs still training share it
        if drawn is not None:
            batch, depth = drawn.at(at), drawn.depth(at)  # one depth for every run: the device sampler's is shared
        else:
            batch, depth = WindowBatch.stack([next(loop.batches)[0] for loop in loops]), None
        losses = objectives_loss(objectives, trains, stack, batch, depth)
        unread.append((at + 1, active, losses.detach()))  # read once per log or checkpoint
        optimizer.zero_grad(set_to_none=True)
        losses.nan_to_num(0.0).sum().backward()  # each model's gradient is its own loss's
        if clipping:
            _clip_per_model(stack, clips)
        if rates is None:  # one schedule for all (and so one step count): the optimiser's own rate
            set_learning_rate(optimizer, config, at)
            optimizer.step()
        else:
            _per_model_rates(stack, optimizer, rates[at])
        for loop, on in zip(loops, active):
            loop.run.step += on

    def sync() -> None:
        settle_losses(loops, unread)
        for i, loop in enumerate(loops):
            stack.model(i)
            loop.optimizer.load_state_dict(_model_optimizer_state(stack, optimizer, loop.optimizer, i))

    return drive(loops, step, progress, stop, sync)


def objectives_loss(objectives: dict, trains: dict, stack: ModelStack, batch: WindowBatch, depth) -> torch.Tensor:
    """Each model's loss ``[model]`` under its own run's objective: one objective's losses for all, else each
    objective's losses where its models are (every objective runs on the whole stack, so ``k`` objectives cost
    ``k`` forwards; a model's gradient is still its own objective's)."""
    if len(objectives) == 1:
        return next(iter(objectives.values()))(stack, batch, depth=depth)
    return sum(torch.where(trains[name], obj(stack, batch, depth=depth), 0.0) for name, obj in objectives.items())


def _schedule(config: TrainConfig) -> tuple:
    """What sets a run's learning rate at every step."""
    return config.lr, config.lr_schedule, config.warmup_steps, config.steps


def _clip_per_model(stack: ModelStack, clips: torch.Tensor) -> None:
    """Each model's gradient clipped to its own ``grad_clip`` (0: not clipped) as ``clip_grad_norm_`` clips one
    model's: scaled by ``min(1, clip / (norm + 1e-6))``, its norm taken over all its weights."""
    grads = [p.grad for p in stack.parameters()]
    norms = torch.stack([g.flatten(1).square().sum(1) for g in grads]).sum(0).sqrt()  # [model]
    scale = torch.where(clips > 0, (clips / (norms + 1e-6)).clamp(max=1.0), torch.ones_like(norms))
    for g in grads:
        g.mul_(scale.view(-1, *[1] * (g.ndim - 1)))


def _rate_table(loops: list[Loop], like: torch.Tensor) -> torch.Tensor:
    """Each run's learning rate at every step, ``[step, model]``, 0 from its last step on (a done run stays in
    place), built once (``TrainConfig.lr_at``, exactly) and put on the stack's device."""
    configs = [loop.run.config for loop in loops]
    horizon = max(c.steps for c in configs)
    columns = {}  # each distinct schedule once: a study's runs share a few
    for c in configs:
        if _schedule(c) not in columns:
            columns[_schedule(c)] = [c.lr_at(t) if t < c.steps else 0.0 for t in range(horizon)]
    table = torch.tensor([columns[_schedule(c)] for c in configs], dtype=like.dtype)  # [model, step]
    return table.T.contiguous().to(like.device)


@torch.no_grad()
def _per_model_rates(stack: ModelStack, optimizer: torch.optim.Optimizer, rates: torch.Tensor) -> None:
    """One optimiser step with model ``m`` at learning rate ``rates[m]``: the step is taken at rate 1 and each
    model moved ``rates[m]`` of the way, ``w + r (w' - w)``. Adam's, AdamW's and SGD's updates are linear in the
    rate (the moments do not depend on it; AdamW's decay is ``r * wd * w``), so this is each run's own step up to
    rounding; a rate of 0 leaves a model exactly where it was."""
    before = [p.detach().clone() for p in stack.parameters()]
    for group in optimizer.param_groups:
        group["lr"] = 1.0
    optimizer.step()
    for p, w in zip(stack.parameters(), before):
        rate = rates.view(-1, *[1] * (p.ndim - 1))
        p.copy_(torch.where(rate == 0, w, torch.lerp(w, p, rate)))  # a done run's weights kept bit for bit


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
    lead = next((i for i, loop in enumerate(loops) if loop.run.step < loop.run.config.steps), 0)  # one still going
    stacked = dict(zip("AV", stack.parameters()))
    slices = stack.parameter_slices(0)
    for name, param in stacked.items():
        ks = sorted((u, k) for k, (n, u) in enumerate(slices) if n == name)
        per_key = {}
        for key in states[lead][ks[0][1]]:
            values = [[state[k][key] for _, k in ks] for state in states]
            per_key[key] = (
                torch.stack([torch.stack(v) for v in values]).to(param)
                if values[lead][0].shape == param.shape[2:]
                else values[lead][0].clone()  # the step count: a run still training's (a done run's stopped)
            )
        optimizer.state[param] = per_key
