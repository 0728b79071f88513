"""The benchmark's checkpoint track (``ictd-interp methods-benchmark --track checkpoints``): readings scored as
classifiers of what trained checkpoints compute.

- ``population``: each run's checkpoints along training and its initialisation, labelled in function space by the
  verdict ladder (runs TD, stopped early, learns nothing) and by objective.
- ``scores``: AUROC, balanced accuracy and false discoveries with intervals over runs (pure functions).
- ``track``: the population trained by the studies' engine (or given), every run recorded in a Ray task, resumable;
  the private split's seeds drawn from a key.
- ``report``: ``checkpoints.md``, ``checkpoints.json`` and the figure.

The readings themselves are ``ictd_interp.analyses.metrics.readings`` (analyze's Answer quotes them too). Imports
``ictd_interp.analyses.metrics``, ``ictd_interp.analyses.figures``, ``ictd_interp.analyses.studies`` (the engine
and its Ray session) and the core's ``ictd_interp.config``, ``ictd_interp.io``, ``ictd_interp.models`` and
``ictd_interp.tasks``.
"""
