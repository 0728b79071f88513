"""A benchmark of interpretability methods against circuits known exactly (``ictd-interp methods-benchmark``).

- ``graph``: a standard model's computation graph (writers, readers, edges) with patchable edges.
- ``cases``: planted cases — θ*'s circuit (or a trained model's layer) behind a random rotation, with
  distractors — and their ground truth; ``case_specs`` lists them, ``planting`` writes their weights.
- ``scores``: AUROC, AUPRC, ROC, principal angles (pure functions); ``faithfulness``: circuits by joint ablation
  and faithfulness over circuit size.
- ``methods``: the ``Method`` record, ``register_method`` and the built-in methods, with ``weight_reader`` (the
  weights alone) and ``mask_selection`` (edge pruning) beside them; ``plugins``: outside methods' files.
- ``guard``: a method's run on its ``Problem``, its failures named and the process state put back.
- ``evaluate``: a method's output scored against a case's ground truth (typed: ``EdgeScores``,
  ``DirectionScores``, ``CellResult``).
- ``run``: every method on every case × seed on Ray, resumable; ``isolation``: each method in a Ray task of its
  own, with a time limit; ``sealed``: the public and private splits.
- ``report``: the tables, verdicts and figures (``report_figures``; ``selection``: which cells and methods a
  table reads); ``leaderboard``: ``results.json`` and the ranked table.
- ``sae_plugin``: sparse autoencoders through SAELens, a plugin (TransformerLens 3.9).
- ``checkpoints``: the checkpoint track, readings scored as classifiers of trained checkpoints labelled in function
  space (runs TD, stopped early, learns nothing).

Imports ``ictd_interp.analyses.metrics``, ``ictd_interp.analyses.figures``, ``ictd_interp.analyses.studies`` (its Ray
set-up), ``ictd_interp.analyses.summary``
(typed JSON written and read back) and the core's ``ictd_interp.config``, ``ictd_interp.tasks``,
``ictd_interp.models`` and ``ictd_interp.io`` (the output folder's request check, progress bars).
"""
