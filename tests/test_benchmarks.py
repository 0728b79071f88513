"""The throughput benchmark runs and reports what it promises (a smoke run: one round, one repeat;
its numbers are ratios for a reader, never asserted as timings)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "benchmarks" / "train_throughput.py"


def benchmark_module():
    """The benchmark's own code, loaded from its file (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("train_throughput", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_analytic_flop_counts_worked_out_by_hand():
    bench = benchmark_module()
    # P = 31 positions, d = 4, one head, per layer: scores 2*4*31^2 = 7688, softmax 5*31^2 = 4805,
    # pattern @ value row 2*31^2 = 1922, value row 2*(4+3)*31 = 434 -> 14849; 3 layers, x3 for backward.
    assert bench.flops_per_sample(4, 30, 3) == 3 * 3 * 14849 == 133641
    # standard-quick, per layer: qkv 6*32*32*31 = 190464, scores and pattern @ v 4*32*31*30 = 119040,
    # softmax 5*2*31*30 = 9300, output 2*32*32*31 = 63488, MLP 4*32*64*31 = 253952, GELU 8*64*31 = 15872,
    # LayerNorms 16*32*31 = 15872 -> 667988; read-in 2*7*32*31 = 13888, final LN + read-out 10*32*31 = 9920.
    assert bench.standard_flops_per_sample(4, 30, 3, 32, 2, 16, 64) == 3 * (13888 + 3 * 667988 + 9920) == 6083316


def test_throughput_benchmark_reports_every_figure_in_one_run():
    out = subprocess.run([sys.executable, str(BENCHMARK), "--rounds", "1",
                          "--repeats", "1", "--threads", "1"], capture_output=True, text=True, check=True, cwd=ROOT)
    result = json.loads(out.stdout)
    assert result["device"] == "cpu" and result["threads"] == 1
    models = {"tied", "per_layer", "standard", "tied_autograd", "per_layer_autograd"}
    assert result["prompts_per_step"] == {"tied": 64 * 17, "per_layer": 64 * 17, "standard": 16 * 17,
                                          "tied_autograd": 64 * 17, "per_layer_autograd": 64 * 17}
    assert result["allocator_keeps_freed_memory"] is sys.platform.startswith("linux")
    for key in ("model_step_ms", "model_step_samples_per_s", "model_step_fraction_of_gemm_rate", "full_over_model_step",
                "full_step_ms", "data_ms"):
        assert set(result[key]) == models and min(result[key].values()) > 0, key
    model, full = result["model_step_ms"]["standard"], result["full_step_ms"]["standard"]  # the share is their ratio
    assert result["full_over_model_step"]["standard"] == pytest.approx(model / full, rel=0.02)
    assert result["gemm_1024_gflop_per_s"] > 0 and result["hooked_over_bare_forward"] > 0
    ms = result["model_step_ms"]  # the two backwards' ratio is the ratio of their step times
    assert result["autograd_over_fused_model_step"]["tied"] == pytest.approx(ms["tied_autograd"] / ms["tied"], rel=0.02)
    stylised = round(133641 / 1e6, 4)
    assert result["analytic_mflop_per_sample"] == {"tied": stylised, "per_layer": stylised, "standard": round(6083316 / 1e6, 4),
                                                   "tied_autograd": stylised, "per_layer_autograd": stylised}
    samples_per_s = result["model_step_samples_per_s"]["standard"]  # the fraction is the rate times the count
    assert result["model_step_fraction_of_gemm_rate"]["standard"] == pytest.approx(
        samples_per_s * 6083316 / (result["gemm_1024_gflop_per_s"] * 1e9), rel=0.01)


def test_a_compile_mode_without_compile_is_refused_by_name():
    out = subprocess.run([sys.executable, str(BENCHMARK), "--compile-mode", "max-autotune-no-cudagraphs"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2 and "--compile-mode: only with --compile" in out.stderr and not out.stdout
