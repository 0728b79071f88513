"""What every figure shares: the palette and each series' colour by role, the ``Figure`` class that shows itself
in a notebook, the check that nothing is drawn off the canvas, and readable axes (log ticks, zoom, legends
outside, wrapped titles)."""

from __future__ import annotations

import io
import itertools
from collections.abc import Sequence
from typing import Optional

import matplotlib
import numpy as np
import seaborn as sns
from matplotlib.figure import Figure as MatplotlibFigure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator

PALETTE = sns.color_palette("colorblind")
LEGEND_ROWS = 12  # the most entries a legend at the right holds; more go under the axes in columns
STAR = r"$\theta^*$"  # one name for the constructed weights in every figure
SUP_ERROR = r"$\|v_L - v_\pi\|_\infty$"
SVG_SALT = "ictd-interp"  # matplotlib's SVG ids are random unless salted


def series_colours(labels: Sequence[str]) -> list:
    """One colour per series by what it is, the same in every figure: a trained model blue, θ* green, a
    TD(0) or tabular construction orange; any other series (or a second of one kind) takes the next
    colour not given out, in order; past the palette, the roles' colours no series took, then the palette again
    (a figure with that many series tells them apart by line style too)."""

    def role(label: str) -> Optional[int]:
        text = label.lower()
        if "theta" in text or "θ*" in label or STAR in label:
            return 2
        if "td(0)" in text or "tabular" in text:
            return 1
        return 0 if "model" in text or "trained" in text else None

    wanted = [role(label) for label in labels]
    unused = [k for k in range(3) if k not in wanted]
    # colours 0-2 belong to the three roles, even where one is absent, until the others run out
    spare = itertools.chain(range(3, len(PALETTE)), unused, itertools.cycle(range(len(PALETTE))))
    taken, out = set(), []
    for k in wanted:
        k = next(spare) if k is None or k in taken else k
        taken.add(k)
        out.append(PALETTE[k])
    return out


class Figure(MatplotlibFigure):
    """A matplotlib Figure that shows itself as a PNG in any Jupyter kernel (``display(fig)`` or a
    cell's last line), whatever the matplotlib backend: no pyplot state is needed. Saved as SVG it has no date and
    fixed element ids, so the same numbers give the same bytes (as its PNG does)."""

    def savefig(self, fname, *args, **kwargs) -> None:
        if str(fname).endswith(".svg") or kwargs.get("format") == "svg":
            kwargs.setdefault("metadata", {"Date": None})
            with matplotlib.rc_context({"svg.hashsalt": SVG_SALT}):
                return super().savefig(fname, *args, **kwargs)
        return super().savefig(fname, *args, **kwargs)

    def _repr_png_(self) -> bytes:
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100)
        return buffer.getvalue()


