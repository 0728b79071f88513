"""Every figure a reader sees keeps its text on the canvas (titles, labels, ticks, legends, colorbars)."""

import json

from ictd_interp.analyses.figures.style import text_outside
from ictd_interp.analyses.reports.ood import ood_figures
from ictd_interp.cli import main


def test_evaluation_figures_on_a_gymnasium_environment_fit(tmp_path):
    assert (
        main(
            [
                "evaluate",
                "depth3-td-s0",
                "--env",
                "gym:FrozenLake-v1",
                "--n-tasks",
                "4",
                "--context-len",
                "40",
                "--depth",
                "4",
                "--feature-kind",
                "uniform",
                "--out",
                str(tmp_path / "e"),
            ]
        )
        == 0
    )
    result = json.loads((tmp_path / "e" / "evaluation.json").read_text())
    for name, fig in ood_figures(result).items():
        assert text_outside(fig) == [], name
