"""Outputs written whole or not at all: a command's files go to a hidden folder inside its output folder and
replace the output's files only once every one is written, so an interruption (Ctrl-C included) or an error
leaves the folder as it was, never a file cut short nor a report without its figures; ``refuse_unusable`` names an
output folder that cannot be one, torch-free so the command line refuses it before loading anything."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Union


@contextmanager
def staged(out_dir: Path) -> Iterator[Path]:
    """A fresh hidden folder inside ``out_dir`` to write into; when the block ends normally each file written
    there replaces its namesake in ``out_dir`` (``os.replace``: never seen half-written), and on any exception the
    hidden folder is removed and ``out_dir`` keeps what it held."""
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".staged-", dir=out_dir))
    try:
        yield work
        for src in sorted(p for p in work.rglob("*") if p.is_file()):
            target = out_dir / src.relative_to(work)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def refuse_unusable(out_dir: Path, inputs: Sequence[Union[str, Path]] = ()) -> None:
    """A ``ValueError`` naming ``--out`` when it is a file, lies under a file, or holds one of ``inputs``."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"--out {out_dir}: is a file, not a folder; choose another --out")
    here = out_dir.resolve()
    for parent in [here, *here.parents]:
        if parent.exists() and not parent.is_dir():
            raise ValueError(f"--out {out_dir}: {parent} is a file, so no folder can be made under it")
    for given in inputs:
        source = Path(given).resolve()
        if source == here or here in source.parents:
            raise ValueError(
                f"--out {out_dir}: holds the input {given}, which the results would replace; choose another --out"
            )
