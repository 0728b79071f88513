"""The import graph: layers, no circles (function-level imports included), the core (its CLI included) free of
``ictd_interp.analyses`` and ``ictd_interp.hooks``, and a CLI parser that needs no torch."""

import ast

import pytest

from tests.support.imports import FOLDERS, LAYERS, ROOT, graph, layer, module_name

# Layers, lowest first: a module may import only its own layer and those before it. The analyses' commands join the
# core's CLI through an entry point; ``ictd_interp/__init__`` and ``_lazy`` export lazily.


def find_cycle(edges: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> list[str]:
        state[module] = 1
        for dep in sorted(edges.get(module, ())):
            if state.get(dep) == 1:
                return path + [module, dep]
            if dep not in state and (found := visit(dep, path + [module])):
                return found
        state[module] = 2
        return []

    for module in sorted(edges):
        if module not in state and (found := visit(module, [])):
            return found
    return []


def test_no_import_circle_even_through_function_level_imports():
    edges = graph()
    assert len(edges) > 60 and edges["ictd_interp.training.trainer"]  # the graph was read
    assert find_cycle(edges) == []


def test_every_import_goes_down_the_layers():
    edges = graph()
    assert all(layer(m) >= 0 for m in edges if m not in ("ictd_interp", "ictd_interp.analyses")), "a module in no layer"
    wrong = [f"{m} -> {d}" for m, deps in edges.items() for d in deps if layer(m) >= 0 and layer(d) > layer(m)]
    assert wrong == []


def test_modules_import_the_sub_package_they_need_not_a_package_root():
    """``from ictd_interp import X`` inside the package would run the lazy root: modules name their source."""
    edges = graph()
    roots = {"ictd_interp", "ictd_interp.analyses"}
    assert [f"{m} -> {d}" for m, deps in edges.items() for d in deps if d in roots and m not in roots] == []


def test_the_checker_finds_circles_and_layer_breaks(tmp_path):
    """The checks above would fail on a tree with a function-level circle or an upward import."""
    for folder in FOLDERS:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "ictd_interp" / "a.py").write_text("from ictd_interp import b\n")
    (tmp_path / "ictd_interp" / "b.py").write_text("def f():\n    from ictd_interp.a import x\n")
    (tmp_path / "hooks" / "h.py").write_text("def g():\n    import ictd_interp.analyses.metrics\n")
    (tmp_path / "ictd_interp" / "cli.py").write_text("def run():\n    from ictd_interp.analyses import commands\n")
    (tmp_path / "ictd_interp" / "training.py").write_text("from ictd_interp import hooks\n")
    edges = graph(tmp_path)
    assert find_cycle(edges) in (
        ["ictd_interp.a", "ictd_interp.b", "ictd_interp.a"],
        ["ictd_interp.b", "ictd_interp.a", "ictd_interp.b"],
    )
    wrong = {f"{m} -> {d}" for m, deps in edges.items() for d in deps if layer(m) >= 0 and layer(d) > layer(m)}
    assert wrong == {  # the folder read as the package it installs; the core's CLI below everything above it
        "ictd_interp.hooks.h -> ictd_interp.analyses.metrics",
        "ictd_interp.cli -> ictd_interp.analyses",
        "ictd_interp.training -> ictd_interp.hooks",
    }


def imported_layers(folder: str, edges: dict[str, set[str]]) -> set[str]:
    """The layers (``LAYERS``) other than its own that the modules of ``folder`` import."""
    own = LAYERS[layer(folder)] if layer(folder) >= 0 else folder
    used = {dep for src, deps in edges.items() if src == folder or src.startswith(folder + ".") for dep in deps}
    return {
        LAYERS[layer(dep)]
        for dep in used
        if layer(dep) >= 0
        and LAYERS[layer(dep)] != own
        and not LAYERS[layer(dep)].startswith(own + ".")
        and LAYERS[layer(dep)] != "ictd_interp._lazy"
    }


@pytest.mark.parametrize("folder_name", list(FOLDERS))
def test_every_folder_names_each_layer_it_imports(folder_name):
    """A folder's docstring names every other layer its modules import (by its last name: ``config``,
    ``metrics``), so the docstring cannot drift from the code it describes."""
    edges = graph()
    for init in (ROOT / folder_name).rglob("__init__.py"):
        folder = module_name(init)
        if folder in ("ictd_interp", "ictd_interp.analyses"):  # lazy exports
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        missing = sorted(name for name in imported_layers(folder, edges) if name.rsplit(".", 1)[-1] not in doc)
        assert len(doc) > 80 and not missing, f"{init}: its docstring does not name {missing}"


def test_the_docstring_rule_fails_on_a_folder_that_hides_an_import():
    edges = {
        "ictd_interp.analyses.reports.x": {"ictd_interp.analyses.metrics.m", "ictd_interp.models.a"},
        "ictd_interp.analyses.metrics.m": set(),
    }
    assert imported_layers("ictd_interp.analyses.reports", edges) == {
        "ictd_interp.analyses.metrics",
        "ictd_interp.models",
    }


def test_analyses_and_hooks_are_type_checked_at_runtime():
    """pyproject's --jaxtyping-packages=ictd_interp checks the analyses and the interventions too (they install inside
    ``ictd_interp``): a wrong shape or dtype fails at the call, naming the parameter."""
    import torch
    from jaxtyping import TypeCheckError

    from ictd_interp.analyses.metrics.diagonality import self_attention_mass
    from ictd_interp.hooks.attention import tabular_pattern

    with pytest.raises(TypeCheckError, match="pattern"):
        self_attention_mass(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long))  # pattern needs [batch, q, k]
    with pytest.raises(TypeCheckError, match="states"):
        tabular_pattern(torch.zeros(2, 3))  # states must be integers


def test_no_package_exports_a_name_that_is_also_one_of_its_modules():
    """``from ictd_interp.analyses.reports import analyze`` must never give a module once that module has been
    imported (Python sets a package's attribute to its submodule): exported names and module names differ."""
    import importlib

    for init in [p for folder in FOLDERS for p in (ROOT / folder).rglob("__init__.py")]:
        package = module_name(init)
        modules = {p.stem for p in init.parent.glob("*.py")} | {p.name for p in init.parent.iterdir() if p.is_dir()}
        exported = set(getattr(importlib.import_module(package), "__all__", []))
        assert exported & modules == set(), package


@pytest.mark.parametrize(
    "package",
    [
        "ictd_interp",
        "ictd_interp.io",
        "ictd_interp.analyses.claims",
        "ictd_interp.analyses.figures",
        "ictd_interp.analyses.metrics",
        "ictd_interp.analyses.reports",
        "ictd_interp.analyses.studies",
    ],
)
def test_every_lazy_export_resolves_to_where_it_is_defined(package):
    """Each exported name resolves, and a function or class comes from the submodule its package names, not
    through a module that merely imports it (which breaks when that import is moved or removed)."""
    import importlib

    module = importlib.import_module(package)
    for name, sub in module._EXPORTS.items():
        value = getattr(module, name)
        if callable(value) and hasattr(value, "__module__"):
            assert (value.__module__ + ".").startswith(f"{package}.{sub}."), (package, name)
