"""The predecessor's linear model (docs/theory.md §13): its constructions equal their algorithms layer by
layer in float64 at 1e-10, against loops written independently of any transformer."""

import pytest
import torch

from ictd_interp.models.linear.model import HookedLinearICTD
from ictd_interp.models.linear.td import (
    linear_model,
    td0,
)

D, N, L, GAMMA = 3, 12, 6, 0.9


# --- where a linear model sits in the predecessor's family ----------------------------------------------------


def test_analyze_reports_a_linear_model_in_its_family(tmp_path):
    from ictd_interp.analyses.summary.store import read_summary
    from ictd_interp.cli import main
    from ictd_interp.io.checkpoint import save_checkpoint

    model = linear_model([td0(4)] * 3, gamma=0.9, dtype="float32")  # the construction itself, as a checkpoint
    save_checkpoint(model, tmp_path / "td0")
    assert main(["analyze", str(tmp_path / "td0"), "--out", str(tmp_path / "a")]) == 0
    summary = read_summary(tmp_path / "a" / "summary.json")
    assert summary.architecture == "linear-ictd"
    row = summary.algorithm.layers[0]
    assert row.in_family and row.cos_Q_td0 == pytest.approx(1.0) and row.effective_discount == pytest.approx(0.9)
    assert summary.linear.function_r2 == pytest.approx(1.0)
    td_row = summary.baselines.estimators["td0_construction"]
    assert td_row.msve.mean == pytest.approx(summary.baselines.estimators["model"].msve.mean, rel=1e-6)
    assert summary.convergence.depth.model == pytest.approx(summary.convergence.depth.td0, rel=1e-5)
    text = (tmp_path / "a" / "summary.md").read_text()
    assert "Layer 0: cos(P, P_TD) = 1.000" in text and "in the family" in text
    theirs = summary.linear.theirs  # the predecessor's own readings of its own construction
    assert theirs.IWS.mean == pytest.approx(1.0, abs=1e-5) and theirs.SS.mean == pytest.approx(1.0, abs=1e-5)
    assert theirs.VD.mean == pytest.approx(0.0, abs=1e-10) and abs(theirs.random_IWS.mean) < 0.3
    assert theirs.layers[0].Q_upper_right_trace == pytest.approx(4.0) and theirs.alpha_from == "their initial step"
    assert "puts every layer in the TD family" in text and "| 0 | +1.000 | 0.000 | -4.000 | +4.000 | 0.110 |" in text
    assert {p.stem for p in (tmp_path / "a" / "figures").glob("*.png")} >= {
        "weights_vs_td0",
        "error_vs_depth",
        "depth_extrapolation",
        "error_vs_context",
    }


def test_a_linear_model_trains_and_resumes_bit_exact(tmp_path):
    from ictd_interp.config.train import TrainConfig
    from ictd_interp.training.trainer import resume, train

    cfg = TrainConfig.from_flat(
        architecture="linear-ictd",
        d_features=3,
        n_layers=2,
        context_len=8,
        n_states=5,
        tasks_per_batch=4,
        windows_per_task=3,
        steps=12,
        eval_every=4,
        checkpoint_every=6,
        n_eval_tasks=8,
        dtype="float64",
    )
    whole = train(cfg, tmp_path / "whole", progress=False)
    polls = iter(range(100))
    first = train(
        cfg, tmp_path / "part", progress=False, stop=lambda: next(polls) >= 5
    )  # True at the poll after step 5
    assert first.interrupted and first.step == 5  # stop is polled once per step
    resumed = resume(tmp_path / "part", progress=False)
    assert resumed.step == 12
    for (name, a), b in zip(whole.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert not torch.equal(whole.model.blocks[0].attn.P, HookedLinearICTD(cfg.model).blocks[0].attn.P)  # it trained
