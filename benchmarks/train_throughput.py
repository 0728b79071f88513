"""Training throughput against the machine's own GEMM rate, for both architectures, in one run (ratios).

Usage: python benchmarks/train_throughput.py [--threads 2] [--repeats 20] [--rounds 7]
       [--device cpu|cuda] [--compile [--compile-mode MODE]] [--default-allocator]

Three models, each on its training batch: the stylised ``quick`` model with tied weights and the
``paper`` model with per-layer weights (d = 4, n = 30, L = 3; 64 tasks x 17 windows = 1,088 prompts),
and ``standard-quick`` (3 layers, d_model 32, 2 heads, MLP 64; 16 x 17 = 272 prompts); the two
stylised ones also with ``backward="autograd"`` (``*_autograd``: the shipped models' numerics; the
default is the hand-written ``"fused"`` backward). Measured alternately in rounds (median), so machine
load drifts out of the ratios:

* model step: TD loss forward + backward on a fixed batch (the objectives' ``fast_values``);
* full step: the trainer's next batch (fresh data from its ``BatchStream``, built in blocks of 8 batches
  for Boyan chains), forward, backward, optimiser (the default fused kernel); and the model step's share
  of it (1.0: data and optimiser cost nothing); the data alone (``data_ms``: the stream's batches by
  themselves, a block's cost spread over its batches, which costs less than its share of a full step,
  where it runs between the model's steps on cold caches);
* ``full_over_model_step_rounds_min_max``: that share within each round, its smallest and largest (how
  far one measurement swings on a shared machine);
* a 1024 x 1024 fp32 GEMM rate, and the fraction of it each model step reaches under the analytic
  FLOP counts below;
* the model step's matrix products alone (``products``, ``benchmarks/products.py``): every matrix
  product one model step calls, forward and backward, replayed back to back: their ms, count, GFLOP,
  fraction of the GEMM rate, and share of the model step (the step's floor while its products stay);
* hooked forward over a bare-torch forward of the same math (stylised, per-layer);
* ``fixed_and_marginal`` (the two stylised models): the model step also on one task's windows, so the step
  splits into a fixed cost (operator dispatch, autograd) and a marginal cost per prompt, a line through the two
  batch sizes; ``marginal_fraction_of_gemm_rate`` is the fraction a step would reach with no fixed cost at all
  (the ceiling of the target's ratio for these kernels on this CPU);
* ``--compile``: the same model steps with ``compile_fast_path()`` (``TrainConfig.compile``), and the
  seconds each took to compile, timed after all the eager rounds: once a process has run compiled code,
  its eager steps ran 17-67 % slower on a 2-core AMD EPYC (2026-12-01; ``TORCHINDUCTOR_COMPILE_THREADS=1``
  did not change it), so compiled and eager steps are not interleaved; ``--compile-mode`` passes
  ``torch.compile``'s ``mode`` (e.g. ``max-autotune-no-cudagraphs``: inductor also times its own C++
  GEMM templates against ATen's for every matrix product and keeps the faster);
* ``--device cuda``: everything on the GPU, and each model's loss and gradients checked against the
  CPU's on the same batch and weights (fp32, within 1e-4 relative to the largest).

Training keeps freed memory in the process (``ictd_interp/training/allocator.py``), so the benchmark
does too; ``--default-allocator`` measures with the C library's default instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Optional

import torch
from products import MatrixProducts  # benchmarks/products.py (benchmarks/ is the script's folder)

from ictd_interp.config.train import TrainConfig
from ictd_interp.models.registry import build_model
from ictd_interp.training.allocator import keep_freed_memory
from ictd_interp.training.batch_stream import BatchStream
from ictd_interp.training.objectives import td_loss
from ictd_interp.training.trainer import make_optimizer

STYLISED = ("tied", "per_layer")  # the models whose step has a target (fixed_and_marginal)
COMPILE_MODES = ("default", "max-autotune", "max-autotune-no-cudagraphs")
CONFIGS = {  # the tied model at the per-layer one's depth (3), so the two compare step for step
    "tied": ("quick", {"n_layers": 3}),
    "per_layer": ("paper", {}),
    "standard": ("standard-quick", {}),
    "tied_autograd": ("quick", {"n_layers": 3, "backward": "autograd"}),
    "per_layer_autograd": ("paper", {"backward": "autograd"}),
}


def flops_per_sample(d: int, n: int, layers: int, heads: int = 1) -> float:
    """The stylised model's math per prompt, as the hooked forward computes it (P = n + 1 positions).
    Per layer: scores ``x_j^T A x_i`` 2 d P^2, softmax about 5 P^2, and per head pattern @ value row
    2 P^2 and the value row ``V z`` 2 (d + 3) P. Backward about twice forward: x 3. The fast path skips
    part of this (a tied model's pattern once, the last layer's query row only), which the fraction of
    the GEMM rate credits to it. (d = 4, n = 30, L = 3: 0.134 MFLOP.)"""
    P = n + 1
    forward = layers * (2 * d * P**2 + 5 * P**2 + heads * (2 * P**2 + 2 * (d + 3) * P))
    return 3.0 * forward


def standard_flops_per_sample(d: int, n: int, layers: int, d_model: int, heads: int, d_head: int, d_mlp: int) -> float:
    """The standard model's math per prompt as the hooked forward computes it (P = n + 1 positions,
    S = n sources, D = d_model, H E = heads x d_head, M = d_mlp). Read-in 2 (d + 3) D P; per layer:
    q, k, v 6 D H E P, scores and pattern @ v 4 H E P S, softmax 5 H P S, output 2 H E D P, MLP
    4 D M P, GELU about 8 M P, two LayerNorms about 16 D P; final LayerNorm 8 D P and read-out 2 D P.
    Backward about twice forward: x 3. (standard-quick: 6.1 MFLOP.)"""
    P, S, D, HE = n + 1, n, d_model, heads * d_head
    per_layer = (
        6 * D * HE * P
        + 4 * HE * P * S
        + 5 * heads * P * S
        + 2 * HE * D * P
        + 4 * D * d_mlp * P
        + 8 * d_mlp * P
        + 16 * D * P
    )
    return 3.0 * (2 * (d + 3) * D * P + layers * per_layer + 10 * D * P)


def model_flops(config: TrainConfig) -> float:
    m, t = config.model, config.tasks
    if config.architecture == "standard":
        return standard_flops_per_sample(
            t.d_features, t.context_len, m.n_layers, m.d_model, m.n_heads, m.d_head, m.d_mlp
        )
    return flops_per_sample(t.d_features, t.context_len, m.n_layers, m.n_heads)


def bare_forward(prompt: torch.Tensor, params: list[tuple[torch.Tensor, torch.Tensor]], gamma: float) -> torch.Tensor:
    """The TSM model's math in the hooked forward's own layout, as plain tensor ops (no modules, no hook
    points): hooked / bare is the cost of the hook points and modules alone."""
    cur, tgt = prompt.shape[-1] - 1, prompt.shape[-1] - 2
    keep = torch.ones(prompt.shape[-1], dtype=prompt.dtype, device=prompt.device)
    keep[tgt] = 0.0
    onehot_t = 1.0 - keep
    z = prompt
    for A, V in params:
        q = (z.reshape(-1, z.shape[-1]) @ A[0].T).view_as(z)
        scores = q @ z.transpose(1, 2)
        scores[..., -1] = float("-inf")
        v = (z.reshape(-1, z.shape[-1]) @ V[0].T).view_as(z)
        z = z + torch.softmax(scores, -1) @ v
        nxt = torch.cat([z[:, 1:, cur], torch.zeros_like(z[:, :1, cur])], dim=1)
        z = z * keep + gamma * nxt.unsqueeze(-1) * onehot_t
    return z[..., cur]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def seconds(fn, repeats: int, device: str) -> float:
    fn()
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync(device)
    return (time.perf_counter() - start) / repeats


def gemm_flops_per_s(device: str, repeats: int) -> float:
    a, b = torch.randn(1024, 1024, device=device), torch.randn(1024, 1024, device=device)
    return 2 * 1024**3 / seconds(lambda: a @ b, repeats, device)


class Bench:
    """One model, its fixed batch, its data generator and its optimiser."""

    def __init__(self, name: str, device: str, compiled: bool = False, mode: Optional[str] = None):
        preset, flat = CONFIGS[name]
        self.config = TrainConfig.from_preset(preset, device=device, **flat)
        self.model = build_model(self.config.model).to(device)
        self.batches = BatchStream(self.config, torch.Generator().manual_seed(0), torch.float32)
        self.batch = next(self.batches)[0]
        self.one_task = self.batch.select_tasks(slice(0, 1))  # the first task's windows (fixed_and_marginal)
        self.optimizer = make_optimizer(self.config, self.model)
        self.compile_s = 0.0
        self.products = MatrixProducts()  # the eager step's products (reported for the eager benches alone)
        if not compiled:
            with self.products:
                self.model_step()
        if compiled:
            start = time.perf_counter()
            self.model.compile_fast_path(**({} if mode is None else {"mode": mode}))
            self.model_step()
            self.compile_s = time.perf_counter() - start

    def model_step(self) -> None:
        td_loss(self.model, self.batch).backward()

    def one_task_step(self) -> None:
        """The model step on the first task's windows alone (``fixed_and_marginal``)."""
        td_loss(self.model, self.one_task).backward()

    def data_step(self) -> None:
        next(self.batches)

    def full_step(self) -> None:
        batch, depth = next(self.batches)
        self.optimizer.zero_grad(set_to_none=True)
        td_loss(self.model, batch, depth=depth).backward()
        self.optimizer.step()


