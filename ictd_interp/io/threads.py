"""One torch thread by default wherever the toolkit runs work, in Python as on the command line.

On a busy 2-core machine two threads run several times slower than one (docs/performance.md, benchmarks/threads.py),
and torch's own default is every core. So the first time a process builds or loads a model (every entry point:
loading, patching, analyses, training), the toolkit sets torch to ``ICTD_INTERP_THREADS`` threads, 1 when that is
unset — unless the count was chosen already: ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` set, or
``torch.set_num_threads`` called with a count other than torch's default (the machine's cores, or half of them where
torch counts physical cores). It happens once per process; a later ``torch.set_num_threads`` is never undone. The
command line sets ``--threads`` itself before any model is built, so this leaves its count as it is.
"""

from __future__ import annotations

import os

ENV = "ICTD_INTERP_THREADS"
DEFAULT = 1  # the command line's default too (``ictd_interp.cli.threads``)
_done = False


def chosen() -> None:
    """Mark the count as chosen (``--threads``, a retrain at its card's count): the default then never applies."""
    global _done
    _done = True


def toolkit_threads() -> None:
    """Apply the default once per process (this module's docstring)."""
    if _done:
        return
    chosen()
    import torch

    if os.environ.get(ENV):
        value = os.environ[ENV]
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{ENV}: must be a positive integer (torch threads), got {value!r}")
        torch.set_num_threads(int(value))
        return
    if os.environ.get("OMP_NUM_THREADS") or os.environ.get("MKL_NUM_THREADS"):
        return
    cores = os.cpu_count() or 1
    if torch.get_num_threads() in {cores, max(1, cores // 2)}:  # torch's own default: not the user's choice
        torch.set_num_threads(DEFAULT)


def worker_threads() -> None:
    """A Ray worker's count: one thread, whatever the environment says. Ray gives each task one CPU (``num_cpus=1``),
    so a worker with more threads than that slows its neighbours; the count is marked chosen so nothing later in the
    process changes it."""
    import torch

    torch.set_num_threads(DEFAULT)
    chosen()
