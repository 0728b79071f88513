"""Progress bars that suit where they are shown: a widget in Jupyter (when ipywidgets is there), a
live bar on a terminal, and a few lines in a log file (one update every 30 s, not one per step)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Any, Optional

from tqdm import tqdm
from tqdm.std import tqdm as std_tqdm

LOG_INTERVAL_S = 30.0


def _in_notebook() -> bool:
    return "ipykernel" in sys.modules and importlib.util.find_spec("ipywidgets") is not None


def progress_bar(total: int, *, initial: int = 0, disable: bool = False, desc: str = "") -> std_tqdm:
    if _in_notebook():
        from tqdm.notebook import tqdm as notebook_tqdm

        return notebook_tqdm(total=total, initial=initial, disable=disable, desc=desc)
    on_terminal = sys.stderr.isatty()
    return tqdm(
        total=total,
        initial=initial,
        disable=disable,
        desc=desc,
        dynamic_ncols=on_terminal,
        mininterval=0.1 if on_terminal else LOG_INTERVAL_S,
    )


def computed(
    sections: dict[str, Callable[[], Any]], *, desc: str, into: Optional[dict[str, Any]] = None, disable: bool = False
) -> dict[str, Any]:
    """Each section's value, computed in the order given under one progress bar that names the section
    being computed (``analyze``, ``evaluate`` and ``construct``: a minute of work that would show nothing).
    ``into``: the dict filled as sections finish, so a later section can read an earlier one's value."""
    out: dict[str, Any] = {} if into is None else into
    with progress_bar(len(sections), desc=desc, disable=disable) as bar:
        for name, make in sections.items():
            bar.set_postfix_str(name, refresh=True)
            out[name] = make()
            bar.update()
    return out
