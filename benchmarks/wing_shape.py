"""The shape of the code, measured the way issue 43 asks: how many places branch on an architecture's name,
how many string-key reads the renderers and claims make, whether ``claims`` imports a report module, and
the files and lines over the project's limits. Run from the repository root, before and after a change:

    python benchmarks/wing_shape.py

Prints JSON. ``string_key_reads`` counts reads by a string constant (``row["fve"]``; a store such as
``out["attention"] = ...`` builds a table and is not counted) in the files named, by file;
``architecture_branches`` the lines matching the issue's grep in ``ictd_interp`` and ``analyses`` (Python files).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BRANCH = re.compile(r'architecture ?== ?"|is_stylised\(|"linear-ictd"')
READERS = (
    "analyses/reports/summary_md.py",
    "analyses/reports/shared_figures.py",
    "analyses/reports/stylised.py",
    "analyses/reports/stylised_words.py",
    "analyses/reports/standard.py",
    "analyses/reports/standard_words.py",
    "analyses/reports/linear.py",
    "analyses/claims/trained.py",
    "analyses/claims/findings.py",
    "analyses/claims/claims_md.py",
    "analyses/studies/report.py",
)
LINE_LIMIT, FILE_LIMIT = 120, 400


def python_files() -> list[Path]:
    return sorted(
        p for top in ("ictd_interp", "analyses", "hooks", "benchmarks", "tests") for p in (ROOT / top).rglob("*.py")
    )


def string_key_reads(path: Path) -> int:
    tree = ast.parse(path.read_text())
    return sum(
        isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
        for node in ast.walk(tree)
    )


def claims_import_reports() -> list[str]:
    found = []
    for path in (ROOT / "analyses" / "claims").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ictd_interp.analyses.reports"):
                found.append(f"{path.relative_to(ROOT)}: {node.module}")
    return found


def main() -> None:
    files = python_files()
    branches = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in files
        if p.parts[len(ROOT.parts)] in ("ictd_interp", "analyses")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if BRANCH.search(line)
    ]
    reads = {name: string_key_reads(ROOT / name) for name in READERS if (ROOT / name).exists()}
    long_lines = sum(len(line) > LINE_LIMIT for p in files for line in p.read_text().splitlines())
    big = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > FILE_LIMIT}
    json.dump(
        {
            "architecture_branches": len(branches),
            "branch_lines": branches,
            "string_key_reads": reads,
            "string_key_reads_total": sum(reads.values()),
            "claims_imports_of_reports": claims_import_reports(),
            f"lines_over_{LINE_LIMIT}": long_lines,
            f"files_over_{FILE_LIMIT}_lines": big,
        },
        sys.stdout,
        indent=1,
    )
    print()


if __name__ == "__main__":
    main()
