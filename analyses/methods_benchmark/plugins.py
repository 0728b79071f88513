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


LIST = """
import json, sys
dumps, write = json.dumps, sys.__stdout__.write  # taken before any plugin runs
from ictd_interp.analyses.methods_benchmark.methods import METHODS
from ictd_interp.analyses.methods_benchmark.plugins import load_plugin
before = set(METHODS)
try:
    for path in sys.argv[1:]:
        load_plugin(path)
except (ValueError, FileNotFoundError) as err:
    write(dumps({"error": str(err)}) + "\\n")
    sys.exit(0)
files = {n: getattr(getattr(m.run, "__code__", None), "co_filename", "") for n, m in METHODS.items() if n not in before}
write(dumps({"methods": files}) + "\\n")
"""


def plugin_methods(plugins: list[str]) -> dict[str, str]:
    """The methods each plugin registers (name -> its file), listed in a process of their own: the driver never
    imports a plugin, so nothing a plugin runs at import reaches what writes or scores the results."""
    import json
    import subprocess

    if not plugins:
        return {}
    done = subprocess.run([sys.executable, "-c", LIST, *plugins], capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValueError(f"{', '.join(plugins)}: the plugins could not be listed ({last})")
    answer = json.loads(lines[-1])
    if "error" in answer or not isinstance(answer.get("methods"), dict):
        raise ValueError(answer.get("error") or f"{', '.join(plugins)}: the plugins' listing is not what it should be")
    return answer["methods"]
