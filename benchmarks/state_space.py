"""θ*'s forward at long contexts: the exact state-space forward against the positional hooked one.

Usage: python benchmarks/state_space.py [--tasks 64] [--depth 200] [--lengths 100 1000 10000 100000 1000000]
       [--positional-up-to 1000] [--threads 2]

Each (forward, n) runs in a fresh process. After the tasks are built the process's peak resident memory is reset
(Linux: ``5`` written to ``/proc/self/clear_refs`` resets ``VmHWM``) and its resident memory read as the baseline, so
``forward_mb`` (the peak during the forward minus that baseline) is what the forward itself added: the peak of drawing
long trajectories, higher than the forward's, no longer hides it. Times: the forward alone (the tasks are drawn
first, their drawing timed apart as ``draw_seconds``).
Both forwards are float64 on the CPU; where both run, the largest difference of the tasks' query values
is printed (``query_max_difference``; every position is compared at 1e-12 in tests/unit/test_state_space.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def _status_mb(field: str) -> float:
    """A ``/proc/self/status`` memory field in MB."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def _reset_peak() -> float:
    """Reset this process's peak resident memory to its current one; returns that, in MB."""
    import gc

    gc.collect()
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return _status_mb("VmRSS")


def one(kind: str, n: int, tasks: int, depth: int, threads: int) -> dict:
    import torch

    from ictd_interp import HookedICTDTransformer, ICTDConfig
    from ictd_interp.tasks.sampling import sample_tasks

    torch.set_num_threads(threads)
    start = time.perf_counter()
    batch = sample_tasks(tasks, 10, 4, n, 0.9, seed=0)
    draw = time.perf_counter() - start
    star = HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=4, n_layers=1, tied=True, dtype="float64"))
    base = _reset_peak()
    start = time.perf_counter()
    with torch.no_grad():
        if kind == "state_space":
            values = star.state_space_values(batch, depth=depth)
        else:
            deep = HookedICTDTransformer.from_theta_star(
                ICTDConfig(d_features=4, n_layers=depth, tied=True, dtype="float64")
            )
            values = deep(batch.prompt)
    seconds = time.perf_counter() - start
    peak = _status_mb("VmHWM")
    return {
        "forward": kind,
        "n": n,
        "tasks": tasks,
        "depth": depth,
        "draw_seconds": round(draw, 3),
        "forward_seconds": round(seconds, 4),
        "peak_rss_mb": round(peak, 1),
        "forward_mb": round(peak - base, 1),
        "query_mean": float(values[:, -1].mean()),
        "query_values": values[:, -1].tolist(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--depth", type=int, default=200)
    parser.add_argument("--lengths", type=int, nargs="+", default=[100, 1000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--positional-up-to", type=int, default=1000, help="largest n for the positional forward")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--one", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.tasks, args.depth, args.threads)))
        return
    rows = []
    for n in args.lengths:
        for kind in ("state_space", "positional"):
            if kind == "positional" and n > args.positional_up_to:
                continue
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    kind,
                    str(n),
                    "--tasks",
                    str(args.tasks),
                    "--depth",
                    str(args.depth),
                    "--threads",
                    str(args.threads),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    for n in args.lengths:  # the two forwards side by side where both ran
        pair = {r["forward"]: r for r in rows if r["n"] == n}
        if len(pair) == 2:
            pair["positional"]["time_ratio"] = round(
                pair["positional"]["forward_seconds"] / pair["state_space"]["forward_seconds"], 1
            )
            pair["positional"]["query_max_difference"] = max(
                abs(a - b) for a, b in zip(pair["positional"]["query_values"], pair["state_space"]["query_values"])
            )
    for row in rows:
        del row["query_values"]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
