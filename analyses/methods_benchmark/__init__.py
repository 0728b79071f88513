"""A benchmark of interpretability methods against circuits known exactly (``ictd-interp methods-benchmark``).

- ``graph``: a standard model's computation graph (writers, readers, edges) with patchable edges.
- ``cases``: planted cases — θ*'s circuit (or a trained model's layer) behind a random rotation, with
  distractors — and their ground truth.
- ``scores``: AUROC, AUPRC, ROC, principal angles, faithfulness (pure functions).
- ``methods``: the ``Method`` record, ``register_method`` and the built-in methods.
- ``evaluate``: a method's output scored against a case's ground truth (typed: ``EdgeScores``,
  ``DirectionScores``, ``CellResult``).
- ``run``: every method on every case × seed on Ray, resumable; ``report``: the table, verdicts and figures.

Imports ``analyses.metrics``, ``analyses.figures``, ``analyses.studies`` (its Ray set-up), ``analyses.summary``
(typed JSON written and read back) and the core's ``ictd_interp.config``, ``ictd_interp.tasks``,
``ictd_interp.models`` and ``ictd_interp.training`` (the output folder's request check).
"""
