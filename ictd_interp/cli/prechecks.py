"""Refusals before torch: what a request gets wrong that needs no model to see, checked as soon as the command
line is parsed, so a mistyped name or path is one line in a fraction of a second rather than after torch and
TransformerLens load (18-38 s on a busy machine). Each check uses the same function and wording as the command's
own later check; a request that passes goes on to that check unchanged."""

from __future__ import annotations

import argparse
from pathlib import Path

from ictd_interp.cli.command import Command
from ictd_interp.config.tasks import check_family
from ictd_interp.io.pretrained import names, unknown_model
from ictd_interp.io.staging import refuse_unusable


def check_request(args: argparse.Namespace, command: Command) -> None:
    """A ``ValueError`` (or ``FileNotFoundError``) naming the first thing wrong with ``args``, else nothing: the
    command's own check, then ``--out`` (never a folder it cannot use, never one of the files the request reads)."""
    inputs = list(command.check(args)) if command.check is not None else []
    if getattr(args, "out", None) is not None:
        refuse_unusable(Path(args.out), inputs)


def check_model(path: str) -> None:
    """A model argument must be an existing file or folder, or a shipped model's name (with the closest names)."""
    if not Path(path).exists() and path not in names():
        raise FileNotFoundError(unknown_model(path))


def check_env(env: str) -> None:
    """``--env`` must name a registered family or a ``gym:`` environment."""
    try:
        check_family(env)
    except ValueError as err:
        raise ValueError(f"env: {str(err).partition(': ')[2]}") from None
