"""Where the toolkit's packages come from. It installs three top-level import names beside each other
(``ictd_interp``, ``hooks``, ``analyses``: the design keeps their folders), so a user's own ``hooks.py`` or
``analyses.py`` in the working directory could be imported in their place; ``shadowing`` names it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[2]  # the folder holding ictd_interp, analyses and hooks


def shadowing(names: tuple[str, ...] = ("analyses", "hooks")) -> Optional[str]:
    """What shadows the toolkit's ``analyses`` or ``hooks`` package, in one line; None when both are its own."""
    for name in names:
        spec = importlib.util.find_spec(name)
        origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
        if origin is None or ROOT not in origin.parents:
            return (
                f"{origin or name}: a module named {name!r} shadows ictd-interp's own {name} package "
                f"({ROOT / name}); rename it, or run from another folder"
            )
    return None
