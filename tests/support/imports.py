"""Shared by tests/*/test_imports.py."""

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]

# Each top-level folder and the module name it installs as (hooks and analyses through their links in ictd_interp/)
FOLDERS = {"ictd_interp": "ictd_interp", "hooks": "ictd_interp.hooks", "analyses": "ictd_interp.analyses"}

LAYERS = [
    "ictd_interp._lazy",
    "ictd_interp.config",
    "ictd_interp.io",
    "ictd_interp.tasks",
    "ictd_interp.models",
    "ictd_interp.reference",
    "ictd_interp.training",
    "ictd_interp.cli",
    "ictd_interp.hooks",
    "ictd_interp.analyses.metrics",
    "ictd_interp.analyses.figures",
    "ictd_interp.analyses.summary",
    "ictd_interp.analyses.reports",
    "ictd_interp.analyses.analyze",
    "ictd_interp.analyses.cards",
    "ictd_interp.analyses.studies",
    "ictd_interp.analyses.claims",
    "ictd_interp.analyses.methods_benchmark",
    "ictd_interp.analyses.commands",
]


def module_name(path: Path, root: Path = ROOT) -> str:
    folder, *rest = path.relative_to(root).with_suffix("").parts
    return ".".join([FOLDERS[folder], *rest]).removesuffix(".__init__")


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
    return {m for m in found if m.split(".")[0] == "ictd_interp"}


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    paths = {module_name(p, root): p for folder in FOLDERS for p in (root / folder).rglob("*.py")}
    return {name: imports(path, set(paths)) - {name} for name, path in paths.items()}


def layer(module: str) -> int:
    if module == "ictd_interp.analyses":  # its root sits above the core like everything in it
        return LAYERS.index("ictd_interp.analyses.metrics")
    matches = [i for i, prefix in enumerate(LAYERS) if module == prefix or module.startswith(prefix + ".")]
    return matches[-1] if matches else -1  # -1: the package root (ictd_interp), lazy exports only
