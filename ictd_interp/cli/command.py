"""A sub-command as data, and the sub-commands other layers register. The core declares its own commands; a layer
above it (``ictd_interp.analyses``) lists its commands under the entry-point group "ictd_interp.commands" in
pyproject.toml, so the command line composes every layer while nothing in the core imports one above it."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Optional

GROUP = "ictd_interp.commands"  # the entry-point group: each entry is a list of ``Command``


@dataclass(frozen=True)
class Command:
    """One ``ictd-interp`` sub-command.

    Args:
        name: what the user types (``analyze``).
        help: one line for ``ictd-interp --help``.
        flags: adds the command's arguments to its parser; torch-free, so ``--help`` answers at once.
        run: ``(args) -> exit status``; imports the heavy layers inside.
        check: refuses, before torch loads, what it can see wrong in ``args`` (a ``ValueError`` naming it), and
            returns the files the request reads, which ``--out`` may never be.
        config: the dataclass whose fields are flags, so a config's ``field: ...`` error names the flag typed.
    """

    name: str
    help: str
    flags: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    check: Optional[Callable[[argparse.Namespace], Sequence[Path]]] = None
    config: Optional[type] = None


def registered() -> list[Command]:
    """The commands registered under ``GROUP``, entry by entry in name order, each entry's in its own order."""
    found = []
    for entry in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        commands = entry.load()
        if not all(isinstance(c, Command) for c in commands):
            raise TypeError(f"{entry.value}: an {GROUP} entry point must be a list of Command")
        found += commands
    return found
