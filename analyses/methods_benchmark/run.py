"""``ictd-interp methods-benchmark``: every registered method on every case × seed, on Ray, resumable.

One Ray task per ``(case, seed)`` cell runs every method on that case and writes ``cells/{case}-s{seed}.json``;
a re-run reads the cells already written and computes the rest, and a folder holding another request
(budget, methods, plugins) is refused (``claim_output``). Outside methods come in as plugin files (``--plugin
FILE``): each is imported in the driver and in every worker before the methods are looked up.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Optional, Union

from ictd_interp.analyses.methods_benchmark.case_specs import CASES
from ictd_interp.analyses.methods_benchmark.evaluate import CellResult
from ictd_interp.analyses.methods_benchmark.isolation import METHOD_TIMEOUT, outcome, prepare, run_method, score_cell
from ictd_interp.analyses.methods_benchmark.methods import METHODS, REFERENCES
from ictd_interp.analyses.methods_benchmark.plugins import plugin_hash, plugin_methods
from ictd_interp.analyses.methods_benchmark.sealed import PUBLIC, Split
from ictd_interp.analyses.studies.run import RaySession, check_address
from ictd_interp.analyses.summary.store import build
from ictd_interp.io.progress import progress_bar
from ictd_interp.io.run_folder import claim_output


@dataclass(frozen=True)
class BenchmarkBudget:
    """``seeds`` benchmark seeds per case, ``n_tasks`` clean (and as many corrupted) prompts per cell."""

    name: str
    seeds: int
    n_tasks: int
    cases: tuple[str, ...] = tuple(CASES)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


BUDGETS = {
    "quick": BenchmarkBudget("quick", seeds=5, n_tasks=32),
    "full": BenchmarkBudget("full", seeds=20, n_tasks=64),
}


def narrowed(budget: str, cases: Optional[Sequence[str]] = None, seeds: Optional[int] = None) -> BenchmarkBudget:
    """A budget with fewer cases or seeds (a method author's first try: ``--cases``, ``--seeds``); unknown cases and
    a seed count below 1 are named."""
    chosen = BUDGETS[budget]
    if cases is not None:
        unknown = [c for c in cases if c not in CASES]
        if unknown or not cases:
            raise ValueError(f"cases: unknown {unknown or 'none given'}; the cases are {list(CASES)}")
        chosen = replace(chosen, cases=tuple(cases))
    if seeds is not None:
        if seeds < 1:
            raise ValueError(f"seeds: needs at least 1, got {seeds}")
        chosen = replace(chosen, seeds=seeds)
    return chosen


def run_cell(
    case_name: str,
    seed: int,
    n_tasks: int,
    methods: Sequence[str],
    plugins: Sequence[str],
    sealed: Optional[tuple[int, int]] = None,
) -> dict:
    """One case at one seed, every method scored, as JSON: the steps the benchmark runs on Ray (``isolation``), in
    this process (each method on its own copy of the problem). ``sealed`` (the private split): ``(k,
    problem_seed)``, the cell recorded by its index ``k`` and each method given a ``Problem`` named ``sealed``."""
    problem = prepare(case_name, seed, n_tasks, sealed and sealed[1])
    results = {name: run_method(name, copy.deepcopy(problem), plugins) for name in methods}
    return score_cell(case_name, seed, n_tasks, results, sealed)


def _request(
    budget: BenchmarkBudget,
    methods: Sequence[str],
    plugins: Sequence[str],
    split: Split = PUBLIC,
    from_plugins: Optional[dict[str, str]] = None,
) -> dict[str, Any]:
    hashes = {str(Path(p).resolve()): plugin_hash(p) for p in plugins}
    return {
        "command": "methods-benchmark",
        "budget": budget.to_dict(),
        "methods": list(methods),
        "plugins": list(hashes),
        "plugin_sha256": list(hashes.values()),
        "plugin_methods": {name: hashes.get(str(Path(f).resolve()), "") for name, f in (from_plugins or {}).items()},
        **({"split": split.name, "key_fingerprint": split.fingerprint()} if split.key is not None else {}),
    }


def run_benchmark(
    out_dir: Union[str, Path],
    budget: Union[str, BenchmarkBudget] = "quick",
    methods: Optional[Sequence[str]] = None,
    plugins: Sequence[Union[str, Path]] = (),
    workers: Optional[int] = None,
    address: Optional[str] = None,
    progress: bool = True,
    force: bool = False,
    split: Split = PUBLIC,
    timeout: int = METHOD_TIMEOUT,
) -> tuple[list[CellResult], BenchmarkBudget]:
    """Run (or resume) the benchmark into ``out_dir``; returns every cell's scores and the budget (for
    ``report.write_report``). ``split``: the public cases, or the private ones a key draws (``sealed``)."""
    budget = BUDGETS[budget] if isinstance(budget, str) and budget in BUDGETS else budget
    if not isinstance(budget, BenchmarkBudget):
        raise ValueError(f"budget: must be one of {sorted(BUDGETS)}, got {budget!r}")
    plugins = [str(Path(p).resolve()) for p in plugins]
    from_plugins = plugin_methods(plugins)  # listed in a process of its own: this one never imports a plugin
    known = [*METHODS, *from_plugins]
    methods = list(dict.fromkeys([*REFERENCES, *(known if methods is None else methods)]))  # references always
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise ValueError(f"methods: unknown {unknown}; registered: {sorted(known)}")
    if address is not None and force:
        check_address(address)  # before a forced claim clears the folder (otherwise checked when Ray is needed)
    request = _request(budget, methods, plugins, split, from_plugins)
    out = claim_output(out_dir, request, force, inputs=plugins)
    (out / "cells").mkdir(exist_ok=True)
    cells = [(c, k) for c in budget.cases for k in range(budget.seeds)]
    todo = [(c, k) for c, k in cells if not (out / "cells" / split.cell_file(c, k)).exists()]
    if todo:
        _run_on_ray(out, todo, budget, methods, plugins, workers, address, progress, split, timeout, from_plugins)
    return [read_cell(out / "cells" / split.cell_file(c, k)) for c, k in cells], budget


def read_cell(path: Path) -> CellResult:
    """A cell written by ``run_cell``, typed; a file that does not match names the file and the field."""
    try:
        return build(CellResult, json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError, ValueError, KeyError) as err:
        raise ValueError(f"{path}: not a benchmark cell of this release ({err}); delete it to recompute") from None


def _run_on_ray(
    out: Path, todo, budget: BenchmarkBudget, methods, plugins, workers, address, progress, split, timeout, own
) -> None:
    """Per cell: the problem built (``isolation.prepare``), each method on it in a task of its own, then the cell
    scored and written; a method's failure is its cell's record, a scorer's failure stops the run naming the cell.
    One cell more than the cluster has CPUs is in flight, so cells are saved as they end, not all at the end: an
    interrupted run resumes from them."""
    session = RaySession(address, workers)
    ray = session.ray()
    prepared = ray.remote(num_cpus=1, max_retries=0)(prepare)
    pooled = ray.remote(num_cpus=1, max_retries=0)(run_method)
    fresh = ray.remote(num_cpus=1, max_retries=0, max_calls=1)(run_method)  # a plugin's: a new process each time
    scored = ray.remote(num_cpus=1, max_retries=0)(score_cell)
    sealed = {cell: None if split.key is None else (cell[1], split.problem_seed(*cell)) for cell in todo}
    running, results, scoring, queue = {}, {}, {}, list(todo)
    window = 1 + max(1, int(ray.cluster_resources().get("CPU", 1)))  # cells in flight: each saved as it ends

    def start(cell) -> None:
        results[cell] = {}
        problem = prepared.remote(cell[0], split.seed(*cell), budget.n_tasks, sealed[cell] and sealed[cell][1])
        for name in methods:  # a plugin's method in a fresh process; the others' pooled workers import no plugin
            task, needs = (fresh, plugins) if name in own else (pooled, [])
            running[task.remote(name, problem, needs, timeout)] = (cell, name)

    bar = progress_bar(total=len(todo), disable=not progress, desc="benchmark cells")
    try:
        while queue or running or scoring:
            while queue and len(results) + len(scoring) < window:
                start(queue.pop(0))
            (ref,), _ = ray.wait([*running, *scoring], num_returns=1)
            if ref in running:
                cell, name = running.pop(ref)
                results[cell][name] = outcome(ray, ref, name)
                if len(results[cell]) == len(methods):
                    args = (cell[0], split.seed(*cell), budget.n_tasks, results.pop(cell), sealed[cell])
                    scoring[scored.remote(*args)] = cell
                continue
            cell = scoring.pop(ref)
            try:
                written = ray.get(ref)
            except Exception as err:  # the scorer's own error: name the cell and the cause
                cause = getattr(err, "cause", None) or err
                raise ValueError(f"{out}: cell {cell[0]}-s{cell[1]} failed ({type(cause).__name__}: {cause})") from None
            (out / "cells" / split.cell_file(*cell)).write_text(json.dumps(written, indent=1))
            bar.update(1)
    finally:
        bar.close()
        session.close()
