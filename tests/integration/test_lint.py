"""Lint that runs: ruff with the project's own settings (pyproject's ``[tool.ruff]``: pyflakes, syntax errors,
bugbear and the declared 120-character line length) over the code, the tests, the benchmarks and the
notebooks; and the rule that fails on a line one character too long."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
RUFF = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")


@pytest.mark.skipif(not Path(RUFF).exists(), reason="ruff is in the [test] extra")
def test_the_tree_passes_ruff_with_the_declared_line_length():
    out = subprocess.run([RUFF, "check", "--output-format", "concise", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]


@pytest.mark.skipif(not Path(RUFF).exists(), reason="ruff is in the [test] extra")
def test_the_tree_is_formatted_by_the_declared_formatter():
    out = subprocess.run([RUFF, "format", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]


@pytest.mark.skipif(not Path(RUFF).exists(), reason="ruff is in the [test] extra")
def test_unsorted_imports_and_unformatted_code_fail(tmp_path):
    config = ["--config", str(ROOT / "pyproject.toml")]
    (tmp_path / "imports.py").write_text(
        "import torch\nimport os\n\nfrom ictd_interp import MRP\n\nprint(os, torch, MRP)\n"
    )
    out = subprocess.run([RUFF, "check", *config, str(tmp_path / "imports.py")], capture_output=True, text=True)
    assert out.returncode == 1 and "I001" in out.stdout
    (tmp_path / "format.py").write_text("x = {'a':1}\n")
    out = subprocess.run(
        [RUFF, "format", *config, "--check", str(tmp_path / "format.py")], capture_output=True, text=True
    )
    assert out.returncode == 1 and "format.py" in out.stdout


@pytest.mark.skipif(not Path(RUFF).exists(), reason="ruff is in the [test] extra")
def test_the_line_length_rule_fails_on_121_characters(tmp_path):
    (tmp_path / "long.py").write_text("x = '" + "a" * 115 + "'\n")  # 121 characters
    out = subprocess.run(
        [RUFF, "check", "--config", str(ROOT / "pyproject.toml"), str(tmp_path / "long.py")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and "E501" in out.stdout


def test_the_tier_rule_sends_training_the_cli_and_ray_to_integration():
    from tests.conftest import tier_of

    for code in (
        "train(cfg, tmp)",
        "main(args)",
        "subprocess.run(x)",
        "ray.init()",
        "_cli('study')",
        "retrain(n)",
        "opt.step()",
        "train_sae(acts, seed=0)",
        "interchange.fit_das(model, site, tasks, labels, [0])",
    ):
        assert tier_of(code) == "integration", code
    for code in (
        "model(prompt)",
        "errors_by_depth(star, tasks)",
        "constrained(x)",
        "maintain(y)",
        "loss.backward()",
        "cfg.step_size",
    ):
        assert tier_of(code) == "unit", code
