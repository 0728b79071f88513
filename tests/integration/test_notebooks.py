"""Every notebook runs top to bottom in fast mode, shows its figures, and is committed without outputs."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))
FIGURE_CALLS = ("display(figures.",)


def test_there_are_seven_notebooks():
    assert [p.stem[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04", "05", "06", "07"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_runs_in_fast_mode_and_shows_every_figure(path, tmp_path, monkeypatch):
    """What the reader sees: each figure cell renders a PNG (not ``<Figure size ...>`` text), in a
    default kernel with no backend chosen, and nothing warns on stderr."""
    monkeypatch.setenv("ICTD_FAST", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)
    monkeypatch.delenv("ICTD_RUN", raising=False)
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    figure_cells = [c for c in nb.cells if c.cell_type == "code" and any(k in c.source for k in FIGURE_CALLS)]
    assert figure_cells, "every notebook shows at least one figure"
    for cell in figure_cells:
        expected = sum(cell.source.count(k) for k in FIGURE_CALLS)
        pngs = [o for o in cell.outputs if "image/png" in o.get("data", {})]
        assert len(pngs) == expected, cell.source
        assert not any(
            "<Figure size" in o.get("data", {}).get("text/plain", "") and "image/png" not in o.get("data", {})
            for o in cell.outputs
        )
    stderr = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.get("name") == "stderr"
    )
    assert "Warning" not in stderr, stderr
