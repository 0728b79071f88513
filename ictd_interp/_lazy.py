"""Package exports imported on first use (PEP 562), the one mechanism every package ``__init__`` uses.

A package lists ``name -> submodule``; ``from package import name`` then imports only that submodule,
so ``ictd-interp --help`` and config validation never pay for torch or TransformerLens.
"""

from collections.abc import Callable
from importlib import import_module
from typing import Any, no_type_check


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a public name to its submodule
    (relative to the package)."""

    @no_type_check  # module hooks: never wrapped by the tests' runtime type checker
    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{exports[name]}"), name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
