"""The ``ictd-interp`` command: the one place that composes the core with ``analyses`` and ``hooks``.

``build_parser`` declares every sub-command and its flags (generated from config dataclasses by
``args``; ``configs`` holds ``construct``'s and ``evaluate``'s settings), torch-free so ``--help`` answers at once;
each sub-command is one function of ``commands`` (``study`` in its own module), which imports the heavy layers
inside it. ``main`` refuses what ``prechecks`` can see wrong before torch loads, sets the thread count
(``threads``), and turns a bad request into one line naming what is wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import sys
import warnings
from collections.abc import Sequence
from dataclasses import fields
from importlib import resources
from typing import Optional

from ictd_interp.cli import commands, study
from ictd_interp.cli.args import add_config_args, add_train_args, positive_int
from ictd_interp.cli.configs import ConstructConfig, EvaluateConfig
from ictd_interp.cli.prechecks import check_request
from ictd_interp.cli.threads import SETS_OWN_THREADS, set_threads
from ictd_interp.config.train import MODEL_CONFIGS, PRESETS, TrainConfig, flat_fields

DESCRIPTION = """Softmax transformers that run TD learning in context: pretrain, analyse and probe them.

Start with `ictd-interp reproduce --preset quick --out runs/quick` (train, then analyse: summary.md and
figures in runs/quick/analysis). The theory behind every number: docs/theory.md."""


class Parser(argparse.ArgumentParser):
    """An error is one line naming what is wrong and where help is, never the whole usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def unknown_flags(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """What was not understood, with the closest of the command's own flags for each mistyped one."""
    flags = [o for action in parser._actions for o in action.option_strings]
    parts = []
    for arg in extra:
        close = difflib.get_close_matches(arg.split("=")[0], flags, n=2) if arg.startswith("-") else []
        parts.append(arg + (f" (did you mean {' or '.join(close)}?)" if close else ""))
    return "unrecognized arguments: " + ", ".join(parts)


def builtin_studies() -> list[str]:
    """The studies shipped as ``analyses/studies/*.toml`` (read as files: no torch import)."""
    return sorted(
        p.name.removesuffix(".toml") for p in resources.files("analyses.studies").iterdir() if p.name.endswith(".toml")
    )


def preset_help() -> str:
    """Each preset with what it changes from its architecture's defaults (nested settings by their path)."""
    parts = []
    for name, preset in PRESETS.items():
        base = TrainConfig(model=MODEL_CONFIGS[preset.architecture](d_features=preset.model.d_features))
        parts.append(f"{name} ({preset.architecture}: {', '.join(base.differences(preset)) or 'the defaults'})")
    return "training preset; every flag below overrides it: " + "; ".join(parts)


THREADS_HELP = (
    "torch CPU threads of this process (default: 1; two are somewhat faster on an idle machine and "
    "several times slower on a busy one, which gets a warning: docs/performance.md, benchmarks/threads.py)"
)


def _path_and_out(p: argparse.ArgumentParser, out_help: str) -> None:
    p.add_argument("path", help="a run folder, a checkpoint folder or a pretrained model's name (see models)")
    p.add_argument("--out", required=True, help=out_help)
    p.add_argument("--force", action="store_true", help="replace a folder that holds another request's results")


def _training(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument(
        "--preset",
        default=None,
        choices=sorted(PRESETS),
        help=preset_help()
        + " (default: the architecture's own quick preset: "
        + ", ".join(f"{cls.quick_preset} for {a}" for a, cls in MODEL_CONFIGS.items() if cls.quick_preset)
        + "; quick otherwise)",
    )
    out_help = "run folder" if name == "train" else "folder for run/ (training) and analysis/ (report)"
    p.add_argument("--out", required=name == "reproduce", help=out_help)
    if name == "train":
        p.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint")
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help=THREADS_HELP.replace(
            "(default: 1;",
            "(default: 1, or the count a resumed run was trained with; a bit-exact resume needs the same count;",
        ),
    )
    _allocator_flag(p)
    add_train_args(p)


def _allocator_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--keep-freed-memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="set glibc's allocator so each CPU step reuses warm pages (this command's processes only; "
        "faster, numbers unchanged; ictd_interp.training.allocator)",
    )


