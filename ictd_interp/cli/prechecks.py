"""Refusals before torch: what a request gets wrong that needs no model to see, checked as soon as the command
line is parsed, so a mistyped name or path is one line in a fraction of a second rather than after torch and
TransformerLens load (18-38 s on a busy machine). Each check uses the same function and wording as the command's
own later check; a request that passes goes on to that check unchanged."""

from __future__ import annotations

import argparse
from pathlib import Path

from ictd_interp.config.tasks import check_family
from ictd_interp.io.pretrained import model_argument, names, unknown_model
from ictd_interp.io.staging import refuse_unusable


def check_request(args: argparse.Namespace) -> None:
    """A ``ValueError`` (or ``FileNotFoundError``) naming the first thing wrong with ``args``, else nothing."""
    if getattr(args, "path", None) is not None and args.command in ("analyze", "evaluate"):
        check_model(args.path)
    if args.command == "evaluate" and args.env is not None:
        check_env(args.env)
    if args.command == "study":
        from analyses.studies.spec import spec_file  # torch-free: the specs are TOML files

        spec_file(args.spec)
    if args.command == "methods-benchmark":
        from analyses.methods_benchmark.sealed import Split  # torch-free: reads the key file

        Split.read(args.split, args.key_file)
    out = getattr(args, "out", None)
    if out is not None:
        path = getattr(args, "path", None)
        inputs = [model_argument(path)] if path is not None and args.command in ("analyze", "evaluate") else []
        refuse_unusable(Path(out), inputs + ([Path(path)] if args.command == "import-incontexttd" else []))


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
