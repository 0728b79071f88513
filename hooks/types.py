"""What every hook builder shares: the ``(hook_name, fn)`` pairs type (hook names from the core's
``ictd_interp.models.hook_names``)."""

from collections.abc import Callable

Hooks = list[tuple[str, Callable]]

__all__ = ["Hooks"]
