"""Command-line flags generated from config dataclasses: a new field is a new flag, no new code."""

from __future__ import annotations

import argparse
import re
from dataclasses import MISSING, fields, replace
from typing import Any


def field_help(cls: type) -> dict[str, str]:
    """Per-field help read from the ``Args:`` section of the class docstring."""
    helps: dict[str, str] = {}
    for match in re.finditer(r"^\s{8}([\w, ]+): (.+?)(?=^\s{8}[\w, ]+: |\Z)", cls.__doc__ or "", re.S | re.M):
        for name in match.group(1).split(","):
            helps[name.strip()] = " ".join(match.group(2).replace("``", "").split())
    return helps


def add_config_args(parser: argparse.ArgumentParser, cls: type, title: str, from_preset: bool = False) -> None:
    """One ``--flag`` per dataclass field; flags default to None so only what the user set overrides.
    ``from_preset``: the default shown is the preset's, not the dataclass's."""
    helps = field_help(cls)
    group = parser.add_argument_group(title)
    for f in fields(cls):
        default = f.default
        flag = "--" + f.name.replace("_", "-")
        shown = "the preset's" if from_preset else repr(default) if isinstance(default, str) else default
        text = f"{helps.get(f.name, '')} (default: {shown})".strip()
        if isinstance(default, bool):
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            kind = type(default) if default is not MISSING and default is not None else str
            group.add_argument(flag, dest=f.name, type=kind, default=None, help=text)


def config_from_args(base: Any, args: argparse.Namespace) -> Any:
    """``base`` with every flag the user gave applied (validated by the dataclass)."""
    overrides = {f.name: getattr(args, f.name) for f in fields(base) if getattr(args, f.name, None) is not None}
    return replace(base, **overrides)