def cuda_agreement(name: str) -> float:
    """Largest |CUDA - CPU| over the loss and every gradient, relative to the largest CPU value."""
    cpu, gpu = Bench(name, "cpu"), Bench(name, "cuda")
    gpu.model.load_state_dict(cpu.model.state_dict())
    out = []
    for bench, batch in ((cpu, cpu.batch), (gpu, cpu.batch.to("cuda", torch.float32))):
        loss = td_loss(bench.model, batch)
        grads = torch.autograd.grad(loss, list(bench.model.parameters()))
        out.append(torch.cat([loss.reshape(1), *[g.flatten() for g in grads]]).double().cpu())
    return float((out[0] - out[1]).abs().max() / out[0].abs().max())


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--compile", action="store_true", help="also time compile_fast_path() model steps")
    parser.add_argument("--compile-mode", choices=COMPILE_MODES, help="torch.compile's mode (default: its default)")
    parser.add_argument("--default-allocator", action="store_true", help="do not keep freed memory (as training does)")
    args = parser.parse_args()
    if args.compile_mode and not args.compile:
        parser.error("--compile-mode: only with --compile (it sets the mode of the compiled steps)")
    return args


def eager_rounds(benches: dict[str, Bench], args: argparse.Namespace) -> dict[str, list[float]]:
    """Every eager timing, each round alternating every measurement (a drift of the machine hits them alike); the
    hooked per-layer model checked against the bare forward first."""
    dev, per_layer = args.device, benches["per_layer"].model
    params = [(b.attn.A.detach(), b.attn.V.detach()) for b in per_layer.blocks]
    prompts = benches["per_layer"].batch.prompts
    with torch.no_grad():
        assert torch.allclose(per_layer(prompts), bare_forward(prompts, params, 0.9), atol=1e-5)
    rounds: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, bench in benches.items():
            rounds.setdefault(f"model_{name}", []).append(seconds(bench.model_step, args.repeats, dev))
            rounds.setdefault(f"full_{name}", []).append(seconds(bench.full_step, args.repeats, dev))
            rounds.setdefault(f"data_{name}", []).append(seconds(bench.data_step, args.repeats, dev))
            rounds.setdefault(f"products_{name}", []).append(seconds(bench.products.replay, args.repeats, dev))
            if name in STYLISED:
                rounds.setdefault(f"one_task_{name}", []).append(seconds(bench.one_task_step, args.repeats, dev))
        with torch.no_grad():
            rounds.setdefault("hooked", []).append(seconds(lambda: per_layer(prompts), args.repeats, dev))
            rounds.setdefault("bare", []).append(seconds(lambda: bare_forward(prompts, params, 0.9), args.repeats, dev))
        rounds.setdefault("gemm", []).append(gemm_flops_per_s(dev, 10))
    return rounds


