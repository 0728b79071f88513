"""The import graph: the core never imports ``analyses`` or ``hooks`` (except its CLI, inside commands)."""

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).parent.parent / "ictd_interp"


def test_core_modules_never_import_analyses_or_hooks():
    for path in CORE.glob("*.py"):
        tree = ast.parse(path.read_text())
        top_level = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = [a.name for n in top_level if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in top_level if isinstance(n, ast.ImportFrom)]
        assert not [m for m in names if m.split(".")[0] in ("analyses", "hooks")], path
        if path.name != "cli.py":  # the CLI composes them, inside its commands only
            nested = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
            assert not [m for m in nested if m.split(".")[0] in ("analyses", "hooks")], path


def test_importing_the_package_and_the_model_loads_neither_analyses_nor_hooks():
    code = ("import sys, ictd_interp; ictd_interp.HookedICTDTransformer; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('analyses', 'hooks')]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_cli_parser_imports_no_torch():
    code = "import sys, ictd_interp.cli as c; c._parser(); assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def _module_imports(root: Path) -> dict[str, set[str]]:
    """Module-level imports between our own modules (``ictd_interp``, ``analyses``, ``hooks``)."""
    graph = {}
    for package in ("ictd_interp", "analyses", "hooks"):
        for path in (root / package).glob("*.py"):
            name = f"{package}.{path.stem}".removesuffix(".__init__")
            deps = set()
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ImportFrom) and node.module:
                    deps.add(node.module)
                    deps |= {f"{node.module}.{a.name}" for a in node.names}
                elif isinstance(node, ast.Import):
                    deps |= {a.name for a in node.names}
            graph[name] = deps
    return {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}


def test_module_imports_have_no_cycle():
    graph = _module_imports(CORE.parent)
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                raise AssertionError(" -> ".join(path + [module, dep]))
            if dep not in state:
                visit(dep, path + [module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert "ictd_interp.train" in graph and graph["ictd_interp.train"]  # the graph was read


def test_analyses_and_hooks_are_type_checked_at_runtime():
    """tests/conftest.py installs jaxtyping's checks on ``analyses`` and ``hooks`` (the core's come from
    pyproject's --jaxtyping-packages): a wrong shape or dtype fails at the call, naming the parameter."""
    import pytest
    import torch
    from jaxtyping import TypeCheckError

    from analyses.diagonality import self_attention_mass
    from hooks.attention import tabular_pattern

    with pytest.raises(TypeCheckError, match="pattern"):
        self_attention_mass(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long))  # pattern needs [batch, q, k]
    with pytest.raises(TypeCheckError, match="states"):
        tabular_pattern(torch.zeros(2, 3))  # states must be integers
