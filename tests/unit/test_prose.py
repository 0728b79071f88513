"""Prose held to the code: every README or docs section the code or the docs point to exists (``docs/theory.md §6``,
``docs/performance.md, "Choices measured"``, ``README "Commands"``, ``docs/guide.md#studies-on-ray``), and every
package docstring names each of its folder's modules. A pointer that drifts fails here, naming the file and line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("ictd_interp", "analyses", "hooks", "benchmarks", "tests")
QUOTED = re.compile(r"(README(?:\.md)?|docs/[\w/]+\.md),? \"([^\"]{3,80})\"")
SECTION = re.compile(r"(docs/[\w/]+\.md) ((?:§\d+[a-z]?(?:, )?)+)")
ANCHOR = re.compile(r"((?:\.\./|docs/)?[\w/]*\.md)#([\w-]+)")


def documents() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]}


def headings(text: str) -> list[str]:
    """Markdown headings and bold heads (``**Title.**``) of a document, as written."""
    return [h.strip() for h in re.findall(r"^#+ (.+)$", text, re.M)] + re.findall(r"\*\*([^*]{3,80})\*\*", text)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", heading.lower()))


def anchors(text: str) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)} | set(re.findall(r"<a id=\"([\w-]+)\"", text))


def pointers(pattern: re.Pattern) -> list[tuple[str, int, tuple[str, ...]]]:
    """``(file, line, groups)`` of each match in the sources (this file's own examples left out) and the docs."""
    found = []
    files = [p for folder in SOURCES for p in (ROOT / folder).rglob("*.py") if p.name != "test_prose.py"]
    for path in files + [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            found += [(str(path.relative_to(ROOT)), n, m.groups()) for m in pattern.finditer(line)]
    return found


def target(name: str, where: str) -> str:
    name = "README.md" if name.startswith("README") else name
    if name.startswith("../"):  # a link from docs/x.md to a sibling
        name = str((Path(where).parent / name).as_posix()).replace("docs/../", "")
    elif not name.startswith(("docs/", "README")) and where.startswith("docs/"):
        name = f"{Path(where).parent.as_posix()}/{name}"
    return name


def test_every_quoted_section_exists():
    docs, missing = documents(), []
    for where, line, (name, title) in pointers(QUOTED):
        text = docs.get(target(name, where))
        if text is None or not any(title.rstrip(".") in h for h in headings(text)):
            missing.append(f"{where}:{line}: {name} has no section {title!r}")
    assert missing == []


def test_every_numbered_section_exists():
    docs, missing = documents(), []
    for where, line, (name, numbers) in pointers(SECTION):
        heads = [h.split(" ", 1)[0].rstrip(".") for h in re.findall(r"^#+ (.+)$", docs[name], re.M)]
        missing += [f"{where}:{line}: {name} has no §{n}" for n in re.findall(r"§(\w+)", numbers) if n not in heads]
    assert missing == []


def test_every_anchor_link_lands_on_a_heading():
    docs, missing = documents(), []
    for where, line, (name, anchor) in pointers(ANCHOR):
        text = docs.get(target(name, where))
        if text is not None and anchor not in anchors(text):
            missing.append(f"{where}:{line}: {name}#{anchor} is no heading or anchor")
    assert missing == []


def test_every_package_docstring_names_its_modules():
    """Each module of a package is named (``name``) in the package's docstring; each bullet's head names one."""
    wrong = []
    for init in [p for folder in ("ictd_interp", "analyses", "hooks") for p in (ROOT / folder).rglob("__init__.py")]:
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        modules = {p.stem for p in init.parent.glob("*.py") if p.stem not in ("__init__", "__main__", "_lazy")}
        modules |= {p.name for p in init.parent.iterdir() if (p / "__init__.py").exists()}
        named = set(re.findall(r"``(\w+)/?``", doc))
        wrong += [f"{init.relative_to(ROOT)}: {m} not named" for m in sorted(modules - named)]
        heads = set(re.findall(r"^- ``(\w+)/?``", doc, re.M))
        wrong += [f"{init.relative_to(ROOT)}: bullet {h} is no module" for h in sorted(heads - modules)]
    assert wrong == []


def test_the_checks_catch_a_drifted_pointer():
    """Each check above fails on a pointer to nothing: a missing title, section number, anchor."""
    docs = documents()
    assert not any("No Such Section" in h for h in headings(docs["README.md"]))
    assert "99" not in [h.split(" ", 1)[0].rstrip(".") for h in re.findall(r"^#+ (.+)$", docs["docs/theory.md"], re.M)]
    assert "no-such-anchor" not in anchors(docs["docs/guide.md"]) and "studies-on-ray" in anchors(docs["docs/guide.md"])
    assert QUOTED.search('see README "No Such Section"') and SECTION.search("docs/theory.md §99")
