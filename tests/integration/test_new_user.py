"""What a new user hits (issue 41): folders a failed request used to lock, the architecture's own preset,
shipped models loaded by name, readable checkpoints under umask 022, a metrics file cut mid-line."""

import argparse

import pytest

from ictd_interp.cli.commands import chosen_preset


def test_architecture_standard_takes_its_own_preset_and_a_conflicting_preset_is_refused(tmp_path):
    args = argparse.Namespace(preset=None, architecture="standard")
    assert chosen_preset(args).model.architecture == "standard" and chosen_preset(args).tasks_per_batch == 16
    assert chosen_preset(argparse.Namespace(preset=None, architecture=None)).model.tied
    with pytest.raises(ValueError, match="standard-quick"):
        chosen_preset(argparse.Namespace(preset="quick", architecture="standard"))
    from ictd_interp.cli import main

    assert main(["train", "--preset", "quick", "--architecture", "standard", "--out", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()


def test_cli_errors_are_one_line_naming_the_flag_typed(capsys):
    from ictd_interp.cli import main

    assert main(["evaluate", "depth3-td-s0", "--out", "unused", "--env", "nonsense"]) == 2
    assert capsys.readouterr().err.startswith("ictd-interp evaluate: error: --env: must be one of")
    for argv, expected in (
        (["train", "--ot", "x"], "--ot (did you mean --out"),
        (["train", "--threads", "0", "--out", "x"], "--threads: must be a whole number >= 1, got 0"),
    ):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and expected in err
        assert err.count("\n") == 1 and "usage:" not in err  # one line, no usage block
