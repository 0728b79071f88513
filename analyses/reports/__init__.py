"""Reports of one model: compute (``stylised`` for the stylised model, ``standard`` for the standard one,
``linear`` for the predecessor's linear model, ``ood`` out of distribution) -> a typed summary (``schema``: one dataclass per section, written and read
here only) -> render (``render``: markdown from the summary) -> write (``summary.json``, ``summary.md``,
``figures/``). They import ``metrics`` and ``figures``, and the core's ``config``, ``io``, ``tasks``,
``models`` and ``training``. Names are imported on first use.
"""

from ictd_interp._lazy import lazy_exports

_EXPORTS = {
    "resolve": "write", "training_curves": "write", "analyze": "write", "source_label": "write",
    "theta_star_coefficients": "stylised", "compute": "stylised", "algorithm_answers": "stylised",
    "theta_star_limit": "stylised", "compute_standard": "standard", "compute_linear": "linear", "LinearFamily": "schema", "per_layer": "schema", "detail": "schema",
    "Estimate": "schema", "Baselines": "schema", "Probes": "schema", "Diagonality": "schema", "Margin": "schema",
    "Extrapolation": "schema", "Algorithm": "schema", "Circuit": "schema", "Convergence": "schema",
    "Summary": "schema", "to_json": "schema", "write_summary": "schema", "read_summary": "schema",
    "build": "schema", "flatten": "schema", "Column": "schema", "eval_tasks_label": "schema", "draw": "drawing",
    "algorithm_sentences": "render", "layer_sentence": "render", "baseline_table": "render", "neu_lines": "render",
    "limit_sentence": "render", "margin_sentence": "render", "diagonality_sentence": "render",
    "write_markdown": "render", "stylised_lines": "render", "write_with_figures": "render", "td_heads": "render",
    "verdict": "render", "standard_sentences": "render", "standard_lines": "render", "linear_lines": "render",
    "linear_layer_sentence": "render", "evaluate_ood": "ood",
    "write_ood": "ood", "ood_figures": "ood",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
