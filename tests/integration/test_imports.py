"""The import graph: layers, no circles (function-level imports included), the core free of ``analyses`` and
``hooks`` except its CLI, and a CLI parser that needs no torch."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
PACKAGES = ("ictd_interp", "hooks", "analyses")
# Layers, lowest first: a module may import only its own layer and those before it. The CLI composes
# everything (inside its command functions); ``ictd_interp/__init__`` and ``_lazy`` export lazily.
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


def test_importing_the_package_and_the_model_loads_neither_analyses_nor_hooks():
    code = (
        "import sys, ictd_interp; ictd_interp.HookedICTDTransformer; ictd_interp.train; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('analyses', 'hooks')]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_cli_parser_and_the_models_list_import_no_torch():
    code = "import sys, ictd_interp.cli as c; c.build_parser(); assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
    code = (
        "import sys, ictd_interp.cli as c; assert c.main(['models']) == 0; "
        "assert 'torch' not in sys.modules, 'models imported torch'"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "depth3-td-s0" in out and "eval MSVE 0.631" in out
