"""Which of a study's cells train together, and in what order: cells of one shape stacked in one process where that
wins (``stack_groups``, by ``stack_rule``: at ``tasks_per_batch <= STACK_MAX_TASKS_PER_BATCH`` on a CPU, at most
``STACK_TASKS // tasks_per_batch`` models per stack; on a GPU at every batch), split over the workers, and the units
submitted on Ray by their first cell's seed (``seed_major``). ``cells`` runs a unit; ``run`` and ``plan`` split
the cells with these rules."""

from __future__ import annotations

import math
from typing import Optional

from ictd_interp.analyses.studies.spec import Cell

STACK_MAX_TASKS_PER_BATCH = 16  # where a stack's step loop wins: 2.1x at 4 tasks, 1.25x at 16; ties at 32, 0.76x at 64
STACK_TASKS = 128  # the most tasks of all a stack's models per step measured winning (4 tasks x 32 models: 2.2x)
# On a GPU one model's step is launch-bound (4.7 ms whatever its batch, H200) and a stack wins at every batch: with
# the presets' 64 tasks per model the device saturates near M = 1,024 models (about 65,536 tasks per step)
GPU_STACK_TASKS = 65_536


def stack_rule(device: str) -> tuple[Optional[int], int]:
    """``(largest tasks_per_batch a stack takes, most tasks of all its models per step)`` on ``device``, measured:
    ``benchmarks/model_stack.py`` on a CPU, ``benchmarks/device_checks.py --quick`` on a GPU."""
    return (None, GPU_STACK_TASKS) if device == "cuda" else (STACK_MAX_TASKS_PER_BATCH, STACK_TASKS)


def stack_groups(cells: list[Cell], workers: int, previous: Optional[dict[str, list[str]]] = None) -> list[list[Cell]]:
    """``cells`` in units of work: a list of one cell runs alone (``run_cell``), a longer one as a stack
    (``run_stacked_cells``). A started cell keeps the unit of its last stretch (``previous``: cell name -> the
    cells it was stepped with, itself included), with those of them still in ``cells``. The others: cells of
    one shape are split into near-equal stacks, as many as their share of the workers left (the shares by
    largest remainder, so every worker has a unit while cells remain) and at least enough that none steps more
    than ``STACK_TASKS`` tasks; a share of one cell per stack runs them alone. Order is kept within each unit."""
    from ictd_interp.training.stacked import stack_refusal

    previous, kept, placed = previous or {}, [], set()
    for cell in cells:
        if cell.name in previous and cell.name not in placed:
            kept.append([c for c in cells if previous.get(c.name) == previous[cell.name]])
            placed.update(c.name for c in kept[-1])
    shapes: list[list[Cell]] = []
    for cell in (c for c in cells if c.name not in placed):
        largest = stack_rule(cell.config.device)[0]
        fits = (largest is None or cell.config.tasks_per_batch <= largest) and stack_refusal([cell.config]) is None
        group = next((g for g in shapes if fits and stack_refusal([g[0].config, cell.config]) is None), None)
        if group is None:
            shapes.append([cell])
        else:
            group.append(cell)
    units = kept
    for group, share in zip(shapes, _shares(max(workers - len(kept), 1), [len(g) for g in shapes])):
        most = max(1, stack_rule(group[0].config.device)[1] // group[0].config.tasks_per_batch)  # models per stack
        parts = min(len(group), max(share, math.ceil(len(group) / most)))
        bounds = [len(group) * k // parts for k in range(parts + 1)]
        units.extend(group[a:b] for a, b in zip(bounds, bounds[1:]))
    return units


def seed_major(units: list[list[Cell]]) -> list[list[Cell]]:
    """``units`` in the order Ray is given them: by their first cell's seed (a stable sort), so where cells train alone
    (the state-space forward's, the default batch's) every condition's first seed comes before any condition's second,
    and a study stopped part way has a coarse map of every condition rather than a few conditions' every seed. A
    stack holds one shape's cells in the grid's order (all seeds of a few conditions), which this does not reorder;
    a ``--plan`` for a batch scheduler keeps ``stack_groups``' order."""
    return sorted(units, key=lambda unit: unit[0].overrides["seed"])


def _shares(workers: int, sizes: list[int]) -> list[int]:
    """``workers`` split in proportion to ``sizes`` by largest remainder, at least one each."""
    quotas = [workers * n / max(sum(sizes), 1) for n in sizes]
    shares = [max(1, math.floor(q)) for q in quotas]
    by_remainder = sorted(range(len(sizes)), key=lambda i: quotas[i] - math.floor(quotas[i]), reverse=True)
    for i in by_remainder[: max(workers - sum(shares), 0)]:
        shares[i] += 1
    return shares
