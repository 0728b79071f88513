"""Studies on Ray: tables equal the cells' own files, cells equal standalone runs, faults lose nothing."""

import json
import os
import signal

import pytest

from ictd_interp.analyses.studies.spec import load_spec
from tests.support.study import _cli, _wait_for, _write_spec, assert_same, final_weights, spec, standalone


@pytest.mark.slow
def test_ctrl_c_checkpoints_exits_130_and_the_same_command_resumes(tmp_path):
    data = spec(grid={"n_layers": [3]}, seeds=[0], steps=400, checkpoint_every=50, eval_every=200)
    path, out = _write_spec(tmp_path / "c.toml", data), tmp_path / "s"
    proc = _cli("study", str(path), "--out", str(out), "--workers", "1", start_new_session=True)
    cell = out / "cells" / "n_layers-3__seed-0"
    _wait_for(lambda: (cell / "run" / "checkpoints" / "step_0000050").exists())
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert json.loads((cell / "status.json").read_text())["status"] == "interrupted"
    assert not (cell / "run" / "final").exists()
    again = _cli("study", str(path), "--out", str(out), "--workers", "1")
    output, _ = again.communicate(timeout=300)
    assert again.returncode == 0, output
    assert_same(final_weights(cell), standalone(load_spec(data).cells()[0].config, tmp_path / "alone"))
