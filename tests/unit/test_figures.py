"""Every figure a reader sees keeps its text on the canvas (titles, labels, ticks, legends, colorbars)."""

import pandas as pd

from ictd_interp.analyses.figures import style
from ictd_interp.analyses.figures.circuits import patching_heatmap


def test_the_check_finds_a_title_that_runs_off_the_canvas():
    fig, (ax,) = style.new_figure(width=3.0)
    ax.set_title("Error versus depth (gym:FrozenLake-v1, policy: uniform random over actions) " * 2)
    assert style.text_outside(fig) != []
    ax.set_title(style.wrapped(ax.get_title(), 28))
    assert style.text_outside(fig) == []


def test_patching_heatmap_colorbar_label_fits():
    table = pd.DataFrame(
        [
            {"hook": f"blocks.{l}.hook_resid_pre", "position": p, "recovered": (l + p) / 40}
            for l in range(2)
            for p in range(31)
        ]
    )
    assert style.text_outside(patching_heatmap(table)) == []


def test_log_ticks_read_as_plain_numbers_or_powers_of_ten():
    from ictd_interp.analyses.figures.style import tick_text

    assert [tick_text(x) for x in (0.05, 1000, 1e5, 1e6, 2e-5, 3e7)] == [
        "0.05",
        "1000",
        "100000",
        "10⁶",
        "2×10⁻⁵",
        "3×10⁷",
    ]
    assert [tick_text(x, powers=True) for x in (100, 1e5, 1e6, 1e-5)] == ["10²", "10⁵", "10⁶", "10⁻⁵"]


def test_a_log_axis_reaching_a_million_writes_every_decade_as_a_power():
    from ictd_interp.analyses.figures.style import Figure, log_axis

    ax = Figure().add_subplot()
    ax.plot([30, 1e6], [1, 2])
    ax.set_xscale("log")
    log_axis(ax.xaxis)
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert "10³" in labels and "10⁶" in labels and "1000" not in labels and "100000" not in labels


def test_a_figure_saved_twice_as_svg_gives_the_same_bytes(tmp_path):
    """No date, fixed ids: the same numbers give the same SVG (matplotlib's own Figure differs on both counts)."""
    from matplotlib.figure import Figure as MatplotlibFigure

    from ictd_interp.analyses.figures.style import Figure

    def saved(cls, name):
        fig = cls()
        fig.add_subplot().plot([0, 1], [1, 0])
        fig.savefig(tmp_path / name)
        return (tmp_path / name).read_bytes()

    assert saved(Figure, "a.svg") == saved(Figure, "b.svg") and b"<dc:date>" not in saved(Figure, "c.svg")
    assert saved(MatplotlibFigure, "d.svg") != saved(MatplotlibFigure, "e.svg")  # the test could fail
