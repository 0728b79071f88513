"""pyproject.toml's package list is the tree: every folder with an ``__init__.py`` under ``ictd_interp/``, ``hooks/``
and ``analyses/`` installs, under the name ``tests/support/imports.py`` reads it by, and nothing else does."""

import tomllib

from tests.support.imports import FOLDERS, ROOT, module_name

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_package_list_is_every_folder_of_the_tree():
    listed = PYPROJECT["tool"]["setuptools"]["packages"]
    found = sorted(module_name(init) for folder in FOLDERS for init in (ROOT / folder).rglob("__init__.py"))
    assert sorted(listed) == found and len(found) > 20


def test_hooks_and_analyses_keep_their_folders_and_resolve_by_path_inside_ictd_interp():
    """The folder tree is the import tree: ``ictd_interp/hooks`` and ``ictd_interp/analyses`` are links to the
    top-level folders, so a reader that resolves ``ictd_interp.analyses.x`` by path (a type checker, a language
    server, ``python`` in a clone with no install) finds the file; setuptools needs no ``package-dir``."""
    from importlib.machinery import PathFinder

    assert "package-dir" not in PYPROJECT["tool"]["setuptools"]
    for folder, name in FOLDERS.items():
        if folder == name:
            continue
        link = ROOT / "ictd_interp" / name.split(".")[-1]
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), link
        spec = PathFinder.find_spec(name, [str(ROOT / "ictd_interp")])
        assert spec is not None and spec.origin == str(link / "__init__.py")
    assert not any(name in ("hooks", "analyses") for name in PYPROJECT["tool"]["setuptools"]["packages"])


def test_the_analyses_commands_are_registered_and_installed():
    from importlib.metadata import entry_points

    group = PYPROJECT["project"]["entry-points"]["ictd_interp.commands"]
    assert group == {"analyses": "ictd_interp.analyses.commands:COMMANDS"}
    installed = {e.name: e.value for e in entry_points(group="ictd_interp.commands")}
    assert installed == group, "reinstall the package (pip install -e .): its entry points are stale"
