"""The command line's torch threads: ``--threads``, a resumed run's own count, else one (the Python API's default is
``ictd_interp.io.threads``'s; a command's count is marked chosen there, so it is never overridden)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Optional

from ictd_interp.io.threads import DEFAULT as DEFAULT_THREADS
from ictd_interp.io.threads import chosen

# One torch thread unless asked (``DEFAULT_THREADS``): never far behind two on an idle 2-core machine, and 3-4x ahead
# of two when other work shares the cores (benchmarks/threads.py; docs/performance.md). A resume keeps its run's count
# (the bits of a run depend on it); ``models`` and ``study-report`` run no torch (and import none): every other
# command sets its threads first.
SETS_OWN_THREADS = ("train", "reproduce", "models", "study-report")


def set_threads(threads: Optional[int], run_dir: Optional[str | Path] = None) -> None:
    """``--threads``, else the count recorded by the run in ``run_dir`` (a resume), else ``DEFAULT_THREADS``;
    a count above one on a machine already busy gets a one-line warning."""
    import torch

    if threads is None:
        threads = _recorded_threads(run_dir) or DEFAULT_THREADS
    torch.set_num_threads(threads)
    chosen()  # the command's count: the toolkit's Python default never applies on top
    cores, load = os.cpu_count() or 1, os.getloadavg()[0]
    if threads > 1 and load > cores - 1:
        warnings.warn(
            f"--threads {threads}: the machine is busy (load {load:.1f} on {cores} cores); several threads "
            "then run several times slower than one (benchmarks/threads.py)",
            stacklevel=2,
        )


def _recorded_threads(run_dir: Optional[str | Path]) -> Optional[int]:
    """The torch thread count the run in ``run_dir`` logged last (None: no run there yet)."""
    from ictd_interp.io import run_folder

    if run_dir is None or not run_folder.is_run(run_dir):
        return None
    rows = run_folder.read_metrics(run_dir)
    return rows[-1].get("torch_threads") if rows else None
