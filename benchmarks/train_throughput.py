"""Training throughput, hook overhead and arithmetic efficiency, all measured in one run (ratios).

Usage: python benchmarks/train_throughput.py [--threads 2] [--repeats 20] [--device cpu|cuda]
       [--default-allocator]

One sample = one prompt through forward and backward, d=4, s=10, n=30, L=3, 64 tasks x 17 windows.
Reports, measured alternately in rounds (median), so machine load drifts out of the ratios:

* model step (TD loss forward + backward on a fixed batch), tied and per-layer weights;
* full training step (fresh data, forward, backward, optimiser) and its ratio to the model step;
* hooked forward over a bare-torch forward of the same math;
* a 1024 x 1024 fp32 GEMM rate, and the fraction of it the model step reaches under the analytic
  FLOP count below;
* one layer's pattern (scores and softmax) forward + backward on its own, and the per-layer / tied
  ratio it allows: per layer, a model computes L - 1 full patterns and the query row where a tied one
  computes one full pattern; at L = 3 that is one pattern (and a row) more per step, so per-layer /
  tied can at best be ``tied step / (tied step + pattern)``.

Training keeps freed memory in the process (``ictd_interp/cpu_allocator.py``), so the benchmark does
too; ``--default-allocator`` measures with the C library's default instead.

Analytic FLOPs per sample (paper mask, P = n + 1 positions, fast path): per layer, scores 2 d P^2,
softmax about 5 P^2, pattern @ value-row 2 P^2 per head, the value row 2 (d + 3) P per head;
backward ~2x forward, so forward + backward ~3x. (d=4, P=31, L=3, one head: about 0.13 MFLOP.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.training.allocator import keep_freed_memory
from ictd_interp.training.batches import window_batch
from ictd_interp.models.fast_path import patterns
from ictd_interp.training.objectives import td_loss
from ictd_interp.tasks.prompt import PromptLayout
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.training.trainer import _optimizer
from ictd_interp.config.train import TrainConfig


def flops_per_sample(d: int, n: int, layers: int, heads: int = 1) -> float:
    P = n + 1
    forward = layers * (2 * d * P**2 + 5 * P**2 + heads * (2 * P**2 + 2 * (d + 3) * P))
    return 3.0 * forward


def bare_forward(prompt: torch.Tensor, params: list[tuple[torch.Tensor, torch.Tensor]], gamma: float) -> torch.Tensor:
    """The same math as the TSM model, as plain tensor ops (no modules, no hook points)."""
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
        z = z + (v.transpose(1, 2) @ torch.softmax(scores, -1).transpose(1, 2)).transpose(1, 2)
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
    a = torch.randn(1024, 1024, device=device)
    b = torch.randn(1024, 1024, device=device)
    return 2 * 1024**3 / seconds(lambda: a @ b, repeats, device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--default-allocator", action="store_true", help="do not keep freed memory (as training does)")
    args = parser.parse_args()
    kept = False if args.default_allocator else keep_freed_memory()
    torch.set_num_threads(args.threads)
    dev = args.device
    gen = torch.Generator().manual_seed(0)
    config = TrainConfig.from_flat(tied=True, device=dev)
    make = lambda: window_batch(TaskDistribution(n_states=10, d_features=4, context_len=30, gamma=0.9, feature_kind="uniform", feature_scale=1.0), 64, 17,  # noqa: E731
                                generator=gen).to(dev, torch.float32)
    batch = make()
    prompts = batch.prompts.shape[0]
    models = {tied: HookedICTDTransformer(ICTDConfig(d_features=4, n_layers=3, init_scale=0.1, tied=tied)).to(dev)
              for tied in (True, False)}
    optimizers = {tied: _optimizer(config, m) for tied, m in models.items()}

    def model_step(tied):
        td_loss(models[tied], batch).backward()

    def full_step(tied):
        optimizers[tied].zero_grad(set_to_none=True)
        td_loss(models[tied], make()).backward()
        optimizers[tied].step()

    model = models[False]
    A = model.blocks[0].attn.A.detach()[None].requires_grad_()  # [unique=1, head, d_model, d_model]
    x = batch.prompts[..., PromptLayout(model.cfg.d_features).features]
    upstream = torch.rand(1, 1, *x.shape[:2], x.shape[1] - 1, device=dev)

    def pattern_step():
        torch.autograd.grad(patterns(model.cfg, A, x, x[:, :-1]), A, grad_outputs=upstream)

    params = [(b.attn.A.detach(), b.attn.V.detach()) for b in model.blocks]
    with torch.no_grad():
        assert torch.allclose(model(batch.prompts), bare_forward(batch.prompts, params, 0.9), atol=1e-5)
    rounds: dict[str, list[float]] = {k: [] for k in ("tied", "per_layer", "full_tied", "full_per_layer", "hooked",
                                                       "bare", "gemm", "pattern")}
    for _ in range(args.rounds):  # alternate everything within each round
        rounds["tied"].append(prompts / seconds(lambda: model_step(True), args.repeats, dev))
        rounds["per_layer"].append(prompts / seconds(lambda: model_step(False), args.repeats, dev))
        rounds["full_tied"].append(prompts / seconds(lambda: full_step(True), args.repeats, dev))
        rounds["full_per_layer"].append(prompts / seconds(lambda: full_step(False), args.repeats, dev))
        with torch.no_grad():
            rounds["hooked"].append(seconds(lambda: model(batch.prompts), args.repeats, dev))
            rounds["bare"].append(seconds(lambda: bare_forward(batch.prompts, params, 0.9), args.repeats, dev))
        rounds["gemm"].append(gemm_flops_per_s(dev, 10))
        rounds["pattern"].append(seconds(pattern_step, args.repeats, dev))
    med = {k: statistics.median(v) for k, v in rounds.items()}
    ratio = statistics.median(h / b for h, b in zip(rounds["hooked"], rounds["bare"]))
    flops = flops_per_sample(4, 30, 3)
    result = {
        "device": dev, "threads": args.threads, "allocator_keeps_freed_memory": kept, "prompts_per_step": prompts, "rounds": args.rounds,
        "model_step_samples_per_s": {"tied": round(med["tied"]), "per_layer": round(med["per_layer"])},
        "full_step_samples_per_s": {"tied": round(med["full_tied"]), "per_layer": round(med["full_per_layer"])},
        "per_layer_over_tied_model_step": round(med["per_layer"] / med["tied"], 3),
        "one_pattern_fwd_bwd_ms": round(med["pattern"] * 1e3, 3),
        "per_layer_over_tied_bound_from_pattern": round((prompts / med["tied"]) / (prompts / med["tied"] + med["pattern"]), 3),
        "full_over_model_step": {"tied": round(med["full_tied"] / med["tied"], 3),
                                 "per_layer": round(med["full_per_layer"] / med["per_layer"], 3)},
        "hooked_over_bare_forward": round(ratio, 3),
        "gemm_1024_gflop_per_s": round(med["gemm"] / 1e9, 1),
        "analytic_mflop_per_sample": round(flops / 1e6, 4),
        "model_step_fraction_of_gemm_rate": {"tied": round(med["tied"] * flops / med["gemm"], 4),
                                             "per_layer": round(med["per_layer"] * flops / med["gemm"], 4)},
        "targets": {"per_layer_over_tied_model_step": 0.9, "full_over_model_step": 0.85, "hooked_over_bare_forward": 1.15},
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
