"""The short lease's device checks, in one process: each check prints one JSON line (``device_checks.py --quick``).

Correctness (float32 on the device against the float64 CPU reference; ``pass`` within ``TOL`` of the reference's
scale, the largest error beside it): the forward of both architectures (full and query chunks), the fused backward,
a stack's gradients, and a short training run end to end (metrics, checkpoints) against the same run on the CPU.
The first line asserts the device; the gradient lines cover every parameter (A and V), the training run every
parameter and every logged metric. Speed: one model's training step in ms (the ``quick`` preset's batch) and stacked
model·steps/s at M = 1, 64 and 1,024 models (4 tasks each; the step alone, its batch built beforehand, so the host's
cost of drawing each run's batch is not in it), each with its target and pass/fail where one is set: on a GPU, the
compiled step <= 0.5 ms and >= 1e5 model·steps/s at M = 1,024; on a CPU, the largest stack >= 1.5x one model.
``--device cpu`` runs the same checks here (the suite does, small).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Optional

import torch

from ictd_interp import HookedICTDTransformer, HookedStandardTransformer, ICTDConfig
from ictd_interp.config import TaskDistribution, TrainConfig
from ictd_interp.config.registry import OBJECTIVES
from ictd_interp.config.standard import StandardConfig
from ictd_interp.models.chunked_attention import QUERY_CHUNK
from ictd_interp.models.stylised.stack import ModelStack
from ictd_interp.tasks.sampling import sample_tasks
from ictd_interp.training.batches import WindowBatch, window_batch
from ictd_interp.training.device_stream import DeviceBatches
from ictd_interp.training.objectives import td_loss
from ictd_interp.training.trainer import make_optimizer, prepare_model, train

TOL = 1e-4  # float32 against float64, relative to the reference's largest magnitude
STACKS = (1, 64, 1024)
STEP_MS_TARGET = 0.5  # a GPU: one model's compiled step (CUDA graphs), ms
STACK_TARGET = 1e5  # a GPU: stacked model·steps/s at M = 1,024 (the step with its batch drawn on the device)
CPU_SPEEDUP_TARGET = 1.5  # a CPU: the largest stack's model·steps/s over one model's


def error(got: torch.Tensor, want: torch.Tensor) -> float:
    """Largest absolute difference relative to ``max(1, |want|)``."""
    return float((got.detach().double().cpu() - want.detach().double().cpu()).abs().max()) / max(
        1.0, float(want.detach().abs().max())
    )


def forward(device: str) -> Iterator[dict]:
    models = {
        "stylised": HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=4, n_layers=3, dtype="float64")),
        "standard": HookedStandardTransformer(
            StandardConfig(d_features=4, d_model=16, n_heads=2, n_layers=2, d_mlp=32, dtype="float64", seed=3)
        ),
    }
    for name, model in models.items():
        for n, label in ((30, "full"), (QUERY_CHUNK + 76, "query chunks")):
            prompt = sample_tasks(2, 8, 4, n, 0.9, seed=1).prompt
            with torch.no_grad():
                want = model(prompt)
                got = model.to(torch.float32).to(device)(prompt.float().to(device))
            yield {"check": f"forward {name} ({label})", "max_error": error(got, want)}
            model.to(torch.float64).to("cpu")


def device_line(device: str) -> Iterator[dict]:
    """Where the checks run: a tensor made on ``device`` must be there (on a machine whose torch sees no GPU,
    ``cuda`` fails here, not later), with the device's name."""
    where = torch.ones(1, device=device).device.type
    name = torch.cuda.get_device_name(0) if where == "cuda" else "cpu (compared with itself in float32/float64)"
    yield {"check": "device", "name": name, "pass": where == torch.device(device).type}


def draws(device: str) -> Iterator[dict]:
    """Batches drawn on the device (``sampler = "device"``, float64): each run's batch in a stack of four (pools,
    shuffled rewards, supervised values) against its batch drawn alone there, and against the CPU's draws."""
    supervised = {"objective": "supervised"}
    settings = (
        supervised,
        {"task_pool": 3, **supervised},
        {"shuffle_rewards": True},
        {"task_pool": 5, "objective": "mc"},
    )
    configs = [
        TrainConfig.from_preset("quick", seed=s, sampler="device", device=device, **extra)
        for s, extra in enumerate(settings)
    ]
    stacked = DeviceBatches(configs, torch.float64).at(3)
    stack_error = cpu_error = 0.0
    for i, config in enumerate(configs):
        alone = DeviceBatches([config], torch.float64).at(3)
        on_cpu = DeviceBatches([replace(config, device="cpu")], torch.float64).at(3)
        entry = OBJECTIVES[config.objective]  # what the run's own objective reads of its batch
        fields = (
            ["prompts", "query_reward"] + ["query_value"] * entry.needs_values + ["query_return"] * entry.needs_returns
        )
        for name in fields:
            stack_error = max(stack_error, float((getattr(stacked, name)[i] - getattr(alone, name)).abs().max()))
            cpu_error = max(cpu_error, float((getattr(alone, name).cpu() - getattr(on_cpu, name)).abs().max()))
    yield {
        "check": "draws: a stacked run's batch against its own, on the device",
        "max_error": stack_error,
        "pass": stack_error <= 1e-12,
    }
    yield {
        "check": "draws: the device's batch against the CPU's (float64)",
        "max_error": cpu_error,
        "pass": cpu_error <= 1e-9,
    }


