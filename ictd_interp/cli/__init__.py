"""The ``ictd-interp`` command: the core's own sub-commands (``train``, ``models``, ``import-incontexttd``) and those a
layer above registers (``command``: the analyses' ``analyze``, ``study``, ``claims``, ... through an entry point), so
the command composes every layer while the core imports none above it.

``build_parser`` declares every sub-command and its flags (generated from config dataclasses by ``args``; shared
flags in ``flags``), torch-free so ``--help`` answers at once; each sub-command runs one function that imports the
heavy layers inside it (the core's own are in ``commands``: ``training`` and ``io``). ``main`` refuses what
``prechecks`` and the command's own check can see wrong before torch loads, sets the thread count (``threads``), and
turns a bad request into one line naming what is wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import sys
import warnings
from collections.abc import Sequence
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import Optional

from ictd_interp.cli import commands
from ictd_interp.cli.args import positive_int
from ictd_interp.cli.command import GROUP, Command, registered
from ictd_interp.cli.flags import THREADS_HELP, import_flags, models_flags, training_flags
from ictd_interp.cli.prechecks import check_request
from ictd_interp.cli.threads import SETS_OWN_THREADS, set_threads
from ictd_interp.config.train import flat_fields

DESCRIPTION = """Softmax transformers that run TD learning in context: pretrain, analyse and probe them.

Start with `ictd-interp reproduce --preset quick --out runs/quick` (train, then analyse: summary.md and
figures in runs/quick/analysis). The theory behind every number: docs/theory.md."""

CORE = [
    Command(
        "train", "pretrain an ICTD transformer into a run folder", partial(training_flags, name="train"), commands.train
    ),
    Command("models", "the pretrained models shipped with the package, as a table", models_flags, commands.models),
    Command(
        "import-incontexttd",
        "checkpoints of a model trained with the predecessor's InContextTD code",
        import_flags,
        commands.import_incontexttd,
        check=lambda args: [Path(args.path)],
    ),
]


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


def all_commands() -> list[Command]:
    """The core's commands, then the registered ones; a name registered twice is refused."""
    found = CORE + registered()
    names = [c.name for c in found]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"ictd-interp: the commands {twice} are registered twice (entry points {GROUP})")
    return found


def build_parser(available: Optional[list[Command]] = None) -> argparse.ArgumentParser:
    parser = Parser(prog="ictd-interp", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for command in all_commands() if available is None else available:
        p = sub.add_parser(command.name, help=command.help, description=command.help)
        command.flags(p)
        if not any("--threads" in action.option_strings for action in p._actions):  # one torch thread by default
            p.add_argument("--threads", type=positive_int, default=None, help=THREADS_HELP)
    return parser


def _as_flag(message: str, command: Command) -> str:
    """A config's ``field: ...`` message names the command-line flag the user typed."""
    head, sep, rest = message.partition(": ")
    known = set(flat_fields())
    if command.config is not None:  # its fields, and the flat names of its nested ones (``EvaluateConfig.flat``)
        known |= {f.name for f in fields(command.config)} | set(getattr(command.config(), "flat", dict)())
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
    asked = next((a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("-")), None)
    if asked is not None and asked not in sub.choices and not registered():
        parser.exit(
            2,
            f"ictd-interp: error: {asked!r} is no command of this install, whose entry points register none beyond "
            f"the core's ({', '.join(sub.choices)}); reinstall the package (pip install -e .)\n",
        )
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
    available = all_commands()
    args = parse(build_parser(available), argv)
    command = next(c for c in available if c.name == args.command)
    try:
        with one_line_warnings(args.command):
            check_request(args, command)  # before torch loads: a wrong name or path answers at once
            if args.command not in SETS_OWN_THREADS:
                set_threads(args.threads)
            return command.run(args)
    except KeyboardInterrupt:
        print(
            f"ictd-interp {args.command}: interrupted (Ctrl-C); nothing it had finished was lost, re-run the same "
            "command to do the rest",
            file=sys.stderr,
        )
        return 130
    except (ValueError, ImportError, FileNotFoundError, FileExistsError) as err:
        print(f"ictd-interp {args.command}: error: {_as_flag(str(err), command)}", file=sys.stderr)
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
