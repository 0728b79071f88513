import json
import warnings

import pytest

from ictd_interp import HookedICTDTransformer
from ictd_interp.analyses.analyze import analyze
from ictd_interp.io.checkpoint import CheckpointError, save_checkpoint
from tests.conftest import make_cfg


def _check_report(out):
    summary = json.loads((out / "summary.json").read_text())
    for name in ("attention", "signature", "error_vs_depth", "error_vs_context", "predicted_vs_true", "grouped_kernel"):
        assert (out / "figures" / f"{name}.png").stat().st_size > 0 and (out / "figures" / f"{name}.svg").exists()
    assert "figures/signature.png" in (out / "summary.md").read_text()
    from ictd_interp.analyses.analyze import figures as draw
    from ictd_interp.analyses.figures.style import text_outside
    from ictd_interp.analyses.summary.store import read_summary, to_json

    typed = read_summary(out / "summary.json")  # the schema reads back exactly what it wrote
    assert to_json(typed) == summary and typed.metrics.eval_msve == summary["metrics"]["eval_msve"]
    for name, fig in draw(typed).items():
        assert text_outside(fig) == [], name  # every title, label and legend on the canvas
    return summary


def test_analyze_theta_star_checkpoint(tmp_path):
    save_checkpoint(
        HookedICTDTransformer.from_theta_star(make_cfg(d_features=4, n_layers=2)),
        tmp_path / "star",
        task={"n_eval_tasks": 16, "context_len": 12, "n_states": 6},
    )
    analyze(tmp_path / "star", tmp_path / "out", neu=False)  # the NEU section: test_analyze_a_short_run (30 s less)
    summary = _check_report(tmp_path / "out")
    assert summary["metrics"]["cos_V"] == pytest.approx([1.0, 1.0])
    assert summary["probes"]["rms_gap_to_theta_star"] == 0.0 and summary["config"]["tasks"]["context_len"] == 12
    assert "d_model" not in summary["config"]["model"]  # only the fields of this architecture are recorded
    # theta* read from its own weights: a = 1, discount gamma, beta 1; the model is theta* in the baselines
    layer = summary["algorithm"]["layers"][1]
    assert (layer["step"], layer["effective_discount"], layer["beta"]) == pytest.approx((1.0, 0.9, 1.0), abs=1e-12)
    star_row = summary["baselines"]["estimators"]["theta_star"]["model_minus_baseline"]
    assert star_row["difference"]["mean"] == 0.0 and star_row["verdict"] == "undecided"


def _short_run(run_dir, **overrides):
    """A 2-layer model trained for 4 steps, checkpointed at 0, 2 and 4."""
    from ictd_interp.config.train import TrainConfig
    from ictd_interp.training.trainer import train

    cfg = TrainConfig.from_flat(
        d_features=3,
        n_states=5,
        context_len=8,
        tasks_per_batch=4,
        windows_per_task=2,
        steps=4,
        eval_every=2,
        checkpoint_every=2,
        n_eval_tasks=8,
        n_layers=2,
        **overrides,
    )
    return train(cfg, run_dir, progress=False)


def test_analyze_a_short_run(tmp_path):
    _short_run(tmp_path / "run")
    analyze(tmp_path / "run", tmp_path / "out")
    summary = _check_report(tmp_path / "out")
    assert summary["curves"]["step"] == [0, 2, 4]
    assert (tmp_path / "out" / "figures" / "cosine_over_training.png").exists()
    assert (tmp_path / "out" / "figures" / "diagonality_over_training.svg").exists()


def test_analyze_bad_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such"):
        analyze(tmp_path / "missing", tmp_path / "out")
    (tmp_path / "folder").mkdir()
    with pytest.raises(CheckpointError, match="neither a run directory"):
        analyze(tmp_path / "folder", tmp_path / "out")


def test_a_run_not_finished_is_read_at_its_latest_checkpoint_and_says_so(tmp_path):
    import shutil

    from ictd_interp.analyses.analyze import resolve

    _short_run(tmp_path / "run")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve(tmp_path / "run")  # finished: its final weights, no word
    shutil.rmtree(tmp_path / "run" / "final")
    with pytest.warns(UserWarning, match=r"training not finished; reading its latest checkpoint, step_0*4"):
        resolve(tmp_path / "run")


def test_dynamics_over_checkpoints(tmp_path):
    from ictd_interp.analyses.metrics.dynamics import checkpoint_probes, logged_curves

    run = _short_run(tmp_path / "run", lr=0.05)
    curves = logged_curves(tmp_path / "run")
    assert curves["step"] == [0, 2, 4] and len(curves["cos_V"][0]) == 2
    probes = checkpoint_probes(tmp_path / "run")
    assert [p["step"] for p in probes] == [2, 4]
    assert probes[-1]["cos_V"] == run.metrics[-1]["cos_V"]  # same eval set, same weights
    assert set(probes[0]) >= {"rms_gap_to_theta_star", "sensitivity_cosine", "circuits", "kernel_diagonality_mean"}


def test_the_signature_in_words_and_in_its_figure_is_one_set_of_numbers(tmp_path):
    """summary.md's signature line and signature.png's bars: the same three numbers under the same three labels
    (the weights on reward, v(S') and v(S), from ``signature_on_values``)."""
    from ictd_interp.analyses.analyze import analyze, figures

    summary = analyze("quick-td-s0", tmp_path / "a", neu=False, draw=False)
    text = (tmp_path / "a" / "summary.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("- layers 0–11 (tied):"))
    words = [float(v) for v in line.split(":", 1)[1].split(",")]
    ax = figures(summary)["signature"].axes[0]
    bars = [container.patches[1].get_height() for container in ax.containers]  # [θ*, the tied layers] per input
    assert words == pytest.approx(bars, abs=0.005)
    assert [container.get_label() for container in ax.containers] == ["reward", "v(S')", "v(S)"]
    assert "(reward, v(S'), v(S))" in text