def _ray_and_force(p: argparse.ArgumentParser) -> None:
    """``--workers N | --address HOST:PORT`` and ``--force``, as the report commands on Ray take them."""
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=positive_int, default=None, help="cells at once on a local Ray instance")
    where.add_argument(
        "--address", default=None, help="join this Ray cluster (HOST:PORT); --out must be shared storage"
    )
    p.add_argument("--force", action="store_true", help="replace a folder that holds another request's results")


def _study_flags(p: argparse.ArgumentParser) -> None:
    """``study``: a spec, its folder, and where it runs."""
    from analyses.studies.spec import spec_size  # torch-free: reads each spec file

    folder = resources.files("analyses.studies")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = "built-in studies:\n" + "\n".join(
        f"  {name}: {spec_size(folder / f'{name}.toml')}" for name in builtin_studies()
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
    _allocator_flag(p)


def _import_flags(p: argparse.ArgumentParser) -> None:
    """``import-incontexttd``: the predecessor's log and what it does not record."""
    p.add_argument("path", help="its log folder (data.npz, params.json), its data.npz, or a torch.save'd state dict")
    p.add_argument("--out", required=True, help="checkpoint folder (with --all-steps: one sub-folder per logged step)")
    p.add_argument("--all-steps", action="store_true", help="one checkpoint per logged step, not only the last")
    p.add_argument(
        "--n-layers", type=positive_int, default=None, help="depth of a tied ('auto') model without params.json"
    )
    p.add_argument(
        "--gamma", type=float, default=None, help="discount of its prompts (default: params.json's, else 0.9)"
    )
    p.add_argument("--activation", default=None, help="identity or relu (default: params.json's, else identity)")
    p.add_argument("--force", action="store_true", help="replace a folder that holds another request's results")


def _claims_flags(p: argparse.ArgumentParser) -> None:
    """``claims``: the report folder, its budget, and where it runs."""
    p.add_argument("--out", required=True, help="report folder (re-running the same command resumes it)")
    from analyses.claims.budget import BUDGETS  # after the check that ``analyses`` is the toolkit's own (main)

    p.add_argument(
        "--budget",
        default="quick",
        choices=sorted(BUDGETS),
        help="quick: <= 15 min on 2 cores; full: more seeds, longer contexts, the standard model trained",
    )
    _ray_and_force(p)


def _benchmark_flags(p: argparse.ArgumentParser) -> None:
    """``methods-benchmark``: the report folder, its budget and which methods, cases, seeds and plug-ins."""
    p.add_argument("--out", required=True, help="report folder (re-running the same command resumes it)")
    p.add_argument(
        "--budget",
        default="quick",
        choices=["quick", "full"],
        help="quick: 5 seeds per case, 32 tasks (about 14 min on one core); full: 20 seeds, 64 tasks",
    )
    p.add_argument("--methods", default=None, help="comma-separated method names (default: every registered one)")
    p.add_argument("--cases", default=None, help="comma-separated case names (default: every case)")
    p.add_argument("--seeds", type=positive_int, default=None, help="seeds per case (default: the budget's)")
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
    _ray_and_force(p)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ictd-interp", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    p = sub.add_parser("construct", help="theta*: error versus depth on Boyan chains, with the margin C")
    add_config_args(p, ConstructConfig, "construction")
    for name, text in (
        ("train", "pretrain an ICTD transformer into a run folder"),
        ("reproduce", "pretrain a preset, then analyse it (re-run the same command to resume)"),
    ):
        _training(sub.add_parser(name, help=text, description=text), name)
    listing = sub.add_parser("models", help="the pretrained models shipped with the package, as a table")
    shape = listing.add_mutually_exclusive_group()
    shape.add_argument("--long", action="store_true", help="every card's description, command and verdict ladder")
    shape.add_argument("--json", action="store_true", help="the listing as JSON")
    p = sub.add_parser("analyze", help="every metric and figure for a checkpoint or run folder")
    _path_and_out(p, "folder for summary.json, summary.md and figures/")
    p.add_argument(
        "--stamp",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the run's name in each figure's corner (--no-stamp for a figure going into a paper)",
    )
    p = sub.add_parser("evaluate", help="a checkpoint and theta* on another MRP source (out of distribution)")
    _path_and_out(p, "folder for evaluation.json, evaluation.md and figures")
    add_config_args(p, EvaluateConfig, "evaluation")
    p = sub.add_parser("study", help="a grid of conditions x seeds on Ray, with aggregate figures and study.md")
    _study_flags(p)
    p = sub.add_parser(
        "import-incontexttd", help="checkpoints of a model trained with the predecessor's InContextTD code"
    )
    _import_flags(p)
    p = sub.add_parser("study-report", help="redraw a study's figures and study.md from its CSVs")
    p.add_argument("path", help="a study folder")
    p = sub.add_parser("claims", help="every claim of the paper re-derived with intervals and verdicts (claims.md)")
    _claims_flags(p)
    p = sub.add_parser(
        "methods-benchmark",
        help="score interpretability methods against circuits planted exactly (report.md, figures/)",
    )
    _benchmark_flags(p)
    for command in sub.choices.values():  # one torch thread by default in every command
        if not any("--threads" in action.option_strings for action in command._actions):
            command.add_argument("--threads", type=positive_int, default=None, help=THREADS_HELP)
    return parser


COMMANDS = {
    "construct": commands.construct,
    "train": commands.train,
    "reproduce": commands.reproduce,
    "models": commands.models,
    "analyze": commands.analyze,
    "evaluate": commands.evaluate,
    "study": study.study,
    "study-report": commands.study_report,
    "claims": commands.claims,
    "import-incontexttd": commands.import_incontexttd,
    "methods-benchmark": commands.methods_benchmark,
}


def _as_flag(message: str) -> str:
    """A config's ``field: ...`` message names the command-line flag the user typed."""
    head, sep, rest = message.partition(": ")
    known = set(flat_fields()) | {f.name for cls in (ConstructConfig, EvaluateConfig) for f in fields(cls)}
    known |= set(EvaluateConfig().flat())
    return f"--{head.replace('_', '-')}: {rest}" if sep and head in known else message


@contextlib.contextmanager
def one_line_warnings(command: str):
    """While a command runs, warnings print as ``ictd-interp COMMAND: warning: ...``, without Python's
    source line (restored after, so a caller's own process keeps its format)."""
    saved = warnings.formatwarning
    warnings.formatwarning = lambda message, *_args, **_kw: f"ictd-interp {command}: warning: {message}\n"
    try:
        yield
    finally:
        warnings.formatwarning = saved


def parse(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """The command line, a mistyped flag named first: flags the command does not know are reported before a
    required flag's absence (``--otu DIR`` is a typo of ``--out``, not a missing ``--out``)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    required = [a for command in sub.choices.values() for a in command._actions if a.required and a.option_strings]
    for action in required:
        action.required = False
    try:
        args, extra = parser.parse_known_args(argv)
    finally:
        for action in required:
            action.required = True
    if extra:
        command = sub.choices[args.command]
        command.error(unknown_flags(command, extra))
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    from ictd_interp.io.install import shadowing

    if (problem := shadowing()) is not None:
        print(f"ictd-interp: error: {problem}", file=sys.stderr)
        return 2
    args = parse(build_parser(), argv)
    try:
        with one_line_warnings(args.command):
            check_request(args)  # before torch loads: a wrong name or path answers at once
            if args.command not in SETS_OWN_THREADS:
                set_threads(args.threads)
            return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print(
            f"ictd-interp {args.command}: interrupted (Ctrl-C); nothing it had finished was lost, re-run the same "
            "command to do the rest",
            file=sys.stderr,
        )
        return 130
    except (ValueError, ImportError, FileNotFoundError, FileExistsError) as err:
        print(f"ictd-interp {args.command}: error: {_as_flag(str(err))}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as err:  # torch's allocator failing: the request is too large, not a bug
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if not isinstance(err, MemoryError) and "allocate" not in text and "out of memory" not in text:
            raise
        print(
            f"ictd-interp {args.command}: error: out of memory ({text[:200]}); the request is too large for this "
            "machine (its context length, number of tasks, windows or states)",
            file=sys.stderr,
        )
        return 2
    except OSError as err:  # a path that is a file, a folder, unwritable, ...: the path and the reason, no trace
        where = f"{err.filename}: " if err.filename else ""
        print(f"ictd-interp {args.command}: error: {where}{err.strerror or err}", file=sys.stderr)
        return 2
