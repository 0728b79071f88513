"""Keep freed memory in the process: a CPU training step's big tensors then reuse warm pages.

A training step allocates and frees the same multi-megabyte tensors every step (a pattern
``[batch, query, source]`` is about 4 MB at the paper's sizes). glibc's ``malloc`` hands blocks that
large back to the kernel when they are freed (``mmap``'d blocks are unmapped, the heap's top is
trimmed), so the next step page-faults the same memory in again, zero-filled by the kernel: about
40 % of a CPU step at the paper's sizes (``benchmarks/train_throughput.py``, issue 14). Raising
glibc's mmap and trim thresholds once per process keeps freed blocks for reuse. Only where memory
comes from changes, never a computed value (training stays bit for bit the same); the process keeps
up to ``TRIM_THRESHOLD`` of freed memory instead of returning it at once.

Because the setting is process-wide and cannot be undone, nothing sets it unasked: ``train(...,
keep_freed_memory=True)``, the environment variable ``ICTD_INTERP_KEEP_FREED_MEMORY=1``, or the
``ictd-interp`` command (which owns its process: on by default there, ``--no-keep-freed-memory`` to
decline; studies pass the choice to their workers). A Jupyter kernel or a Ray worker calling ``train()``
keeps its allocator as it was.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from typing import Optional

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc <malloc.h>
MMAP_THRESHOLD = 32 << 20  # glibc's largest allowed value: blocks below it come from the reusable heap
TRIM_THRESHOLD = 256 << 20  # freed memory kept at the heap's top before any is returned to the kernel
ENV = "ICTD_INTERP_KEEP_FREED_MEMORY"


def apply_allocator_choice(keep: Optional[bool]) -> bool:
    """``keep`` (None: the environment variable ``ENV`` is "1") decides whether to set the thresholds;
    returns whether they are set in this process now."""
    if keep is None:
        keep = os.environ.get(ENV, "0") == "1"
    return keep_freed_memory() if keep else keep_freed_memory.cache_info().currsize > 0 and keep_freed_memory()


@functools.cache
def keep_freed_memory() -> bool:
    """Set both thresholds, once per process. True where glibc took them; False elsewhere (macOS,
    Windows, musl): nothing changes there and training runs as before, only slower on CPU."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process already runs on
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
