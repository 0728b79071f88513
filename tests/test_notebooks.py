"""Every notebook runs top to bottom in fast mode, and none is committed with outputs."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_four_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    assert not any(c.get("outputs") or c.get("execution_count") for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_runs_in_fast_mode(path, tmp_path, monkeypatch):
    monkeypatch.setenv("ICTD_FAST", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.delenv("ICTD_RUN", raising=False)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
