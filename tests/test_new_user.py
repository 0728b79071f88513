"""What a new user hits (issue 41): folders a failed request used to lock, the architecture's own preset,
shipped models loaded by name, readable checkpoints under umask 022, a metrics file cut mid-line."""

import argparse
import json
import os
import stat

import pytest

from ictd_interp import load_checkpoint
from ictd_interp.cli.commands import chosen_preset
from ictd_interp.io.checkpoint import save_checkpoint
from ictd_interp.training import run_folder
from tests.conftest import make_star


def test_a_folder_that_holds_only_a_failed_request_is_reused(tmp_path):
    out = tmp_path / "x"
    run_folder.claim_output(out, {"command": "analyze", "path": "quick-td-s9"})  # failed right after this
    claimed = run_folder.claim_output(out, {"command": "analyze", "path": "quick-td-s0"})
    assert json.loads((claimed / "request.json").read_text())["path"] == "quick-td-s0"
    (out / "summary.md").write_text("results")  # once results exist, another request is refused
    with pytest.raises(FileExistsError, match="another request"):
        run_folder.claim_output(out, {"command": "analyze", "path": "quick-td-s1"})


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


def test_architecture_standard_takes_its_own_preset_and_a_conflicting_preset_is_refused():
    args = argparse.Namespace(preset=None, architecture="standard")
    assert chosen_preset(args).model.architecture == "standard" and chosen_preset(args).tasks_per_batch == 16
    assert chosen_preset(argparse.Namespace(preset=None, architecture=None)).model.tied
    with pytest.raises(SystemExit, match="standard-quick"):
        chosen_preset(argparse.Namespace(preset="quick", architecture="standard"))


def test_load_checkpoint_takes_a_shipped_name():
    model, metadata = load_checkpoint("quick-td-s0")
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
