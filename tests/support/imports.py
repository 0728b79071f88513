"""Shared by tests/*/test_imports.py."""

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]

PACKAGES = ("ictd_interp", "hooks", "analyses")

LAYERS = [
    "ictd_interp._lazy",
    "ictd_interp.config",
    "ictd_interp.io",
    "ictd_interp.tasks",
    "ictd_interp.models",
    "ictd_interp.reference",
    "ictd_interp.training",
    "hooks",
    "analyses.metrics",
    "analyses.figures",
    "analyses.summary",
    "analyses.reports",
    "analyses.analyze",
    "analyses.studies",
    "analyses.claims",
    "analyses.methods_benchmark",
    "ictd_interp.cli",
]


def module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def imports(path: Path, modules: set[str]) -> set[str]:
    """Every module of ours ``path`` imports, at module level or inside a function: ``from a.b import c``
    counts ``a.b.c`` when it is a module, else ``a.b``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names
            }
    return {m for m in found if m.split(".")[0] in PACKAGES}


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    paths = {module_name(p, root): p for package in PACKAGES for p in (root / package).rglob("*.py")}
    return {name: imports(path, set(paths)) - {name} for name, path in paths.items()}


def layer(module: str) -> int:
    matches = [i for i, prefix in enumerate(LAYERS) if module == prefix or module.startswith(prefix + ".")]
    return matches[-1] if matches else -1  # -1: a package root (ictd_interp, analyses), lazy exports only
