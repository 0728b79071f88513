"""Analyses of ICTD transformers (``ictd_interp.analyses``, from the folder ``analyses/``), in layers; each sub-package
imports only those listed before it (and the core and ``ictd_interp.hooks``):

- ``metrics``: pure functions of models, caches and tasks (numbers, tensors, tables).
- ``figures``: figures drawn from saved numbers.
- ``summary``: the typed summary of one model's analysis (sections, ``summary.json``, study-table columns).
- ``reports``: one model's report per architecture: compute -> typed summary -> words and figures.
- ``analyze``: the one table of reports, and ``analyze`` (a checkpoint or run -> summary.json, .md, figures).
- ``studies``: grids of training runs on Ray, tabulated from the cells' summaries, with aggregate figures.
- ``claims``: every claim of the paper re-derived with intervals and verdicts (``ictd-interp claims``).
- ``methods_benchmark``: interpretability methods scored against circuits planted exactly (``ictd-interp
  methods-benchmark``).
- ``commands``: the ``ictd-interp`` sub-commands these own (``analyze``, ``study``, ``claims``, ...), registered with
  the core's command line through an entry point.
- ``cards``: the shipped models' cards and verdicts recomputed (``python -m ictd_interp.analyses.cards``).
"""
