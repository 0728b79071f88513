"""The throughput benchmark runs and reports what it promises (a smoke run: one round, one repeat;
its numbers are ratios for a reader, never asserted as timings)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "benchmarks" / "train_throughput.py"


def flops_per_sample(*args: int) -> float:
    """The benchmark's own count, loaded from its file (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("train_throughput", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.flops_per_sample(*args)


def test_analytic_flop_count_worked_out_by_hand():
    # P = 31 positions, d = 4, one head, per layer: scores 2*4*31^2 = 7688, softmax 5*31^2 = 4805,
    # pattern @ value row 2*31^2 = 1922, value row 2*(4+3)*31 = 434 -> 14849; 3 layers, x3 for backward.
    assert flops_per_sample(4, 30, 3) == 3 * 3 * 14849 == 133641


def test_throughput_benchmark_reports_every_figure_in_one_run():
    out = subprocess.run([sys.executable, str(BENCHMARK), "--rounds", "1",
                          "--repeats", "1", "--threads", "1"], capture_output=True, text=True, check=True, cwd=ROOT)
    result = json.loads(out.stdout)
    assert result["device"] == "cpu" and result["threads"] == 1 and result["prompts_per_step"] == 64 * 17
    assert result["allocator_keeps_freed_memory"] is sys.platform.startswith("linux")
    for key in ("model_step_samples_per_s", "full_step_samples_per_s"):
        assert set(result[key]) == {"tied", "per_layer"} and min(result[key].values()) > 0
    assert 0 < result["per_layer_over_tied_bound_from_pattern"] < 1  # one more pattern can only cost time
    assert result["gemm_1024_gflop_per_s"] > 0 and result["one_pattern_fwd_bwd_ms"] > 0
    assert result["analytic_mflop_per_sample"] == round(133641 / 1e6, 4)
