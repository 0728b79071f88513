"""pyproject.toml's package list is the tree: every folder with an ``__init__.py`` under ``ictd_interp/``, ``hooks/``
and ``analyses/`` installs, under the name ``tests/support/imports.py`` reads it by, and nothing else does."""

import tomllib

from tests.support.imports import FOLDERS, ROOT, module_name

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_package_list_is_every_folder_of_the_tree():
    listed = PYPROJECT["tool"]["setuptools"]["packages"]
    found = sorted(module_name(init) for folder in FOLDERS for init in (ROOT / folder).rglob("__init__.py"))
    assert sorted(listed) == found and len(found) > 20


def test_hooks_and_analyses_install_inside_ictd_interp_from_their_own_folders():
    mapping = PYPROJECT["tool"]["setuptools"]["package-dir"]
    assert mapping == {name: folder for folder, name in FOLDERS.items() if folder != name}
    assert not any(name in ("hooks", "analyses") for name in PYPROJECT["tool"]["setuptools"]["packages"])


def test_the_analyses_commands_are_registered_and_installed():
    from importlib.metadata import entry_points

    group = PYPROJECT["project"]["entry-points"]["ictd_interp.commands"]
    assert group == {"analyses": "ictd_interp.analyses.commands:COMMANDS"}
    installed = {e.name: e.value for e in entry_points(group="ictd_interp.commands")}
    assert installed == group, "reinstall the package (pip install -e .): its entry points are stale"
