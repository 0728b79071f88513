"""The standard architecture: hook names, configs, training and resuming, the TransformerLens surface and the
hook-free fast path (float64, stated tolerances). The analyses that read its circuit: test_standard_circuits.py."""

import pytest
import torch
from safetensors.torch import load_file, save_file

from ictd_interp.config.train import TrainConfig
from ictd_interp.io.checkpoint import CheckpointError, save_checkpoint
from ictd_interp.models.loading import load_checkpoint
from ictd_interp.training.trainer import resume, train
from tests.conftest import make_tasks
from tests.support.cli import small_evaluate


def tiny(**overrides) -> TrainConfig:
    return TrainConfig.from_flat(
        **{
            "architecture": "standard",
            "d_model": 8,
            "d_mlp": 8,
            "n_states": 5,
            "context_len": 6,
            "tasks_per_batch": 4,
            "windows_per_task": 2,
            "steps": 4,
            "n_eval_tasks": 8,
            "eval_every": 2,
            "checkpoint_every": 2,
            "init_range": 0.1,
            "dtype": "float64",
            **overrides,
        }
    )


def test_training_resumes_bit_exact_and_checkpoints_check_ties(tmp_path):
    full = train(tiny(tied=True), tmp_path / "full", progress=False)
    train(tiny(tied=True, steps=2), tmp_path / "part", progress=False)
    config = tmp_path / "part" / "train_config.json"
    config.write_text(config.read_text().replace('"steps": 2', '"steps": 4'))
    resumed = resume(tmp_path / "part", progress=False)
    for (name, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    ckpt = save_checkpoint(full.model, tmp_path / "ckpt")
    assert torch.equal(load_checkpoint(ckpt).model(make_tasks(d=4).prompt), full.model(make_tasks(d=4).prompt))
    weights = load_file(str(ckpt / "model.safetensors"))
    weights["blocks.1.attn.W_Q"] += 1.0  # a file whose layers disagree although its config says tied
    save_file(weights, str(ckpt / "model.safetensors"))
    with pytest.raises(CheckpointError, match="tied"):
        load_checkpoint(ckpt)


def test_analyze_and_evaluate_take_a_standard_model(tmp_path):
    import json

    from ictd_interp.cli import main

    out = tmp_path / "ev"
    assert main(small_evaluate("standard-quick-s0", out)) == 0
    result = json.loads((out / "evaluation.json").read_text())
    assert "model" not in result["depth"] and len(result["depth"]["theta_star"]) == 5  # no stored per-layer values
    assert result["context"]["model"][-1] > 0 and (out / "figures" / "error_vs_context.png").exists()


def test_reproduce_a_tiny_standard_run_writes_the_circuit_report(tmp_path):
    import json

    from ictd_interp.cli import main

    args = [
        "reproduce",
        "--preset",
        "standard-quick",
        "--out",
        str(tmp_path),
        "--steps",
        "2",
        "--tasks-per-batch",
        "4",
        "--windows-per-task",
        "2",
        "--n-eval-tasks",
        "16",
        "--eval-every",
        "1",
        "--d-model",
        "8",
        "--d-mlp",
        "8",
    ]
    assert main(args) == 0
    summary = json.loads((tmp_path / "analysis" / "summary.json").read_text())
    assert summary["architecture"] == "standard" and len(summary["circuit"]["heads"]) == 3 * 2
    assert len(summary["convergence"]["depth"]["model"]) == 4  # embedding + 3 blocks, read by the value probe
    text = (tmp_path / "analysis" / "summary.md").read_text()
    assert "**Verdict.**" in text and f"{summary['metrics']['eval_msve']:.4f}" in text
    for name in ("error_vs_depth", "td_quantities", "head_td_kernel", "head_signature", "layer_signature"):
        assert (tmp_path / "analysis" / "figures" / f"{name}.png").stat().st_size > 0
