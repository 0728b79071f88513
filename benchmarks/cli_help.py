"""``ictd-interp --help`` wall time as a ratio to ``python -c pass`` (same run, median of 5 each).

Target: the help answers in well under a second (heavy modules load inside the commands).
Usage: python benchmarks/cli_help.py
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time


def _median_seconds(args: list[str], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    bare = _median_seconds([sys.executable, "-c", "pass"])
    help_ = _median_seconds([sys.executable, "-m", "ictd_interp.cli", "--help"])
    train_help = _median_seconds([sys.executable, "-m", "ictd_interp.cli", "train", "--help"])
    print(
        json.dumps(
            {
                "python_c_pass_s": round(bare, 3),
                "help_s": round(help_, 3),
                "train_help_s": round(train_help, 3),
                "help_ratio": round(help_ / bare, 2),
                "train_help_ratio": round(train_help / bare, 2),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
