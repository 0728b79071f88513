"""Figures drawn from saved numbers (never live models): each function returns a ``Figure`` that shows
itself in Jupyter. ``style`` (what every figure shares: colours, ``Figure``, axes), ``plots`` (the report's
figures), ``circuits`` (the standard model's circuit search and patching), ``attention_plots`` (circuitsvis
views), ``control_plots`` (acting and backups), ``ladder_plot`` (the verdict ladder). They import the core's
constants only (and ``reference``'s ``signature_on_values``, the one conversion the signature's words and figure
share), never ``metrics``, ``reports`` or ``studies``. Names are imported on first use.
"""

from ictd_interp._lazy import lazy_exports

_EXPORTS = {
    "Figure": "style",
    "text_outside": "style",
    "wrapped": "style",
    "attention_comparison": "plots",
    "grouped_kernel": "plots",
    "diagonality_curve": "plots",
    "signature_bars": "plots",
    "sign_bars": "plots",
    "cosine_curves": "plots",
    "error_vs_depth": "plots",
    "depth_extrapolation": "plots",
    "error_vs_context": "plots",
    "predicted_vs_true": "plots",
    "scale_sweep": "plots",
    "ladder_figure": "ladder_plot",
    "zoom": "style",
    "log_axis": "style",
    "legend_outside": "style",
    "series_colours": "style",
    "site_labels": "circuits",
    "probe_error_vs_depth": "circuits",
    "probe_map": "circuits",
    "head_map": "circuits",
    "probed_signature_bars": "circuits",
    "patching_heatmap": "circuits",
    "regret_bars": "control_plots",
    "backup_gap": "control_plots",
    "position_labels": "attention_plots",
    "OfflineHTML": "attention_plots",
    "attention_view": "attention_plots",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
