"""The README is a document a reader runs: its two commands come first, its tour runs as written, it stays short."""

import re
from pathlib import Path

import matplotlib
import torch

README = Path(__file__).resolve().parents[2] / "README.md"


def _tour() -> str:
    text = README.read_text()
    section = text.split("## A short tour", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_tour_runs_as_written_and_computes_what_it_says():
    matplotlib.use("Agg")
    scope: dict = {}
    exec(compile(_tour(), "README.md (A short tour)", "exec"), scope)  # noqa: S102 (the README's own code)
    tasks, model = scope["tasks"], scope["model"]
    assert scope["values"].shape == (8, 31) and scope["pattern"].shape == (8, 1, 31, 31)
    assert torch.allclose(scope["pattern"].sum(-1), torch.ones(8, 1, 31))  # each query's weights over sources
    assert len(scope["cos"]["A"]) == model.cfg.n_layers
    assert (scope["corrupted"] - tasks.prompt).abs().sum() == 1.0 * 8  # one reward per task, raised by 1
    recovered = scope["recovered"]
    assert recovered.shape[1] == 31 and recovered.notna().all().all()


def test_the_readme_opens_with_its_two_commands_and_stays_a_ten_minute_read():
    lines = README.read_text().splitlines()
    block = lines[lines.index("```bash") + 1 : lines.index("```bash") + 3]
    assert "reproduce --preset deep" in block[0] and "pytest" in block[1]
    assert len(lines) <= 250
