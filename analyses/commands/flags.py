"""The analyses' commands' flags, torch-free so ``ictd-interp --help`` answers at once."""

from __future__ import annotations

import argparse

from ictd_interp.analyses.commands.configs import ConstructConfig, EvaluateConfig
from ictd_interp.cli.args import add_config_args, positive_int
from ictd_interp.cli.flags import allocator_flag


def construct_flags(p: argparse.ArgumentParser) -> None:
    add_config_args(p, ConstructConfig, "construction")


def analyze_flags(p: argparse.ArgumentParser) -> None:
    _path_and_out(p, "folder for summary.json, summary.md and figures/")
    p.add_argument(
        "--stamp",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the run's name in each figure's corner (--no-stamp for a figure going into a paper)",
    )


def evaluate_flags(p: argparse.ArgumentParser) -> None:
    _path_and_out(p, "folder for evaluation.json, evaluation.md and figures")
    add_config_args(p, EvaluateConfig, "evaluation")


def _path_and_out(p: argparse.ArgumentParser, out_help: str) -> None:
    p.add_argument("path", help="a run folder, a checkpoint folder or a pretrained model's name (see models)")
    p.add_argument("--out", required=True, help=out_help)
    p.add_argument("--force", action="store_true", help="replace a folder that holds another request's results")


def _ray_and_force(p: argparse.ArgumentParser) -> None:
    """``--workers N | --address HOST:PORT`` and ``--force``, as the report commands on Ray take them."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=positive_int, default=None, help="cells at once on a local Ray instance")
    where.add_argument(
        "--address", default=None, help="join this Ray cluster (HOST:PORT); --out must be shared storage"
    )
    p.add_argument("--force", action="store_true", help="replace a folder that holds another request's results")


def study_flags(p: argparse.ArgumentParser) -> None:
    """``study``: a spec, its folder, and where it runs."""
    from ictd_interp.analyses.studies.spec import builtin_studies, spec_size  # torch-free: reads each spec file

    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = "built-in studies:\n" + "\n".join(
        f"  {name}: {spec_size(path)}" for name, path in sorted(builtin_studies().items())
    )
    p.add_argument("spec", help="a study spec (.toml) or a built-in study (listed below)")
    p.add_argument("--out", default=None, help="study folder (re-running the same command resumes it); required to run")
    p.add_argument(
        "--dry-run", action="store_true", help="list the study's cells, seeds and measured time; run nothing"
    )
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default=None,
        help="train every cell here (default: the spec's); on cuda each GPU trains one unit of cells at a time, "
        "as many models stacked as its memory takes, and the analyses run in CPU tasks beside it",
    )
    p.add_argument(
        "--sampler",
        choices=("host", "device"),
        default=None,
        help="where every cell's batches are drawn (default: the spec's): device draws a stack's batches in one call "
        "where its models are (the choice for GPUs; other numbers than host's); Boyan chains only",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--workers", type=positive_int, default=None, help="cells at once on a local Ray instance (default: all cores)"
    )
    where.add_argument(
        "--address",
        default=None,
        help="join this Ray cluster (HOST:PORT) instead; --out must be storage every node sees",
    )
    where.add_argument(
        "--plan",
        type=positive_int,
        default=None,
        metavar="N",
        help="split the cells into at least N units for a cluster scheduler (DIR/units.json) and run nothing",
    )
    where.add_argument(
        "--unit",
        type=int,
        default=None,
        metavar="K",
        help="run unit K of DIR/units.json in this process, without Ray (one job of a SLURM array: "
        "K = $SLURM_ARRAY_TASK_ID); resumable; then the same command without --unit writes the report",
    )
    allocator_flag(p)


def _folder_and_budget(p: argparse.ArgumentParser, budgets: list[str], budget_help: str) -> None:
    """A report command's folder (resumed by the same command) and its budget."""
    p.add_argument("--out", required=True, help="report folder (re-running the same command resumes it)")
    p.add_argument("--budget", default="quick", choices=budgets, help=budget_help)


def claims_flags(p: argparse.ArgumentParser) -> None:
    """``claims``: the report folder, its budget, and where it runs."""
    from ictd_interp.analyses.claims.budget import BUDGETS  # torch-free

    budget_help = "quick: <= 10 min on 2 idle cores; full: more seeds, longer contexts, the standard model trained"
    _folder_and_budget(p, sorted(BUDGETS), budget_help)
    _ray_and_force(p)


def benchmark_flags(p: argparse.ArgumentParser) -> None:
    """``methods-benchmark``: the report folder, its budget and which methods, cases, seeds and plug-ins."""
    budget_help = (
        "quick: 5 seeds per case, 32 tasks (every case: about 75 min on one core with the SAE plugin); "
        "full: 20 seeds, 64 tasks"
    )
    _folder_and_budget(p, ["quick", "full"], budget_help)
    p.add_argument("--methods", default=None, help="comma-separated method names (default: every registered one)")
    p.add_argument("--cases", default=None, help="comma-separated case names (default: every case)")
    p.add_argument(
        "--seeds",
        type=positive_int,
        default=None,
        help="seeds per case (default: the budget's); --track checkpoints: seeds per recipe of the built-in "
        "population (default 6, or 3 on the private split)",
    )
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="FILE",
        help="a Python file that registers methods (register_method); repeatable",
    )
    p.add_argument(
        "--split",
        default="public",
        choices=["public", "private"],
        help="public: cases from seeds 0, 1, ... (development); private: cases from seeds a key decides, "
        "each method given a sealed problem (needs --key-file)",
    )
    p.add_argument("--key-file", default=None, metavar="FILE", help="the private split's key (at least 16 bytes)")
    p.add_argument(
        "--track",
        default="planted",
        choices=["planted", "checkpoints"],
        help="planted: methods against circuits planted exactly; checkpoints: readings as classifiers of trained "
        "checkpoints labelled in function space (runs TD, stopped early, learns nothing; docs/methods_benchmark.md)",
    )
    p.add_argument(
        "--population",
        action="append",
        default=[],
        metavar="STUDY_DIR",
        help="--track checkpoints: finished study folders, run folders of `train` or folders of them, whose runs "
        "form the population (repeatable; default: the built-in study 'checkpoints', trained into OUT/population)",
    )
    p.add_argument(
        "--readings",
        default=None,
        metavar="A,B",
        help="--track checkpoints: score these readings alone (default: every one; das_value costs minutes a "
        "checkpoint at n = 100)",
    )
    _ray_and_force(p)
