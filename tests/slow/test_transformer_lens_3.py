"""The project keeps working on TransformerLens 3.9 (the design card's lower bound; the default environment has
TransformerLens 4): the unit tier run in a second environment, ``.venv-tl3`` (built on first use, reused after),
with ``transformer-lens==3.9.0`` in place of 4 and SAELens (which needs it), so the SAE plugin's tests
(tests/unit/test_benchmark_features.py) run there too. Slow: the first build installs the test extra (minutes)."""

import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = ROOT / ".venv-tl3"
PINS = ("transformer-lens==3.9.0", "sae-lens==6.54.12")


@pytest.mark.slow
def test_the_unit_tier_passes_on_transformer_lens_3():
    python = ENV / "bin" / "python"
    if not python.exists():
        venv.create(ENV, with_pip=True)
    install = [str(python), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), "-e", ".[test]", *PINS]
    subprocess.run(install, cwd=ROOT, check=True)
    found = subprocess.run(
        [str(python), "-c", "from importlib.metadata import version; print(version('transformer-lens'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == "3.9.0"
    run = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1]
    features = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_benchmark_features.py"]
    sae = subprocess.run([str(python), *features], cwd=ROOT, capture_output=True, text=True)
    assert sae.returncode == 0 and "skipped" not in sae.stdout.splitlines()[-1], sae.stdout[-2000:]  # SAELens ran
