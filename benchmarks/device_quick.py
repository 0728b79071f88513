"""The short lease's device checks, in one process: each check prints one JSON line (``device_checks.py --quick``).

Correctness (float32 on the device against the float64 CPU reference; ``pass`` within ``TOL`` of the reference's
scale, the largest error beside it): the forward of both architectures (full and query chunks), the fused backward,
a stack's gradients, and a short training run end to end (metrics, checkpoints) against the same run on the CPU.
Speed: one model's training step in ms (the ``quick`` preset's batch) and stacked model·steps/s at M = 1, 64 and
1,024 models (4 tasks each). ``--device cpu`` runs the same checks here (the suite does, small).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Optional

import torch

from ictd_interp import HookedICTDTransformer, HookedStandardTransformer, ICTDConfig
from ictd_interp.config import TaskDistribution, TrainConfig
from ictd_interp.config.standard import StandardConfig
from ictd_interp.models.fast.chunked_attention import QUERY_CHUNK
from ictd_interp.models.fast.ictd_stack import ModelStack
from ictd_interp.tasks.sampling import sample_tasks
from ictd_interp.training.batches import WindowBatch, window_batch
from ictd_interp.training.objectives import td_loss
from ictd_interp.training.trainer import make_optimizer, prepare_model, train

TOL = 1e-4  # float32 against float64, relative to the reference's largest magnitude
STACKS = (1, 64, 1024)


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


def gradients(device: str) -> Iterator[dict]:
    cfg = ICTDConfig(d_features=4, n_layers=3, tied=False, dtype="float64", init_scale=0.3, seed=5)
    dist = TaskDistribution(d_features=4, context_len=20)
    batches = [window_batch(dist, 4, 4, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    models = [HookedICTDTransformer(replace(cfg, seed=s)) for s in range(3)]
    wants = []
    for model, batch in zip(models, batches):
        td_loss(model, batch).backward()
        wants.append([(a.A.grad.clone(), a.V.grad.clone()) for a in model.unique_attention()])
    one = HookedICTDTransformer(replace(cfg, seed=0)).to(torch.float32).to(device)
    td_loss(one, batches[0].to(device, torch.float32)).backward()
    yield {
        "check": "fused backward",
        "max_error": max(error(a.A.grad, w[0]) for a, w in zip(one.unique_attention(), wants[0])),
    }
    stack = ModelStack([m.to(torch.float32).to(device) for m in models])
    td_loss(stack, WindowBatch.stack([b.to(device, torch.float32) for b in batches])).sum().backward()
    yield {
        "check": "stack gradients",
        "max_error": max(error(stack.A.grad[i, u], g[0]) for i, want in enumerate(wants) for u, g in enumerate(want)),
    }


def training_run(device: str) -> Iterator[dict]:
    """A short run end to end (evaluations, checkpoints, the final weights) on the device against the CPU's."""
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
    yield {
        "check": "training run (20 steps, metrics and checkpoints)",
        "max_error": max(error(b, a) for a, b in zip(cpu.model.parameters(), other.model.parameters())),
    }


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
        yield {
            "check": "one model's training step" + (", compiled" if compile_ else ""),
            "tasks_per_batch": config.tasks_per_batch,
            "n_layers": config.model.n_layers,
            "ms": round(1e3 * sorted(times)[len(times) // 2], 3),
        }


def stacked(device: str, sizes: tuple[int, ...] = STACKS, steps: int = 10) -> Iterator[dict]:
    """Stacked model·steps/s of the quick model, 4 tasks per model."""
    config = TrainConfig.from_preset("quick")
    for m in sizes:
        models = [HookedICTDTransformer(replace(config.model, seed=s)) for s in range(m)]
        stack = ModelStack([x.to(device) for x in models])
        optimizer = torch.optim.Adam(stack.parameters(), lr=1e-3)
        one = window_batch(config.tasks, 4, config.windows_per_task + 1, generator=torch.Generator().manual_seed(0))
        batch = WindowBatch.stack([one] * m).to(device, torch.float32)
        times = _timed(lambda s=stack, o=optimizer, b=batch: _update(s, o, td_loss(s, b).sum()), device, steps)
        median = sorted(times)[len(times) // 2]
        yield {
            "check": f"stacked step, M = {m}",
            "models": m,
            "ms": round(1e3 * median, 3),
            "model_steps_per_s": round(m / median, 1),
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
