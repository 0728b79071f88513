"""TD training throughput and hook overhead, measured in one run (ratios, never timed tests).

Usage: python benchmarks/train_throughput.py [--threads 2] [--repeats 30]
Reports: TD samples/s (one sample = one prompt through forward and backward) at d=4, s=10, n=30,
L=3 for the model step alone and for a full training step (data + step + optimiser), and the ratio
of the hooked model's forward time to a bare-torch forward of the same math.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.data import window_batch
from ictd_interp.objectives import td_loss


def bare_forward(prompt: torch.Tensor, params: list[tuple[torch.Tensor, torch.Tensor]], gamma: float) -> torch.Tensor:
    """The same math as the TSM model, as plain tensor ops (no modules, no hook points)."""
    cur, tgt = prompt.shape[-1] - 1, prompt.shape[-1] - 2
    keep = torch.ones(prompt.shape[-1], dtype=prompt.dtype)
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


def timed(fn, repeats: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--windows", type=int, default=16)
    parser.add_argument("--tied", action="store_true", help="tied weights (the quick preset): one shared pattern")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = HookedICTDTransformer(ICTDConfig(d_features=4, n_layers=3, init_scale=0.1, tied=args.tied))
    gen = torch.Generator().manual_seed(0)
    make = lambda: window_batch(args.tasks, args.windows + 1, 10, 4, 30, 0.9, feature_kind="uniform",  # noqa: E731
                                feature_scale=1.0, generator=gen).to("cpu", torch.float32)
    batch = make()
    n_prompts = batch.prompts.shape[0]
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def model_step():
        td_loss(model, batch).backward()

    def full_step():
        opt.zero_grad()
        td_loss(model, make()).backward()
        opt.step()

    params = [(b.attn.A.detach(), b.attn.V.detach()) for b in model.blocks]
    with torch.no_grad():
        assert torch.allclose(model(batch.prompts), bare_forward(batch.prompts, params, 0.9), atol=1e-5)
        # Alternate the two in short rounds and take the median ratio: robust to load drifting.
        ratios = sorted(timed(lambda: model(batch.prompts), 5) / timed(lambda: bare_forward(batch.prompts, params, 0.9), 5)
                        for _ in range(args.repeats))
    result = {
        "threads": args.threads, "tied": args.tied, "prompts_per_step": n_prompts,
        "model_fwd_bwd_samples_per_s": n_prompts / timed(model_step, args.repeats),
        "train_step_samples_per_s": n_prompts / timed(full_step, args.repeats),
        "hooked_over_bare_forward": ratios[len(ratios) // 2],
        "target": {"samples_per_s": 60000, "hooked_over_bare_forward": 1.15},
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
