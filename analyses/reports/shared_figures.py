"""The figures every architecture's report shares, drawn from its typed ``Summary`` only (the saved numbers,
never a live model); each architecture's own are its report module's ``figures``."""

from __future__ import annotations

from ictd_interp.analyses.figures import plots
from ictd_interp.analyses.figures.ladder_plot import ladder_figure
from ictd_interp.analyses.figures.style import STAR, Figure
from ictd_interp.analyses.metrics.ladder import DRAWN, SHORT, Ladder
from ictd_interp.analyses.summary.sections import Summary


def common_figures(summary: Summary) -> dict[str, Figure]:
    """The verdict ladder (where judged), error against context length, predictions against v_pi, and (where
    measured) the depth extrapolation."""
    ex, conv, ext = summary.example, summary.convergence, summary.algorithm.extrapolation
    ic = summary.in_context
    out = {
        **({"ladder": ladder_of(ic.ladder)} if ic is not None and ic.ladder is not None else {}),
        "error_vs_context": plots.error_vs_context(conv.context_lengths, conv.context),
        "predicted_vs_true": plots.predicted_vs_true(ex.predicted, ex.true),
    }
    if ext is not None:
        reference = STAR if ext.reference_name == "theta*" else ext.reference_name
        out["depth_extrapolation"] = plots.depth_extrapolation(
            ext.depths, ext.model, ext.reference, ext.trained_depth, ext.verdict, reference=reference
        )
    return out


def ladder_of(lad: Ladder, what: str = "") -> Figure:
    """The verdict ladder's figure (``ladder_plot``): its level and sample in the title, ``what`` after them."""
    title = f"The verdict ladder: {lad.level} (MSVE on {lad.n_tasks} held-out tasks{'; ' + what if what else ''})"
    return ladder_figure(lad.rungs, {name: SHORT[name] for name in DRAWN}, title)
