"""The import graph: layers, no circles (function-level imports included), the core (its CLI included) free of
``ictd_interp.analyses`` and ``ictd_interp.hooks``, and a CLI parser that needs no torch."""

import ast
import re

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


SHORT_NAMES = {name.rsplit(".", 1)[-1]: name for name in LAYERS}


def names(doc: str, word: str) -> bool:
    """``word`` appears in ``doc`` as a whole name (``io`` is not named inside "function", nor ``config`` inside
    "configs")."""
    return re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", doc) is not None


def claimed_layers(doc: str, own: frozenset[str] = frozenset()) -> tuple[set[str], set[str]]:
    """The layers a folder's docstring says it imports and says it never imports: in each sentence about imports, the
    layers named in double backticks before "never" and after it (a name that is one of the folder's ``own`` modules
    is that module, not a layer)."""
    said, denied = set(), set()
    for sentence in re.split(r"(?<=[.:])\s", doc):
        if "import" not in sentence:
            continue
        before, _, after = sentence.partition("never")
        said |= {SHORT_NAMES[w] for w in re.findall(r"``(\w+)``", before) if w in SHORT_NAMES and w not in own}
        denied |= {SHORT_NAMES[w] for w in re.findall(r"``(\w+)``", after) if w in SHORT_NAMES and w not in own}
    return said, denied


@pytest.mark.parametrize("folder_name", list(FOLDERS))
def test_every_folder_names_each_layer_it_imports_and_imports_what_it_names(folder_name):
    """A folder's docstring names every other layer its modules import, as a whole name (``config``, ``metrics``);
    where it says what it imports, each layer it names is imported and none it says it never imports is, so the
    docstring cannot drift from the code it describes in either direction."""
    edges = graph()
    for init in (ROOT / folder_name).rglob("__init__.py"):
        folder = module_name(init)
        if folder in ("ictd_interp", "ictd_interp.analyses"):  # lazy exports
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        imported = imported_layers(folder, edges)
        missing = sorted(name for name in imported if not names(doc, name.rsplit(".", 1)[-1]))
        assert len(doc) > 80 and not missing, f"{init}: its docstring does not name {missing}"
        said, denied = claimed_layers(doc, frozenset(p.stem for p in init.parent.iterdir()))
        assert said <= imported | {folder}, f"{init}: its docstring says it imports {sorted(said - imported)}"
        assert not denied & imported, f"{init}: its docstring says it never imports {sorted(denied & imported)}"


def test_the_docstring_rules_read_whole_names_and_both_directions():
    assert names("its ``io`` layer", "io") and not names("a function", "io") and not names("the configs", "config")
    said, denied = claimed_layers("They import ``metrics`` and ``tasks``, never ``figures``. Other ``studies``.")
    assert said == {"ictd_interp.analyses.metrics", "ictd_interp.tasks"} and denied == {"ictd_interp.analyses.figures"}
    assert claimed_layers("It imports ``commands``.", frozenset({"commands"})) == (set(), set())  # its own module


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


DOTTED = re.compile(r"``([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)``")
FILE_NAME = re.compile(r"\.(json|jsonl|md|csv|py|npz|toml|png|svg|safetensors|txt)$")


def dangling(doc: str, local: set[str], modules: list[str]) -> list[str]:
    """The dotted names in double backticks of ``doc`` that start at one of our modules (by its full name or a dotted
    tail of it: ``metrics.ladder``, ``ladder.ladder_table``) and do not resolve to a module or attribute there. Names
    of files, and names that start at one of the documented function's parameters (``local``), are not modules."""
    import dataclasses
    import importlib

    def has(obj, attr: str) -> bool:
        fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()
        return hasattr(obj, attr) or attr in fields or attr in getattr(obj, "__annotations__", {})

    def resolves(name: str) -> bool:
        parts = name.split(".")
        for k in range(len(parts), 0, -1):
            prefix = ".".join(parts[:k])
            found = [m for m in modules if m == prefix or m.endswith("." + prefix)]
            for module in found:
                obj, ok = importlib.import_module(module), True
                for attr in parts[k:]:
                    ok = ok and has(obj, attr)
                    obj = getattr(obj, attr, None)
                if ok:
                    return True
            if found:
                return False
        return True  # not one of ours: a variable or another library

    return sorted(
        n
        for n in set(DOTTED.findall(doc))
        if not FILE_NAME.search(n) and n.split(".")[0] not in local and not resolves(n)
    )


def test_every_dotted_name_a_docstring_gives_exists():
    """``reports.render`` in a docstring, after the module was renamed, is a lie a reader follows: every dotted name of
    ours in a module, class or function docstring resolves to a module or attribute."""
    paths = [p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")]
    modules = sorted(module_name(p) for p in paths)
    wrong = []
    for path in paths:
        tree = ast.parse(path.read_text())
        for node in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)))]:
            local = (
                {a.arg for a in node.args.args + node.args.kwonlyargs} if isinstance(node, ast.FunctionDef) else set()
            )
            if isinstance(node, ast.ClassDef):
                local = {
                    t.target.id for t in node.body if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)
                }
            wrong += [f"{path.relative_to(ROOT)}: {n}" for n in dangling(ast.get_docstring(node) or "", local, modules)]
    assert wrong == []


def test_the_dotted_name_rule_finds_a_renamed_module_and_a_missing_attribute():
    modules = [
        "ictd_interp.analyses.metrics.ladder",
        "ictd_interp.analyses.reports",
        "ictd_interp.analyses.reports.summary_md",
    ]
    doc = "See ``reports.render``, ``ladder.ladder_table``, ``ladder.no_such``, ``cfg.gamma`` and ``summary.json``."
    assert dangling(doc, {"cfg"}, modules) == ["ladder.no_such", "reports.render"]
