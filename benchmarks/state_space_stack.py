"""What stacking ``M`` runs of the state-space forward in one process would buy: why the atlas trains them one by one.

Usage: python benchmarks/state_space_stack.py [--models 4 8 16] [--depth 48] [--rounds 5] [--threads 1] [--device cpu]

A stack steps ``M`` models in the same operations (``models/stylised/stack.py``); on the positional fast path that
wins at small batches, where a step costs its operations' overhead. The state-space forward's step is one batched
``[task, window, state, state]`` product per layer, which at the `deep` preset's batch (64 tasks × 17 windows, 10
states) is arithmetic, not overhead. This times one loss and backward of ``M`` models as one stack would run them
(each model's free entries repeated over its tasks, the model axis folded into the task axis of
``state_space_forward``) against one model's step, alternating, ``--rounds`` times; prints one JSON line per ``M``
with the medians and ``speedup = M × one / stacked`` (1: stacking saves nothing). The ratio is the goal: measured in
one run, never as a timed test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from ictd_interp import TrainConfig
from ictd_interp.models.stylised.state_space import state_space_forward
from ictd_interp.training.batch_stream import BatchStream


def stacked_step(
    A: torch.Tensor, w: torch.Tensor, space, reward: torch.Tensor, gamma: float, depth: int
) -> tuple[float, torch.Tensor]:
    """Seconds of one semi-gradient TD loss and backward for ``A [M, 1, d, d]``, ``w [M, 1, d + 3]`` on one batch,
    and each model's loss ``[M]`` (its gradient lands in its own slice of ``A`` and ``w``)."""
    M, T = A.shape[0], space.counts.shape[0]
    fold = lambda x: x.expand(M, *x.shape).reshape(M * T, *x.shape[1:])  # noqa: E731
    sync = torch.cuda.synchronize if A.is_cuda else (lambda: None)  # a GPU's clock: the work, not its launches
    sync()
    start = time.perf_counter()
    v = state_space_forward(
        A.repeat_interleave(T, 0),
        w.repeat_interleave(T, 0),
        fold(space.features),
        fold(space.rewards),
        fold(space.counts),
        gamma,
        depth,
    )
    q = torch.gather(v, 2, fold(space.query_states).unsqueeze(-1)).squeeze(-1).view(M, T, -1)
    delta = reward[:, :-1] + gamma * q[..., 1:].detach() - q[..., :-1]
    losses = delta.pow(2).mean((1, 2))
    losses.sum().backward()
    sync()
    return time.perf_counter() - start, losses.detach()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--depth", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = TrainConfig.from_preset("deep")
    batch, _ = next(BatchStream(config, torch.Generator().manual_seed(0), torch.float32))
    space, reward, gamma = batch.space.to(args.device, torch.float32), batch.query_reward.to(args.device), 0.9
    d = config.model.d_features
    for M in args.models:
        weights = [
            (0.1 * torch.randn(m, 1, d, d, device=args.device), 0.1 * torch.randn(m, 1, d + 3, device=args.device))
            for m in (1, M)
        ]
        for A, w in weights:
            A.requires_grad_(), w.requires_grad_()
        times = {1: [], M: []}
        for _ in range(args.rounds + 1):  # the first round warms up, unrecorded
            for (A, w), m in zip(weights, (1, M)):
                times[m].append(stacked_step(A, w, space, reward, gamma, args.depth)[0])
        one, stacked = (statistics.median(times[m][1:]) for m in (1, M))
        print(
            json.dumps(
                {
                    "models": M,
                    "depth": args.depth,
                    "one_s": round(one, 4),
                    "stacked_s": round(stacked, 4),
                    "speedup": round(M * one / stacked, 3),
                    "device": args.device,
                    "threads": args.threads,
                }
            )
        )


if __name__ == "__main__":
    main()