def text_outside(fig: MatplotlibFigure, tolerance_px: float = 1.0) -> list[str]:
    """What of ``fig`` does not fit on its canvas, measured after a full draw as the saved PNG has it:
    each axes with everything drawn around it (title, labels, tick labels, its legend) and the figure's
    own texts and legends. An empty list when nothing is clipped."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # the canvas savefig draws the PNG on
    canvas.draw()
    renderer = canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    parts = [(ax.get_title() or ax.get_ylabel() or "axes", ax.get_tightbbox(renderer)) for ax in fig.axes]
    parts += [(t.get_text(), t.get_window_extent(renderer)) for t in fig.texts if t.get_visible() and t.get_text()]
    parts += [("legend", leg.get_window_extent(renderer)) for leg in fig.legends]
    return [
        name
        for name, box in parts
        if box is not None
        and (
            box.x0 < -tolerance_px
            or box.y0 < -tolerance_px
            or box.x1 > width + tolerance_px
            or box.y1 > height + tolerance_px
        )
    ]


def wrapped(text: str, width: int = 60) -> str:
    """A long title on as many lines as it needs (``textwrap``), so it never runs off the canvas."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def new_figure(ncols: int = 1, width: float = 5.0, height: float = 3.8, panels: int = 0) -> tuple[Figure, list]:
    """A figure of ``panels`` axes (``ncols`` when 0), ``ncols`` to a row, each ``width`` by ``height`` inches, laid
    out by matplotlib's constrained layout."""
    panels = panels or ncols
    nrows = -(-panels // ncols)
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    return fig, [fig.add_subplot(nrows, ncols, i + 1) for i in range(panels)]


def zoom(values: np.ndarray) -> tuple[float, float]:
    """Axis limits around the data (a cosine axis spanning -1..1 hides 0.98 vs 0.99)."""
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    pad = max(0.01, 0.08 * (hi - lo))
    return lo - pad, min(1.0 + pad / 2, hi + pad)


def log_axis(axis) -> None:
    """Readable ticks on a log axis: 1-2-5 steps as plain numbers over a few decades, one tick per
    decade beyond that (not two cramped powers of ten, not a wall of labels)."""
    lims = axis.axes.dataLim
    lo, hi = lims.intervaly if axis.axis_name == "y" else lims.intervalx
    decades = np.log10(hi / lo) if lo > 0 and hi > lo else 10.0
    if decades <= 0.6:  # within a factor of 4: evenly spaced round numbers read best, no unlabelled log minors
        axis.set_major_locator(MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10]))
        axis.set_minor_locator(NullLocator())
    else:
        subs = (1.0, 2.0, 3.0, 5.0) if decades <= 1.5 else (1.0, 2.0, 5.0) if decades <= 3 else (1.0,)
        axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=30 if decades <= 8 else 8))
    # one tick per decade reaching a number that needs an exponent: every tick a power of ten, not
    # "100000" beside "10⁶"
    powers = bool(decades > 3 and (hi >= 1e6 or lo < 1e-4))
    axis.set_major_formatter(FuncFormatter(lambda x, _: tick_text(x, powers)))
    axis.set_minor_formatter(NullFormatter())


SUPERSCRIPTS = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def tick_text(x: float, powers: bool = False) -> str:
    """A tick as a plain number (``0.05``, ``1000``), or where that needs an exponent (or ``powers`` asks for
    one) as ``10⁶`` / ``2×10⁻⁵``."""
    text = f"{x:.0e}" if powers and x > 0 else f"{x:g}"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    power = f"10{str(int(exponent)).translate(SUPERSCRIPTS)}"
    return power if mantissa == "1" else f"{mantissa}×{power}"


def legend_outside(ax, title: Optional[str] = None, keep: bool = True) -> None:
    """One legend right of the axes with every labelled artist (seaborn's included; ``keep=False``: none,
    for all but the last of axes sharing one legend); past ``LEGEND_ROWS`` entries, under the axes in columns."""
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    if not keep:
        return
    entries = len(ax.get_legend_handles_labels()[1])
    if entries <= LEGEND_ROWS:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, title=title)
        return
    # many series (a study's conditions): in columns under the axes, the figure made taller to hold them, so the
    # axes keep their width and the title its room
    columns = 3
    rows = -(-entries // columns)
    width, height = ax.figure.get_size_inches()
    ax.figure.set_size_inches(width, height + 0.24 * rows)
    handles, labels = ax.get_legend_handles_labels()
    ax.figure.legend(handles, labels, loc="outside lower center", frameon=False, title=title, ncols=columns)


def legend_below(ax, columns: int = 2) -> None:
    """One legend under the axes, in ``columns``: for a plot whose entries are long (a fit's parameters), where a
    legend at the right would squeeze the axes."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False, ncols=columns)


def condition_colours(conditions: Sequence[str]) -> dict[str, tuple]:
    """A colour per condition: the palette's own up to its length, evenly spaced hues past it (a study of 20
    conditions gets 20 colours, never a missing one)."""
    import seaborn as sns

    conditions = list(dict.fromkeys(conditions))
    colours = (
        sns.color_palette(PALETTE) if len(conditions) <= len(PALETTE) else sns.color_palette("husl", len(conditions))
    )
    return dict(zip(conditions, colours))