def compiled_rounds(args: argparse.Namespace, rounds: dict[str, list[float]]) -> dict[str, Bench]:
    """With ``--compile``, the compiled models' steps timed into ``rounds``, after every eager round (a process
    that has compiled runs eager steps slower: module docstring); their benches."""
    if not args.compile:
        return {}
    compiled = {
        name: Bench(name, args.device, compiled=True, mode=args.compile_mode)
        for name in CONFIGS
        if "autograd" not in name
    }
    for _ in range(args.rounds):
        for name, bench in compiled.items():
            rounds.setdefault(f"compiled_{name}", []).append(seconds(bench.model_step, args.repeats, args.device))
    return compiled


def main() -> None:
    args = arguments()
    kept = False if args.default_allocator else keep_freed_memory()
    torch.set_num_threads(args.threads)
    dev = args.device
    benches = {name: Bench(name, dev) for name in CONFIGS}
    rounds = eager_rounds(benches, args)
    compiled = compiled_rounds(args, rounds)
    med = {k: statistics.median(v) for k, v in rounds.items()}
    gemm = med.pop("gemm")
    samples = {name: b.batch.prompts.shape[0] for name, b in benches.items()}
    flops = {name: model_flops(b.config) for name, b in benches.items()}

    def spread(num: str, den: str) -> list[float]:  # the ratio within each round: how far one run can swing
        ratios = [n / d for n, d in zip(rounds[num], rounds[den])]
        return [round(min(ratios), 3), round(max(ratios), 3)]

    def fraction(key: str, name: str) -> float:
        return round(samples[name] * flops[name] / med[key] / gemm, 4)

    def fixed_and_marginal(name: str) -> dict[str, float]:  # a line through one task's step and the whole batch's
        few = benches[name].batch.n_windows
        marginal = (med[f"model_{name}"] - med[f"one_task_{name}"]) / (samples[name] - few)
        return {
            "one_task_prompts": few,
            "one_task_ms": round(med[f"one_task_{name}"] * 1e3, 3),
            "fixed_ms": round((med[f"one_task_{name}"] - few * marginal) * 1e3, 3),
            "marginal_us_per_prompt": round(marginal * 1e6, 3),
            "marginal_fraction_of_gemm_rate": round(flops[name] / marginal / gemm, 4),
        }

    result = {
        "device": dev,
        "threads": args.threads,
        "allocator_keeps_freed_memory": kept,
        "rounds": args.rounds,
        "prompts_per_step": samples,
        "analytic_mflop_per_sample": {k: round(v / 1e6, 4) for k, v in flops.items()},
        "gemm_1024_gflop_per_s": round(gemm / 1e9, 1),
        "model_step_ms": {name: round(med[f"model_{name}"] * 1e3, 2) for name in benches},
        "model_step_samples_per_s": {name: round(samples[name] / med[f"model_{name}"]) for name in benches},
        "model_step_fraction_of_gemm_rate": {name: fraction(f"model_{name}", name) for name in benches},
        "fixed_and_marginal": {name: fixed_and_marginal(name) for name in STYLISED},
        "products": {
            name: {
                "ms": round(med[f"products_{name}"] * 1e3, 2),
                "calls": len(b.products.calls),
                "gflop": round(b.products.flops / 1e9, 4),
                "fraction_of_gemm_rate": round(b.products.flops / med[f"products_{name}"] / gemm, 3),
                "share_of_model_step": round(med[f"products_{name}"] / med[f"model_{name}"], 3),
            }
            for name, b in benches.items()
        },
        "full_step_ms": {name: round(med[f"full_{name}"] * 1e3, 2) for name in benches},
        "data_ms": {name: round(med[f"data_{name}"] * 1e3, 3) for name in benches},
        "full_over_model_step": {name: round(med[f"model_{name}"] / med[f"full_{name}"], 3) for name in benches},
        "full_over_model_step_rounds_min_max": {name: spread(f"model_{name}", f"full_{name}") for name in benches},
        "autograd_over_fused_model_step": {
            name: round(med[f"model_{name}_autograd"] / med[f"model_{name}"], 3) for name in ("tied", "per_layer")
        },
        "hooked_over_bare_forward": round(
            statistics.median(h / b for h, b in zip(rounds["hooked"], rounds["bare"])), 3
        ),
        "targets": {
            "model_step_fraction_of_gemm_rate": {"tied": 0.15, "per_layer": 0.10},
            "full_over_model_step": 0.9,
            "hooked_over_bare_forward": 1.15,
        },
    }
    if compiled:
        result["compiled"] = {
            "mode": args.compile_mode or "default",
            "compile_s": {name: round(b.compile_s, 1) for name, b in compiled.items()},
            "model_step_ms": {name: round(med[f"compiled_{name}"] * 1e3, 2) for name in compiled},
            "eager_over_compiled": {
                name: round(med[f"model_{name}"] / med[f"compiled_{name}"], 3) for name in compiled
            },
            "model_step_fraction_of_gemm_rate": {name: fraction(f"compiled_{name}", name) for name in compiled},
        }
    if dev == "cuda":
        result["cuda_vs_cpu_max_rel"] = {name: cuda_agreement(name) for name in CONFIGS}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
