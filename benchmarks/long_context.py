"""Memory and time of one forward pass at long contexts (n up to 4096), theta*, CPU.

Usage: python benchmarks/long_context.py [--threads 2] [--lengths 512 1024 2048 4096]
Peak memory is the process's maximum resident set size after each run (it only grows, so the
lengths run in increasing order and each row bounds that length's footprint).
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import torch

from ictd_interp import HookedICTDTransformer, ICTDConfig
from ictd_interp.tasks.sampling import sample_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--layers", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=4, n_layers=args.layers))
    rows = []
    for n in sorted(args.lengths):
        prompt = sample_tasks(1, 10, 4, n, 0.9, seed=0).prompt.float()
        with torch.no_grad():
            start = time.perf_counter()
            model(prompt)
            seconds = time.perf_counter() - start
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rows.append({"n": n, "layers": args.layers, "forward_seconds": seconds, "peak_rss_mb": peak_mb})
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