def grad_error(got: list[torch.Tensor], want: list[torch.Tensor]) -> float:
    """The largest ``error`` over every parameter's gradient (A and V of every unique layer)."""
    return max(error(g, w) for g, w in zip(got, want, strict=True))


def gradients(device: str) -> Iterator[dict]:
    """Every parameter's gradient of the TD loss: one model's (the fused backward) and a stack's, float32 on the
    device against each model's own float64 gradient on the CPU."""
    cfg = ICTDConfig(d_features=4, n_layers=3, tied=False, dtype="float64", init_scale=0.3, seed=5)
    dist = TaskDistribution(d_features=4, context_len=20)
    batches = [window_batch(dist, 4, 4, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    models = [HookedICTDTransformer(replace(cfg, seed=s)) for s in range(3)]
    wants = []
    for model, batch in zip(models, batches):
        td_loss(model, batch).backward()
        wants.append([g.clone() for a in model.unique_attention() for g in (a.A.grad, a.V.grad)])
    one = HookedICTDTransformer(replace(cfg, seed=0)).to(torch.float32).to(device)
    td_loss(one, batches[0].to(device, torch.float32)).backward()
    got = [g for a in one.unique_attention() for g in (a.A.grad, a.V.grad)]
    yield {"check": "fused backward, every parameter's gradient", "max_error": grad_error(got, wants[0])}
    stack = ModelStack([m.to(torch.float32).to(device) for m in models])
    td_loss(stack, WindowBatch.stack([b.to(device, torch.float32) for b in batches])).sum().backward()
    got = [g for i in range(3) for u in range(cfg.n_layers) for g in (stack.A.grad[i, u], stack.V.grad[i, u])]
    yield {
        "check": "stack, every model's every gradient",
        "max_error": grad_error(got, [g for want in wants for g in want]),
    }


def training_run(device: str) -> Iterator[dict]:
    """A short run end to end (evaluations, checkpoints, the final weights) on the device against the CPU's: every
    parameter and every logged metric, and the run's model on the device."""
    base = TrainConfig.from_flat(
        d_features=3,
        n_states=5,
        context_len=6,
        tasks_per_batch=4,
        windows_per_task=3,
        steps=20,
        eval_every=10,
        checkpoint_every=10,
        n_eval_tasks=8,
        n_layers=2,
        lr=1e-2,
    )
    with tempfile.TemporaryDirectory() as tmp:
        cpu = train(base, f"{tmp}/cpu", progress=False)
        other = train(replace(base, device=device), f"{tmp}/device", progress=False)
    on = {p.device.type for p in other.model.parameters()}
    yield {"check": "training run on the device", "devices": sorted(on), "pass": on == {torch.device(device).type}}
    yield {
        "check": "training run (20 steps): every parameter",
        "max_error": max(error(b, a) for a, b in zip(cpu.model.parameters(), other.model.parameters(), strict=True)),
    }
    yield {"check": "training run: every logged metric", "max_error": metric_error(cpu.metrics, other.metrics)}


def metric_error(want: list[dict], got: list[dict]) -> float:
    """The largest ``error`` over every number of every logged entry (nested lists too); a missing entry or key,
    or a non-finite number, is an infinite error."""
    if [m.get("step") for m in want] != [m.get("step") for m in got]:
        return float("inf")
    worst = 0.0
    for a, b in zip(want, got):
        for key in set(a) | set(b):
            if key in ("wall_time", "torch_threads") or isinstance(a.get(key), (str, bool)):
                continue  # times differ by machine; text and flags are not measured
            x, y = _numbers(a.get(key)), _numbers(b.get(key))
            if len(x) != len(y) or not all(map(math.isfinite, y)):
                return float("inf")
            if x:
                worst = max(worst, error(torch.tensor(y), torch.tensor(x)))
    return worst


def _numbers(value) -> list[float]:
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _numbers(v)]
    return [] if value is None or isinstance(value, (str, bool)) else [float(value)]


def step_ms(device: str, steps: int = 50, compiled: Optional[bool] = None) -> Iterator[dict]:
    """One model's training step (data moved in beforehand), median over ``steps``: eager, then (``compiled``;
    default: on a GPU) with the training path compiled as ``train --compile`` does, on a GPU in CUDA graphs."""
    compiled = device == "cuda" if compiled is None else compiled
    config = replace(TrainConfig.from_preset("quick"), device=device)
    batch = window_batch(
        config.tasks, config.tasks_per_batch, config.windows_per_task + 1, generator=torch.Generator().manual_seed(0)
    ).to(device, torch.float32)
    for compile_ in (False, True) if compiled else (False,):
        model = prepare_model(HookedICTDTransformer(config.model).to(device), replace(config, compile=compile_))
        optimizer = make_optimizer(config, model)
        times = _timed(lambda m=model, o=optimizer: _update(m, o, td_loss(m, batch)), device, steps)
        ms = 1e3 * sorted(times)[len(times) // 2]
        target = STEP_MS_TARGET if compile_ and device == "cuda" else None
        yield {
            "check": "one model's training step" + (", compiled" if compile_ else ""),
            "tasks_per_batch": config.tasks_per_batch,
            "n_layers": config.model.n_layers,
            "ms": round(ms, 3),
            **({"target_ms": target, "pass": ms <= target} if target else {}),
        }


def stacked(device: str, sizes: tuple[int, ...] = STACKS, steps: int = 10) -> Iterator[dict]:
    """Stacked model·steps/s of the quick model, 4 tasks per model, each step's batch of every model drawn on the
    device in the step (``sampler = "device"``), as a study's stack draws it."""
    config, rates = TrainConfig.from_preset("quick", tasks_per_batch=4, sampler="device", device=device), {}
    for m in sizes:
        models = [HookedICTDTransformer(replace(config.model, seed=s)) for s in range(m)]
        stack = ModelStack([x.to(device) for x in models])
        optimizer = torch.optim.Adam(stack.parameters(), lr=1e-3)
        draws = DeviceBatches([replace(config, seed=s) for s in range(m)], torch.float32, stacked=True)
        at = iter(range(10**9))
        step = lambda s=stack, o=optimizer, d=draws, i=at: _update(s, o, td_loss(s, d.at(next(i))).sum())  # noqa: E731
        times = _timed(step, device, steps)
        median = sorted(times)[len(times) // 2]
        rates[m] = m / median
        target = STACK_TARGET if device == "cuda" and m == 1024 else None
        yield {
            "check": f"stacked step, M = {m}",
            "models": m,
            "ms": round(1e3 * median, 3),
            "model_steps_per_s": round(rates[m], 1),
            **({"target_model_steps_per_s": target, "pass": rates[m] >= target} if target else {}),
        }
    if device == "cpu" and 1 in rates and len(rates) > 1:
        speedup = rates[max(rates)] / rates[1]
        yield {
            "check": f"stack speed-up, M = {max(rates)} over one model (4 tasks each)",
            "speedup": round(speedup, 2),
            "target": CPU_SPEEDUP_TARGET,
            "pass": speedup >= CPU_SPEEDUP_TARGET,
        }


def _update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def _timed(step: Callable[[], None], device: str, steps: int) -> list[float]:
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        sync()
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return times


CHECKS = {
    "device": device_line,
    "draws": draws,
    "forward": forward,
    "gradients": gradients,
    "training_run": training_run,
    "step_ms": step_ms,
    "stacked": stacked,
}


def run(device: str, only: tuple[str, ...] = tuple(CHECKS), **kwargs) -> list[dict]:
    """Every check in ``only``, each line printed as it finishes; a check that raises is a failed line."""
    lines = []
    for name in only:
        start = time.perf_counter()
        try:
            for line in CHECKS[name](device, **kwargs.get(name, {})):
                if "max_error" in line:
                    line["pass"] = bool(line["max_error"] <= TOL)
                lines.append({"device": device, **line, "seconds": round(time.perf_counter() - start, 2)})
                print(json.dumps(lines[-1]), flush=True)
        except Exception as err:  # noqa: BLE001 (a failed check is reported, the others still run)
            lines.append({"device": device, "check": name, "pass": False, "error": f"{type(err).__name__}: {err}"})
            print(json.dumps(lines[-1]), flush=True)
    return lines
