"""Reports of one model, one vertical slice per architecture: ``stylised``, ``standard`` and ``linear`` each hold
their ``compute`` (-> a typed ``summary``), their ``lines`` (summary.md's words) and their ``figures``, with their
longer sentences in ``stylised_words`` and ``standard_words``; ``summary_md`` (words) and ``shared_figures``
(figures) hold what every report shares; ``construction`` reports θ* alone; ``ood`` evaluates out of distribution.
A module here that names an ``ARCHITECTURE`` is that architecture's report (``ictd_interp.analyses.analyze.REPORTS``
finds it); the files they write are ``ictd_interp.analyses.analyze``'s. They import ``metrics``, ``figures`` and
``summary``, and the
core's ``config``, ``io``, ``tasks``, ``models``, ``training`` and ``reference`` (the signature's one conversion).
Names are imported on first use.
"""

from ictd_interp._lazy import lazy_exports

_EXPORTS = {
    "algorithm_answers": "stylised",
    "algorithm_sentences": "stylised_words",
    "limit_sentence": "stylised_words",
    "margin_sentence": "stylised_words",
    "diagonality_sentence": "stylised_words",
    "td_heads": "standard_words",
    "verdict": "standard_words",
    "standard_sentences": "standard_words",
    "linear_layer_sentence": "linear",
    "their_lines": "linear",
    "their_readings": "linear",
    "common_figures": "shared_figures",
    "eval_tasks_label": "summary_md",
    "layer_sentence": "summary_md",
    "baseline_table": "summary_md",
    "neu_lines": "summary_md",
    "write_with_figures": "summary_md",
    "evaluate_ood": "ood",
    "write_ood": "ood",
    "ood_figures": "ood",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
