"""The throughput benchmark runs and reports what it promises (a smoke run: one round, one repeat;
its numbers are ratios for a reader, never asserted as timings)."""

import json
import subprocess
import sys

import pytest
import torch

from tests.support.benchmarks import BENCHMARK, ROOT, benchmark_module


def test_throughput_benchmark_reports_every_figure_in_one_run():
    out = subprocess.run(
        [sys.executable, str(BENCHMARK), "--rounds", "1", "--repeats", "1", "--threads", "1"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    result = json.loads(out.stdout)
    assert result["device"] == "cpu" and result["threads"] == 1
    models = {"tied", "per_layer", "standard", "tied_autograd", "per_layer_autograd"}
    assert result["prompts_per_step"] == {
        "tied": 64 * 17,
        "per_layer": 64 * 17,
        "standard": 16 * 17,
        "tied_autograd": 64 * 17,
        "per_layer_autograd": 64 * 17,
    }
    assert result["allocator_keeps_freed_memory"] is sys.platform.startswith("linux")
    for key in (
        "model_step_ms",
        "model_step_samples_per_s",
        "model_step_fraction_of_gemm_rate",
        "full_over_model_step",
        "full_step_ms",
        "data_ms",
    ):
        assert set(result[key]) == models and min(result[key].values()) > 0, key
    model, full = result["model_step_ms"]["standard"], result["full_step_ms"]["standard"]  # the share is their ratio
    assert result["full_over_model_step"]["standard"] == pytest.approx(model / full, rel=0.02)
    assert result["gemm_1024_gflop_per_s"] > 0 and result["hooked_over_bare_forward"] > 0
    ms = result["model_step_ms"]  # the two backwards' ratio is the ratio of their step times
    assert result["autograd_over_fused_model_step"]["tied"] == pytest.approx(ms["tied_autograd"] / ms["tied"], rel=0.02)
    stylised = round(133641 / 1e6, 4)
    assert result["analytic_mflop_per_sample"] == {
        "tied": stylised,
        "per_layer": stylised,
        "standard": round(6083316 / 1e6, 4),
        "tied_autograd": stylised,
        "per_layer_autograd": stylised,
    }
    gemm = result["gemm_1024_gflop_per_s"]  # GFLOP/s = MFLOP per ms
    for name, line in result["fixed_and_marginal"].items():  # a line through one task's step and the whole batch's
        assert line["one_task_prompts"] == 17, name
        fixed, marginal = line["fixed_ms"], line["marginal_us_per_prompt"] / 1e3
        assert fixed + 17 * marginal == pytest.approx(line["one_task_ms"], abs=2e-3), name
        assert fixed + 64 * 17 * marginal == pytest.approx(ms[name], abs=0.02), name
        assert line["marginal_fraction_of_gemm_rate"] == pytest.approx(stylised / marginal / gemm, rel=0.01), name
    for name, products in result["products"].items():  # the share is the products' time over the model step's
        assert products["calls"] > 0 and products["gflop"] > 0, name
        assert products["share_of_model_step"] == pytest.approx(products["ms"] / ms[name], rel=0.02), name
    # standard-quick's products by hand: N = 272 prompts of P = 31 positions (S = 30 sources), T = N P tokens,
    # d_model 32, H = 2 heads of 16, MLP 64; a product [m, k] @ [k, n] costs 2 m k n.
    N, P, S, H = 272, 31, 30, 2
    T = N * P
    read_in, read_out = 2 * T * 7 * 32, 2 * N * 32
    full_layer = 2 * T * 32 * 96 + 2 * (2 * H * N * P * 16 * S) + 2 * T * 32 * 32 + 2 * (2 * T * 32 * 64)
    query_layer = (
        2 * N * 32 * 32 + 2 * N * S * 32 * 64 + 2 * (2 * H * N * 16 * S) + 2 * N * 32 * 32 + 2 * (2 * N * 32 * 64)
    )
    forward = (
        read_in + 2 * full_layer + query_layer + read_out
    )  # q, k and v in one product; the last layer at the query
    # backward: each product twice (d input, d weight), but the read-in once (the prompt needs no gradient)
    assert result["products"]["standard"]["gflop"] == round((3 * forward - read_in) / 1e9, 4) == 1.1442
    samples_per_s = result["model_step_samples_per_s"]["standard"]  # the fraction is the rate times the count
    assert result["model_step_fraction_of_gemm_rate"]["standard"] == pytest.approx(
        samples_per_s * 6083316 / (result["gemm_1024_gflop_per_s"] * 1e9), rel=0.01
    )


def test_a_compile_mode_without_compile_is_refused_by_name():
    out = subprocess.run(
        [sys.executable, str(BENCHMARK), "--compile-mode", "max-autotune-no-cudagraphs"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 2 and "--compile-mode: only with --compile" in out.stderr and not out.stdout


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="against.py checks a commit out of this git repository")
def test_against_reports_both_trees_and_the_products_ceiling():
    """This tree against itself (HEAD), one round of two steps: every model's three timings in both trees,
    the ratios the report derives from them, and ``train_ceiling`` = old ``train()`` step / new products."""
    worktrees = subprocess.run(["git", "worktree", "list"], capture_output=True, text=True, cwd=ROOT).stdout
    out = subprocess.run(
        [
            sys.executable,
            str(BENCHMARK.parent / "against.py"),
            "HEAD",
            "--rounds",
            "1",
            "--steps",
            "2",
            "--threads",
            "1",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    result = json.loads(out.stdout)
    assert result["against"] == "HEAD" and result["rounds"] == 1
    for model in ("standard", "tied", "per_layer"):
        for what in ("train", "model", "products"):
            row = result[f"{what}_{model}"]
            assert row["old_ms"] > 0 and row["new_ms"] > 0, (what, model)
            assert row["old_over_new"] == pytest.approx(row["old_ms"] / row["new_ms"], rel=0.02)
        old_train, new_products = result[f"train_{model}"]["old_ms"], result[f"products_{model}"]["new_ms"]
        assert result["train_ceiling"][model] == pytest.approx(old_train / new_products, rel=0.02)
    # the old tree's checkout is gone again
    assert subprocess.run(["git", "worktree", "list"], capture_output=True, text=True, cwd=ROOT).stdout == worktrees


def test_the_threads_benchmark_times_one_cell_of_an_architecture():
    threads = benchmark_module("threads")
    result = threads.cell("quick", "linear-ictd", 1, 4, 2)  # 4 steps: 3 step-to-step intervals timed
    assert set(result) == {"steps_per_s", "forward_ms"} and result["steps_per_s"] > 0 and result["forward_ms"] > 0
    assert set(threads.ARCHITECTURES) == {
        "stylised tied (quick)",
        "standard (standard-quick)",
        "linear (quick, linear-ictd)",
    }


@pytest.mark.slow  # 77 s: clones the tree, trains a new architecture; tests/unit/test_registry.py covers the registry
@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="the benchmark clones this git checkout")
def test_a_fourth_architecture_is_three_new_files_and_one_registration_line():
    """Issue 43's measure: the toy architecture (benchmarks/new_architecture.py, a throwaway copy of this tree)
    trains and analyses end to end with 3 new files and the registry's one line (with its import) changed."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "new_architecture.py"), "--steps", "10"],
        capture_output=True,
        text=True,
        check=True,
    )
    shape = json.loads(out.stdout)
    assert shape["error"] is None and shape["train_ok"] and shape["analyze_ok"]
    assert len(shape["new_files"]) == 3
    assert shape["changed_files"] == {"ictd_interp/config/train.py": 3}  # 1 line replaced by it and its import
    assert shape["summary_first_line"].startswith("# ICTD analysis of") and shape["architecture"] == "toy-linear"


def test_the_device_checks_run_as_one_command_and_refuse_a_missing_gpu(tmp_path):
    script = str(ROOT / "benchmarks" / "device_checks.py")
    out = subprocess.run(
        [sys.executable, script, "--device", "cpu", "--only", "tests", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    report = json.loads(out.stdout)
    assert out.returncode == 0 and report["steps"]["tests"]["returncode"] == 0
    assert "6 passed" in (tmp_path / "tests.log").read_text()
    if not torch.cuda.is_available():
        refused = subprocess.run([sys.executable, script, "--device", "cuda"], capture_output=True, text=True)
        assert refused.returncode != 0 and "torch sees no CUDA device" in refused.stderr


def test_the_state_space_stack_benchmark_steps_each_model_as_its_own_run():
    """The folded step the benchmark times is a stack's: each of two models' loss and gradient is its own run's
    (float64, 1e-12), and the command prints its ratio."""
    bench = benchmark_module("state_space_stack")
    from ictd_interp import TrainConfig
    from ictd_interp.training.batch_stream import BatchStream

    config = TrainConfig.from_preset("deep", tasks_per_batch=4)
    batch, _ = next(BatchStream(config, torch.Generator().manual_seed(0), torch.float64))
    A, w = 0.3 * torch.randn(2, 1, 4, 4, dtype=torch.float64), 0.3 * torch.randn(2, 1, 7, dtype=torch.float64)
    stacked = [x.clone().requires_grad_() for x in (A, w)]
    _, both = bench.stacked_step(*stacked, batch.space, batch.query_reward, 0.9, 6)
    assert both.shape == (2,) and both[0] != both[1]
    for m in range(2):  # each model of the stack against its own run alone
        alone = [x[m : m + 1].clone().requires_grad_() for x in (A, w)]
        _, own = bench.stacked_step(*alone, batch.space, batch.query_reward, 0.9, 6)
        assert both[m].item() == pytest.approx(own.item(), rel=1e-12)
        for s, a in zip(stacked, alone):
            assert torch.allclose(s.grad[m : m + 1], a.grad, rtol=1e-12, atol=0)
    script = str(ROOT / "benchmarks" / "state_space_stack.py")
    command = [sys.executable, script, *"--models 2 --rounds 1 --depth 2".split()]
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    row = json.loads(out.stdout)
    assert row["models"] == 2 and row["speedup"] > 0 and row["one_s"] > 0


def test_the_model_stack_benchmark_times_both_ways_and_states_the_studies_rule():
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "model_stack.py"),
            "--models",
            "2",
            "--batches",
            "4",
            "--steps",
            "10",
            "--rounds",
            "1",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(out.stdout)
    (row,) = report["rows"]
    assert row["tasks_per_batch"] == 4 and report["studies_rule"] == {
        "STACK_MAX_TASKS_PER_BATCH": 16,
        "STACK_TASKS": 128,
    }
    for way in ("step_loop", "whole_run"):
        alone, stacked = row[f"{way}_alone_models_steps_per_s"], row[f"{way}_stacked_models_steps_per_s"]
        assert alone > 0 and stacked > 0
        lo, hi = row[f"{way}_alone_over_stacked_rounds_min_max"]
        assert lo == hi == row[f"{way}_alone_over_stacked"]
    assert row["step_loop_alone_models_steps_per_s"] > row["whole_run_alone_models_steps_per_s"]


def test_the_quick_device_checks_print_one_json_line_each_and_pass_on_the_cpu(capsys, monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import device_quick
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    lines = device_quick.run("cpu", stacked={"sizes": (1, 3), "steps": 2}, step_ms={"steps": 2})
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == lines and len(lines) == 16
    assert lines[0]["check"] == "device" and lines[0]["pass"]
    checked = [line for line in lines if "max_error" in line]
    assert len(checked) == 10 and all(line["pass"] and line["max_error"] < 1e-4 for line in checked)
    assert next(line for line in lines if line["check"] == "training run on the device")["pass"]
    assert [line["models"] for line in lines if "models" in line] == [1, 3]
    assert "speedup" in lines[-1] and lines[-1]["target"] == 1.5  # pass or fail: a timing, not asserted
    assert all(line["model_steps_per_s"] > 0 for line in lines if "models" in line)
    failed = device_quick.run("cpu", only=("stacked",), stacked={"sizes": (0,)})  # an empty stack cannot be built
    assert failed[-1]["pass"] is False and failed[-1]["check"] == "stacked"
    # the draws check fails on a stack that hands a run another run's batch
    from dataclasses import replace

    real = device_quick.DeviceBatches.at
    swapped = lambda self, step: (lambda b: replace(b, prompts=b.prompts.flip(0)) if self.stacked else b)(  # noqa: E731
        real(self, step)
    )
    monkeypatch.setattr(device_quick.DeviceBatches, "at", swapped)
    draws = device_quick.run("cpu", only=("draws",))
    assert draws[0]["pass"] is False and draws[0]["max_error"] > 0.1 and draws[1]["pass"]
    # the gradient check reads every parameter: 5% off in V's gradient alone (or A's) fails it
    want = [torch.ones(2, 2), torch.ones(3)]
    for k in range(2):
        got = [w.clone() for w in want]
        got[k] *= 1.05
        assert device_quick.grad_error(got, want) == pytest.approx(0.05)
    assert device_quick.metric_error([{"step": 0, "loss": 1.0}], [{"step": 0, "loss": float("nan")}]) == float("inf")
    assert device_quick.metric_error([{"step": 0, "x": [1.0, 2.0]}], [{"step": 0, "x": [1.0, 2.2]}]) == pytest.approx(
        0.1
    )


def test_the_state_space_training_benchmark_steps_both_paths_on_one_batch():
    """Its two paths compute one loss and one evaluation error (float32 rounding apart); the ratios are what it
    reports, not asserted."""
    result = benchmark_module("state_space_training").measure(30, 4, 1)
    assert result["loss_relative_difference"] < 1e-5 and result["speedup"] > 0
    assert result["eval_msve_relative_difference"] < 1e-5 and result["eval_speedup"] > 0
