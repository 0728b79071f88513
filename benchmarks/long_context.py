"""Peak memory and time of one hooked forward at long contexts: the full forward against query chunks.

Usage: python benchmarks/long_context.py [--threads 2] [--lengths 1000 10000 100000] [--full-up-to 10000]
       [--device cpu|cuda]
Each row runs in a fresh process (peak RSS only grows): θ* (stylised, TSM, d = 4, 3 layers) and a standard model
(d_model 16, 2 heads, 3 layers, MLPs, LayerNorm), one task, float32, under ``torch.no_grad``. ``full``: a no-op
hook on every ``hook_pattern`` makes the model hold the whole pattern (what a cached run does); ``chunked``: no
hook, so contexts longer than ``ictd_interp.models.chunked_attention.QUERY_CHUNK`` run over query chunks.
``added_mb`` is the peak RSS minus the RSS before the forward (model, prompt and libraries). The full forward is skipped
beyond ``--full-up-to`` (at n = 10⁵ it would hold 40 GB of float32 scores per head and layer). On ``--device
cuda`` the model and prompt live on the GPU and ``added_mb`` is the peak of ``torch.cuda.max_memory_allocated``
during the forward minus what was allocated before it.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch


def _model(architecture: str):
    from ictd_interp import HookedICTDTransformer, HookedStandardTransformer, ICTDConfig
    from ictd_interp.config.standard import StandardConfig

    if architecture == "stylised":
        return HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=4, n_layers=3)).float()
    return HookedStandardTransformer(StandardConfig(d_features=4, d_model=16, n_heads=2, n_layers=3, d_mlp=32))


def _memory_mb(device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(architecture: str, n: int, path: str, threads: int, device: str = "cpu") -> dict:
    from ictd_interp.tasks.sampling import sample_tasks

    torch.set_num_threads(threads)
    model = _model(architecture).to(device)
    prompt = sample_tasks(1, 10, 4, n, 0.9, seed=0).prompt.float().to(device)
    hooks = [(f"blocks.{l}.attn.hook_pattern", lambda act, hook: act) for l in range(3)] if path == "full" else []
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    before = _memory_mb(device)
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        start = time.perf_counter()
        model(prompt)
        peak = _memory_mb(device)  # on CUDA this synchronises first, so the clock stops after the forward
        seconds = time.perf_counter() - start
    return {
        "architecture": architecture,
        "n": n,
        "path": path,
        "device": device,
        "forward_seconds": round(seconds, 3),
        "peak_mb": round(peak),
        "added_mb": round(peak - before),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--full-up-to", type=int, default=10000)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--one", nargs=3, metavar=("ARCH", "N", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.one[2], args.threads, args.device)))
        return
    rows = []
    for architecture in ("stylised", "standard"):
        for n in sorted(args.lengths):
            for path in ("full", "chunked") if n <= args.full_up_to else ("chunked",):
                out = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--threads",
                        str(args.threads),
                        "--device",
                        args.device,
                        "--one",
                        architecture,
                        str(n),
                        path,
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                rows.append(json.loads(out.strip().splitlines()[-1]))
                print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
