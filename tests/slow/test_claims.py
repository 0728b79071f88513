"""The claims report: its verdict rules worked by hand, the theorem rows on θ*, and a tiny budget end to end
on Ray (resumed, refused when the budget changes). The quick budget in full is a slow test."""

import json
import os
import subprocess
import sys

import pytest

from ictd_interp.analyses.claims.claim import HOLDS


@pytest.mark.slow  # the quick budget in full: about 10 minutes on 2 cores
def test_the_quick_budget_from_the_command_line(tmp_path):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ictd_interp.cli",
            "claims",
            "--out",
            str(tmp_path / "q"),
            "--budget",
            "quick",
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    verdicts = {r["id"]: r["verdict"] for r in json.loads((tmp_path / "q" / "claims.json").read_text())["claims"]}
    assert verdicts["theorem1"] == HOLDS and verdicts["assumption51"].startswith("holds only when onehot")
