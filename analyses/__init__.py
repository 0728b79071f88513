"""Analyses of ICTD transformers, in layers; each sub-package imports only those listed before it (and
the core ``ictd_interp`` and ``hooks``):

- ``metrics``: pure functions of models, caches and tasks (numbers, tensors, tables).
- ``figures``: figures drawn from saved numbers.
- ``summary``: the typed summary of one model's analysis (sections, ``summary.json``, study-table columns).
- ``reports``: one model's report per architecture: compute -> typed summary -> words and figures.
- ``analyze``: the one table of reports, and ``analyze`` (a checkpoint or run -> summary.json, .md, figures).
- ``studies``: grids of training runs on Ray, tabulated from the cells' summaries, with aggregate figures.
- ``claims``: every claim of the paper re-derived with intervals and verdicts (``ictd-interp claims``).
- ``methods_benchmark``: interpretability methods scored against circuits planted exactly (``ictd-interp
  methods-benchmark``).
- ``cards``: the shipped models' cards and verdicts recomputed (``python -m analyses.cards``).

Importing it checks that ``hooks`` is the toolkit's own package, not a ``hooks.py`` of the working directory
(``ictd_interp.io.install``): one line naming the file, instead of a failure deep in an import.
"""

from ictd_interp.io.install import shadowing as _shadowing

if (_problem := _shadowing(("hooks",))) is not None:
    raise ImportError(_problem)
