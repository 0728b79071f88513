"""``ictd-interp methods-benchmark``: every registered method on every case × seed, on Ray, resumable.

One Ray task per ``(case, seed)`` cell runs every method on that case and writes ``cells/{case}-s{seed}.json``;
a re-run reads the cells already written and computes the rest, and a folder holding another request
(budget, methods, plugins) is refused (``claim_output``). Outside methods come in as plugin files (``--plugin
FILE``): each is imported in the driver and in every worker before the methods are looked up.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Optional, Union

from analyses.methods_benchmark.case_specs import CASES
from analyses.methods_benchmark.cases import build_case
from analyses.methods_benchmark.evaluate import CellResult, score_method
from analyses.methods_benchmark.faithfulness import circuit_check
from analyses.methods_benchmark.graph import build_graph
from analyses.methods_benchmark.methods import METHODS
from analyses.methods_benchmark.scores import MethodFailed
from analyses.studies.run import RaySession, check_address
from analyses.summary.store import build, to_json
from ictd_interp.io.progress import progress_bar
from ictd_interp.training.run_folder import claim_output


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


def load_plugin(path: Union[str, Path]) -> None:
    """Import a plugin file (it registers its methods with ``register_method``); a file imported once is not
    imported again."""
    path = Path(path).resolve()
    name = f"ictd_benchmark_plugin_{abs(hash(str(path)))}"
    if name in sys.modules:
        return
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such plugin file")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise ValueError(f"{path}: the plugin failed to import ({type(err).__name__}: {err})") from None


def run_cell(case_name: str, seed: int, n_tasks: int, methods: Sequence[str], plugins: Sequence[str]) -> dict:
    """One case at one seed, every method scored (runs in a Ray worker on one torch thread), as JSON."""
    import torch

    torch.set_num_threads(1)
    for plugin in plugins:
        load_plugin(plugin)
    case = build_case(replace(CASES[case_name], n_tasks=n_tasks), seed)
    scores, failed = {}, {}
    for name in methods:
        try:
            if (found := score_method(METHODS[name], case)) is not None:
                scores[name] = found
        except MethodFailed as err:  # output not finite, the case edited: recorded, never scored
            failed[name] = str(err)
    return to_json(
        CellResult(
            case_name,
            seed,
            len(build_graph(case.model).edges),
            len(case.truth.edges),
            scores,
            failed,
            list(circuit_check(case)),
        )
    )


def _request(budget: BenchmarkBudget, methods: Sequence[str], plugins: Sequence[str]) -> dict[str, Any]:
    return {
        "command": "methods-benchmark",
        "budget": budget.to_dict(),
        "methods": list(methods),
        "plugins": [str(Path(p).resolve()) for p in plugins],
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
) -> tuple[list[CellResult], BenchmarkBudget]:
    """Run (or resume) the benchmark into ``out_dir``; returns every cell's scores and the budget (for
    ``report.write_report``)."""
    budget = BUDGETS[budget] if isinstance(budget, str) and budget in BUDGETS else budget
    if not isinstance(budget, BenchmarkBudget):
        raise ValueError(f"budget: must be one of {sorted(BUDGETS)}, got {budget!r}")
    plugins = [str(Path(p).resolve()) for p in plugins]
    for plugin in plugins:
        load_plugin(plugin)
    methods = list(METHODS) if methods is None else list(methods)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"methods: unknown {unknown}; registered: {sorted(METHODS)}")
    if address is not None and force:
        check_address(address)  # before a forced claim clears the folder (otherwise checked when Ray is needed)
    out = claim_output(out_dir, _request(budget, methods, plugins), force, inputs=plugins)
    (out / "cells").mkdir(exist_ok=True)
    todo = [(c, s) for c in budget.cases for s in range(budget.seeds) if not _cell_path(out, c, s).exists()]
    if todo:
        _run_on_ray(out, todo, budget, methods, plugins, workers, address, progress)
    return [read_cell(_cell_path(out, c, s)) for c in budget.cases for s in range(budget.seeds)], budget


def read_cell(path: Path) -> CellResult:
    """A cell written by ``run_cell``, typed; a file that does not match names the file and the field."""
    try:
        return build(CellResult, json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError, ValueError, KeyError) as err:
        raise ValueError(f"{path}: not a benchmark cell of this release ({err}); delete it to recompute") from None


def _cell_path(out: Path, case: str, seed: int) -> Path:
    return out / "cells" / f"{case}-s{seed}.json"


def _run_on_ray(out: Path, todo, budget: BenchmarkBudget, methods, plugins, workers, address, progress) -> None:
    session = RaySession(address, workers)
    ray = session.ray()
    task = ray.remote(num_cpus=1)(run_cell)
    refs = {task.remote(c, s, budget.n_tasks, methods, plugins): (c, s) for c, s in todo}
    bar = progress_bar(total=len(refs), disable=not progress, desc="benchmark cells")
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                try:
                    cell = ray.get(ref)
                except Exception as err:  # a method's error, raised in the worker: name the cell and the cause
                    cause = getattr(err, "cause", None) or err
                    raise ValueError(
                        f"{out}: cell {refs[ref][0]}-s{refs[ref][1]} failed ({type(cause).__name__}: {cause})"
                    ) from None
                _cell_path(out, *refs[ref]).write_text(json.dumps(cell, indent=1))
                bar.update(1)
    finally:
        bar.close()
        session.close()
