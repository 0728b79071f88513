"""What adding an architecture costs, measured the way issue 43 asks: a toy fourth architecture (the linear
model under another name, ``toy-linear``) added to a throwaway copy of this tree, then trained and analysed end to
end through the command line, in the copy alone.

    python benchmarks/new_architecture.py [--steps 30]

The toy is three new files (its config record, its model class, its report) and one registration line (its
config in ``ModelConfig``, with the import that line needs). It inherits every field, check and report section of
the linear model (its summary.md reads as the linear model's), so it measures the wiring, not the work of
writing a new model or report. Prints JSON: the files added and the lines changed in
existing files (``git diff --numstat`` in the copy), whether ``train`` and ``analyze`` succeeded, and the
analysis's headline line. Nothing in this tree is changed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = "ictd_interp/config/train.py"
NEW_FILES = {
    "ictd_interp/config/toy.py": '''"""The toy architecture's record: the linear model under another name."""
from ictd_interp.config.linear import LinearICTDConfig


class ToyConfig(LinearICTDConfig):
    architecture = "toy-linear"
    description = "a toy: the linear model under another name"
    model_module = "ictd_interp.models.toy"
    original_architecture = "HookedToyLinear"
''',
    "ictd_interp/models/toy.py": '''"""The toy architecture's model class (one module; a folder once it has more)."""
from ictd_interp.config.toy import ToyConfig
from ictd_interp.models.linear.model import HookedLinearICTD


class HookedToyLinear(HookedLinearICTD):
    CONFIG = ToyConfig
''',
    "analyses/reports/toy.py": '''"""The toy architecture's report: the linear model's."""
from ictd_interp.analyses.reports.linear import compute, figures, lines  # noqa: F401

ARCHITECTURE = "toy-linear"
''',
}


def add_toy(tree: Path) -> None:
    for name, text in NEW_FILES.items():
        (tree / name).write_text(text)
    registry = tree / REGISTRY
    source = registry.read_text()
    old = "ModelConfig = Union[ICTDConfig, StandardConfig, LinearICTDConfig]"
    if old not in source:
        raise SystemExit(f"{REGISTRY}: the registration line {old!r} is not there; update this benchmark")
    registry.write_text(
        source.replace(
            old,
            "from ictd_interp.config.toy import ToyConfig  # noqa: E402\n"
            "ModelConfig = Union[ICTDConfig, StandardConfig, LinearICTDConfig, ToyConfig]",
        )
    )


def touched(tree: Path) -> dict:
    git = ["git", "-C", str(tree)]
    subprocess.run([*git, "add", "-A"], check=True, capture_output=True)
    numstat = subprocess.run(
        [*git, "diff", "--cached", "--numstat", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.split("\n")
    rows = [line.split("\t") for line in numstat if line]
    changed = {path: int(add) + int(rem) for add, rem, path in rows if path not in NEW_FILES}
    return {"new_files": sorted(p for *_, p in rows if p in NEW_FILES), "changed_files": changed}


def copy_uncommitted(tree: Path) -> None:
    """This tree's uncommitted work into the clone: changed and new files copied, deleted ones deleted."""
    listed = lambda *flags: [
        n
        for n in subprocess.run(  # noqa: E731
            ["git", "-C", str(ROOT), "ls-files", "-z", *flags], check=True, capture_output=True, text=True
        ).stdout.split("\0")
        if n
    ]
    deleted = set(listed("-d"))
    for name in deleted:
        (tree / name).unlink(missing_ok=True)
    for name in set(listed("-m", "-o", "--exclude-standard")) - deleted:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tree / name)


def install(tree: Path, where: Path) -> Path:
    """The copy installed (editable, no dependencies) into a virtual environment of its own that sees this one's
    libraries, so its ``ictd_interp.analyses`` and its entry points are the copy's; returns its Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]  # a plain path line: this environment's libraries, not its .pth hooks
    (Path(site) / "libraries.pth").write_text(ours + "\n")
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(tree)]
    subprocess.run(pip, check=True, capture_output=True)
    return python


def run(python: Path, tree: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "ictd_interp.cli", *args], cwd=tree, capture_output=True, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    steps = parser.parse_args().steps
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(tree)], check=True)
        copy_uncommitted(tree)
        subprocess.run(["git", "-C", str(tree), "add", "-A"], check=True)
        subprocess.run(
            [
                "git",
                "-C",
                str(tree),
                "-c",
                "user.name=b",
                "-c",
                "user.email=b@b",
                "commit",
                "-qm",
                "base",
                "--allow-empty",
            ],
            check=True,
        )
        add_toy(tree)
        shape = touched(tree)
        python = install(tree, Path(tmp) / "venv")
        trained = run(
            python,
            tree,
            "train",
            "--architecture",
            "toy-linear",
            "--steps",
            str(steps),
            "--n-eval-tasks",
            "16",
            "--eval-every",
            str(steps),
            "--out",
            str(Path(tmp) / "run"),
        )
        analysed = (
            run(python, tree, "analyze", str(Path(tmp) / "run"), "--out", str(Path(tmp) / "analysis"))
            if trained.returncode == 0
            else trained
        )
        summary = Path(tmp) / "analysis" / "summary.md"
        written = Path(tmp) / "analysis" / "summary.json"
        json.dump(
            {
                **shape,
                "train_ok": trained.returncode == 0,
                "analyze_ok": analysed.returncode == 0,
                "architecture": json.loads(written.read_text())["architecture"] if written.exists() else None,
                "error": None if analysed.returncode == 0 else analysed.stderr[-2000:],
                "summary_first_line": summary.read_text().splitlines()[0] if summary.exists() else None,
            },
            sys.stdout,
            indent=1,
        )
        print()


if __name__ == "__main__":
    main()
