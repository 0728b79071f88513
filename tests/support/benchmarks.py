"""Shared by tests/*/test_benchmarks.py."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BENCHMARK = ROOT / "benchmarks" / "train_throughput.py"


def benchmark_module(name: str = "train_throughput"):
    """A benchmark's own code, loaded from its file (benchmarks/ is not a package; its scripts import
    each other from their folder, as when run)."""
    if str(BENCHMARK.parent) not in sys.path:
        sys.path.insert(0, str(BENCHMARK.parent))
    spec = importlib.util.spec_from_file_location(name, BENCHMARK.parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
