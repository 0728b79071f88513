"""What a new user hits (issue 41): folders a failed request used to lock, the architecture's own preset,
shipped models loaded by name, readable checkpoints under umask 022, a metrics file cut mid-line."""

import json
import os
import stat

import pytest

from ictd_interp import load_checkpoint
from ictd_interp.io import run_folder
from ictd_interp.io.checkpoint import save_checkpoint
from tests.conftest import make_star


def test_a_folder_that_holds_only_a_failed_request_is_reused(tmp_path):
    out = tmp_path / "x"
    run_folder.claim_output(out, {"command": "analyze", "path": "quick-td-s9"})  # failed right after this
    claimed = run_folder.claim_output(out, {"command": "analyze", "path": "depth3-td-s0"})
    assert json.loads((claimed / "request.json").read_text())["path"] == "depth3-td-s0"
    (out / "summary.md").write_text("results")  # once results exist, another request is refused
    with pytest.raises(FileExistsError, match="another request"):
        run_folder.claim_output(out, {"command": "analyze", "path": "depth3-td-s1"})


def test_a_run_that_never_started_can_be_run_again(tmp_path):
    from ictd_interp.config import TrainConfig

    out = tmp_path / "run"
    out.mkdir()
    run_folder.write_run_config(out, TrainConfig.from_preset("quick"))  # a bad --family failed here
    assert run_folder.never_started(out)
    run_folder.clear_unstarted(out)
    assert not any(out.iterdir())
    run_folder.write_run_config(out, TrainConfig.from_preset("quick"))
    (out / run_folder.METRICS).write_text('{"step": 0}\n')
    assert not run_folder.never_started(out)
    with pytest.raises(run_folder.RunFolderError, match="started"):
        run_folder.clear_unstarted(out)


def test_load_checkpoint_takes_a_shipped_name():
    model, metadata = load_checkpoint("depth3-td-s0")
    assert model.cfg.tied and model.cfg.n_layers == 3 and metadata


def test_checkpoints_are_readable_by_others_under_umask_022(tmp_path):
    old = os.umask(0o022)
    try:
        path = save_checkpoint(make_star(), tmp_path / "ckpt")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    assert {stat.S_IMODE(p.stat().st_mode) for p in path.iterdir()} == {0o644}


def test_a_metrics_file_cut_mid_line_keeps_its_complete_lines(tmp_path):
    (tmp_path / run_folder.METRICS).write_text('{"step": 0}\n{"step": 10}\n{"step": 2')
    with pytest.warns(UserWarning, match="incomplete"):
        assert [m["step"] for m in run_folder.read_metrics(tmp_path)] == [0, 10]
    (tmp_path / run_folder.METRICS).write_text('{"step": 0}\n{"ste\n{"step": 10}\n')
    with pytest.raises(run_folder.RunFolderError, match="line 2"):
        run_folder.read_metrics(tmp_path)


def test_a_letter_o_for_a_zero_suggests_the_model_meant_first():
    from ictd_interp.io.pretrained import closest_names, names

    assert closest_names("quick-td-sO", names())[0] == "quick-td-s0"
    assert closest_names("standard-quik-s0", names())[0] == "standard-quick-s0"
    assert closest_names("zzz", names()) == []


def test_cli_warnings_are_one_line_without_a_source_line():
    import warnings

    from ictd_interp.cli import one_line_warnings

    saved = warnings.formatwarning
    with one_line_warnings("train"):
        text = warnings.formatwarning("x: unusable checkpoint", UserWarning, "trainer.py", 111, "warnings.warn(...)")
    assert text == "ictd-interp train: warning: x: unusable checkpoint\n"
    assert warnings.formatwarning is saved  # the caller's format is back once the command ends


def test_threads_default_to_one_and_a_resume_keeps_the_runs_own_count(tmp_path):
    import torch

    from ictd_interp.cli.threads import DEFAULT_THREADS, set_threads

    before = torch.get_num_threads()
    run = tmp_path / "run"
    run.mkdir()
    try:
        set_threads(None)
        assert torch.get_num_threads() == DEFAULT_THREADS == 1
        from ictd_interp.config import TrainConfig

        run_folder.write_run_config(run, TrainConfig.from_preset("quick"))
        (run / run_folder.METRICS).write_text('{"step": 0, "torch_threads": 2}\n')
        set_threads(None, run)  # the count the run was trained with, for a bit-exact resume
        assert torch.get_num_threads() == 2
        set_threads(1, run)  # an explicit --threads wins
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_a_dtype_the_model_cannot_run_is_refused_and_nothing_changes():
    import torch

    model = make_star()
    with pytest.raises(ValueError, match="dtype: HookedICTDTransformer runs in float32 or float64, got torch.bfloat16"):
        model.to(torch.bfloat16)
    assert next(model.parameters()).dtype == torch.float64 == getattr(torch, model.cfg.dtype)
    model.to(torch.float32)
    assert model.cfg.dtype == "float32"


def test_the_linear_models_circuits_are_factored_matrices_of_its_weights():
    import torch

    from ictd_interp.config import LinearICTDConfig
    from ictd_interp.models import HookedLinearICTD

    model = HookedLinearICTD(LinearICTDConfig(d_features=3, dtype="float64"))
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.P.copy_(torch.randn(7, 7, dtype=torch.float64))  # d_model = 2 d + 1
        attn.Q.copy_(torch.randn(7, 7, dtype=torch.float64))
    z = torch.randn(2, 7, dtype=torch.float64)
    # score of query z_0 on key z_1 is z_0^T Q^T z_1; the vector written from source z_1 is P z_1
    assert torch.allclose(z[0] @ attn.QK.AB[0] @ z[1], z[0] @ attn.Q.T @ z[1], atol=1e-12)
    assert torch.allclose(z[1] @ attn.OV.AB[0], attn.P @ z[1], atol=1e-12)


def test_a_bad_thread_count_in_the_environment_is_named(monkeypatch):
    from ictd_interp.io import threads

    monkeypatch.setattr(threads, "_done", False)
    monkeypatch.setenv(threads.ENV, "many")
    with pytest.raises(ValueError, match="^ICTD_INTERP_THREADS: must be a positive integer"):
        threads.toolkit_threads()


def test_a_ray_worker_runs_one_thread_whatever_the_environment_says(monkeypatch):
    """Every worker entry point (study cells and units, the benchmark's isolation) calls ``worker_threads``: one
    thread even where ``ICTD_INTERP_THREADS`` asks for more, and the toolkit's default never applies after it."""
    import torch

    from ictd_interp.io import threads

    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_done", False)
    monkeypatch.setenv(threads.ENV, "2")
    try:
        torch.set_num_threads(2)
        threads.worker_threads()
        assert torch.get_num_threads() == 1 and threads._done
        threads.toolkit_threads()  # marked chosen: the environment's 2 is not applied now
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
