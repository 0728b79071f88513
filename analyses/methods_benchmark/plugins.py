"""Outside methods as plugin files: ``load_plugin`` imports one (it registers its methods with
``register_method``), under a name taken from its contents, so an edited file is imported anew; ``plugin_hash``
is what a request records of it."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import Union


def load_plugin(path: Union[str, Path]) -> None:
    """Import a plugin file (it registers its methods with ``register_method``); a file imported once is not
    imported again."""
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such plugin file")
    name = f"ictd_benchmark_plugin_{plugin_hash(path)[:16]}"  # by content: an edited file is imported anew
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise ValueError(f"{path}: the plugin failed to import ({type(err).__name__}: {err})") from None
    by_value(module)


def by_value(module) -> None:
    """Ray pickles the plugin's functions and classes (an output's encoder, say) whole, not by a module name the
    scorer's process never imports."""
    try:
        from ray import cloudpickle
    except ImportError:  # no Ray: nothing is sent between processes
        return
    cloudpickle.register_pickle_by_value(module)


def plugin_hash(path: Union[str, Path]) -> str:
    """The SHA-256 of a plugin file's contents: a request records it, so results are never reused for an edited
    plugin."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
