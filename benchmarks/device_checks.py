"""Every device check in one command, for a machine with a GPU: the device tests (float32 on the device against
the float64 CPU reference, within 1e-4; a short training run on the device against the CPU's) and the benchmarks
that take a device (training throughput with its CPU agreement check, long-context forwards with peak memory,
many models stepped in one process against one process per model).

    python benchmarks/device_checks.py --device cuda [--out DIR] [--quick]

Each step runs in its own process; its output is written to ``DIR/<step>.log`` (``DIR`` defaults to a temporary
folder) and a JSON summary is printed: each step's exit code and seconds, and the device's name. With ``--device
cpu`` the same steps run on the CPU: the tests then hold float32 against float64, and the suite runs them so
(tests/unit/test_device.py).

``--quick`` fits a short lease (about 4 minutes on a GPU): the checks of ``device_quick.py`` in this process, one
JSON line each (pass/fail with its largest error; one model's step in ms; stacked model·steps/s at M = 1, 64 and
1,024); the exit code is 1 when any check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["tests/unit/test_device.py", "tests/integration/test_train.py::test_a_short_cuda_run_matches_the_cpu_run"]


def steps(device: str) -> dict[str, list[str]]:
    """The command of each step of the full checks (run from the repository root)."""
    python = sys.executable
    return {
        "tests": [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *TESTS],
        "train_throughput": [python, "benchmarks/train_throughput.py", "--device", device],
        "long_context": [
            python,
            "benchmarks/long_context.py",
            "--device",
            device,
            "--lengths",
            "1000",
            "10000",
            "100000",
        ],
        "model_stack": [python, "benchmarks/model_stack.py", "--device", device],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="+", choices=tuple(steps("cpu")), default=None)
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            "--device cuda: torch sees no CUDA device on this machine (torch.cuda.is_available() is "
            "False); run it where a GPU is, or --device cpu"
        )
    if args.quick:
        import device_quick  # beside this script

        lines = device_quick.run(args.device)
        sys.exit(int(any(line.get("pass") is False for line in lines)))
    out = args.out or Path(tempfile.mkdtemp(prefix="device_checks_"))
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ICTD_TEST_DEVICE": args.device, "PYTHONUNBUFFERED": "1"}
    report = {
        "device": args.device,
        "name": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "logs": str(out),
        "steps": {},
    }
    for name, command in steps(args.device).items():
        if args.only and name not in args.only:
            continue
        start = time.perf_counter()
        with open(out / f"{name}.log", "w") as log:
            code = subprocess.run(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
        report["steps"][name] = {"returncode": code, "seconds": round(time.perf_counter() - start, 1)}
        print(
            f"{name}: exit {code} in {report['steps'][name]['seconds']} s ({out / f'{name}.log'})",
            file=sys.stderr,
            flush=True,
        )
    json.dump(report, sys.stdout, indent=1)
    print()
    sys.exit(max((s["returncode"] for s in report["steps"].values()), default=0))


if __name__ == "__main__":
    main()
