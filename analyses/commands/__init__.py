"""The ``ictd-interp`` sub-commands the analyses own, as ``ictd_interp.cli.command.Command`` data: pyproject.toml
registers ``COMMANDS`` under the entry-point group "ictd_interp.commands", and the core's command line reads it, so
the core imports nothing of the analyses. ``flags`` declares their arguments (torch-free); ``model`` runs
``construct``, ``reproduce``, ``analyze`` and ``evaluate``; ``study`` runs ``study`` and ``study-report``;
``reports`` runs ``claims`` and ``methods-benchmark``; ``configs`` holds ``construct``'s and ``evaluate``'s
settings. Each check refuses, before torch loads, what it can see wrong. Imports ``cli`` and ``config`` (the
settings' dataclasses) and, inside its functions, the core's ``io``, ``tasks`` and ``training`` and every layer of
the analyses (``analyze``, ``metrics``, ``reports``, ``studies``, ``claims``, ``methods_benchmark``).
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from ictd_interp.analyses.commands import flags, model, reports, study
from ictd_interp.analyses.commands.configs import ConstructConfig, EvaluateConfig
from ictd_interp.cli.command import Command
from ictd_interp.cli.flags import training_flags
from ictd_interp.cli.prechecks import check_env, check_model
from ictd_interp.io.pretrained import model_argument


def _reads_model(args: argparse.Namespace) -> list[Path]:
    """A model argument must exist (a file, a folder or a shipped model's name); ``--out`` may never be it."""
    check_model(args.path)
    if getattr(args, "env", None) is not None:
        check_env(args.env)
    return [model_argument(args.path)]


def _study_spec(args: argparse.Namespace) -> list[Path]:
    from ictd_interp.analyses.studies.spec import spec_file  # torch-free: the specs are TOML files

    spec_file(args.spec)
    return []


def _split_key(args: argparse.Namespace) -> list[Path]:
    from ictd_interp.analyses.methods_benchmark.sealed import Split  # torch-free: reads the key file

    Split.read(args.split, args.key_file)
    return []


COMMANDS = [
    Command(
        "construct",
        "theta*: error versus depth on Boyan chains, with the margin C",
        flags.construct_flags,
        model.construct,
        config=ConstructConfig,
    ),
    Command(
        "reproduce",
        "pretrain a preset, then analyse it (re-run the same command to resume)",
        partial(training_flags, name="reproduce"),
        model.reproduce,
    ),
    Command(
        "analyze",
        "every metric and figure for a checkpoint or run folder",
        flags.analyze_flags,
        model.analyze,
        check=_reads_model,
    ),
    Command(
        "evaluate",
        "a checkpoint and theta* on another MRP source (out of distribution)",
        flags.evaluate_flags,
        model.evaluate,
        check=_reads_model,
        config=EvaluateConfig,
    ),
    Command(
        "study",
        "a grid of conditions x seeds on Ray, with aggregate figures and study.md",
        flags.study_flags,
        study.study,
        check=_study_spec,
    ),
    Command(
        "study-report",
        "redraw a study's figures and study.md from its CSVs",
        lambda p: p.add_argument("path", help="a study folder"),
        study.study_report,
    ),
    Command(
        "claims",
        "every claim of the paper re-derived with intervals and verdicts (claims.md)",
        flags.claims_flags,
        reports.claims,
    ),
    Command(
        "methods-benchmark",
        "score interpretability methods against circuits planted exactly (report.md, figures/)",
        flags.benchmark_flags,
        reports.methods_benchmark,
        check=_split_key,
    ),
]
