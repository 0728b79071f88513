"""Reports of one model, one vertical slice per architecture: ``stylised``, ``standard`` and ``linear`` each hold
their ``compute`` (-> a typed summary, ``schema``: one dataclass per section, written and read here only), their
``lines`` (summary.md's words) and their ``figures``; ``render`` and ``drawing`` hold what every report shares;
``write`` has the one ``REPORTS`` table and writes ``summary.json``, ``summary.md`` and ``figures/``; ``ood``
evaluates out of distribution. They import ``metrics`` and ``figures``, and the core's ``config``, ``io``, ``tasks``,
``models`` and ``training``. Names are imported on first use.
"""

from ictd_interp._lazy import lazy_exports

_EXPORTS = {
    "resolve": "write", "training_curves": "write", "analyze": "write", "source_label": "write",
    "REPORTS": "write", "Report": "write", "figures": "write",
    "algorithm_answers": "stylised", "theta_star_limit": "stylised",
    "algorithm_sentences": "stylised", "limit_sentence": "stylised", "margin_sentence": "stylised",
    "diagonality_sentence": "stylised",
    "td_heads": "standard", "verdict": "standard", "standard_sentences": "standard",
    "linear_layer_sentence": "linear", "their_lines": "linear", "their_readings": "linear",
    "LinearFamily": "schema", "TheirReadings": "schema", "per_layer": "schema", "detail": "schema",
    "Estimate": "schema", "Baselines": "schema", "Probes": "schema", "Diagonality": "schema", "Margin": "schema",
    "Extrapolation": "schema", "Algorithm": "schema", "Circuit": "schema", "Convergence": "schema",
    "Summary": "schema", "to_json": "schema", "write_summary": "schema", "read_summary": "schema",
    "build": "schema", "flatten": "schema", "Column": "schema", "eval_tasks_label": "schema",
    "common_figures": "drawing",
    "layer_sentence": "render", "baseline_table": "render", "neu_lines": "render", "write_with_figures": "render",
    "evaluate_ood": "ood", "write_ood": "ood", "ood_figures": "ood",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
