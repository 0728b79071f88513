"""The benchmark on Ray, each method apart from the scorer: per cell, one task builds the case and hands out its
``Problem`` (``prepare``); each method runs in a task of its own on that problem alone (``run_method``), in a worker
that never holds the case, the truth or the scorer, under a time limit (``METHOD_TIMEOUT``); one task scores what
came back (``score_cell``), without importing any plugin. A method that raises, calls ``sys.exit``, overruns its
time, kills its process, or patches the scorer's functions fails that method's cell only, named; the other methods
and cells are untouched. A plugin's method runs in a fresh process each time (``max_calls=1``: nothing it leaves
behind reaches another); the built-in ones share pooled workers (the guard puts back what they may change).
Edge and direction outputs come back as plain data (``as_data``), never as the method's own objects; a plugin is
imported only in its own method's fresh process, never where the case is built or scored."""

from __future__ import annotations

import signal
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Optional

from ictd_interp.io.threads import worker_threads

METHOD_TIMEOUT = 1800  # seconds a method may take on one cell


def prepare(case_name: str, seed: int, n_tasks: int, sealed_seed: Optional[int]):
    """The cell's ``Problem`` (what a method may read), built where the case is, returned as data."""
    from ictd_interp.analyses.methods_benchmark.case_specs import CASES
    from ictd_interp.analyses.methods_benchmark.cases import build_case, problem_of

    worker_threads()
    return problem_of(build_case(replace(CASES[case_name], n_tasks=n_tasks), seed), sealed_seed)


def run_method(name: str, problem, plugins: Sequence[str], timeout: int = METHOD_TIMEOUT) -> dict[str, Any]:
    """``name`` on ``problem``: ``{"output": ..., "seconds": ...}``, ``{"failed": why, ...}``, or ``{"skipped":
    True}`` where the problem asks nothing the method answers."""
    from ictd_interp.analyses.methods_benchmark.evaluate import asked, check_kind
    from ictd_interp.analyses.methods_benchmark.guard import run_on_problem
    from ictd_interp.analyses.methods_benchmark.methods import METHODS
    from ictd_interp.analyses.methods_benchmark.plugins import load_plugin
    from ictd_interp.analyses.methods_benchmark.scores import MethodFailed

    worker_threads()
    for plugin in plugins:
        load_plugin(plugin)
    method, start = METHODS[name], time.perf_counter()
    if not asked(method, problem.feature_sites, problem.variable_sites):
        return {"skipped": True}
    kind = {"kind": method.kind}

    def overrun(*_):
        raise TimeoutError(f"did not finish within {timeout} s")

    previous = signal.signal(signal.SIGALRM, overrun)  # a Ray task runs on its worker's main thread
    signal.alarm(timeout)
    try:
        output = run_on_problem(method, problem)
        check_kind(name, method.kind, output)
        return {"output": as_data(output), "seconds": time.perf_counter() - start, **kind}
    except MethodFailed as err:
        return {"failed": str(err), "seconds": time.perf_counter() - start, **kind}
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def score_cell(
    case_name: str, seed: int, n_tasks: int, results: dict[str, dict], sealed: Optional[tuple[int, int]]
) -> dict:
    """Every method's output on the cell scored beside the truth row, as the cell's JSON (``run.read_cell``)."""
    from ictd_interp.analyses.methods_benchmark.case_specs import CASES
    from ictd_interp.analyses.methods_benchmark.cases import build_case
    from ictd_interp.analyses.methods_benchmark.evaluate import CellResult, score_edges, score_output
    from ictd_interp.analyses.methods_benchmark.faithfulness import circuit_check
    from ictd_interp.analyses.methods_benchmark.graph import build_graph
    from ictd_interp.analyses.methods_benchmark.methods import TRUTH, EdgeOutput
    from ictd_interp.analyses.methods_benchmark.scores import MethodFailed
    from ictd_interp.analyses.summary.store import to_json

    worker_threads()
    case = build_case(replace(CASES[case_name], n_tasks=n_tasks), seed)
    edges = build_graph(case.model).edges
    scores = {TRUTH: score_edges(case, EdgeOutput({e: float(e in case.truth.edges) for e in edges}))}
    failed, seconds = {}, {}
    for name, result in results.items():
        if result.get("skipped"):
            continue
        seconds[name] = result["seconds"]
        if "failed" in result:
            failed[name] = result["failed"]
            continue
        try:
            scores[name] = score_output(name, result["kind"], case, from_data(result["output"]))
        except MethodFailed as err:
            failed[name] = str(err)
    recorded = seed if sealed is None else sealed[0]  # a private cell never names its seed
    circuit = list(circuit_check(case))
    return to_json(CellResult(case_name, recorded, len(edges), len(case.truth.edges), scores, failed, seconds, circuit))


def as_data(output):
    """An output as plain data (floats, strings, base tensors), so nothing of the method's own classes or code is
    unpickled in the scorer: a feature output's encoders travel as their tensors and activation's name."""
    import torch

    from ictd_interp.analyses.methods_benchmark.methods import DirectionOutput, EdgeOutput, Encoder, FeatureOutput

    plain = lambda t: None if t is None else torch.as_tensor(t).detach().as_subclass(torch.Tensor).clone()  # noqa: E731
    if isinstance(output, EdgeOutput):
        edges = {(str(u), str(v)): float(x) for (u, v), x in output.scores.items()}
        circuit = None if output.circuit is None else sorted((str(u), str(v)) for u, v in output.circuit)
        return {"edges": edges, "circuit": circuit}
    if isinstance(output, DirectionOutput):
        return {"directions": {(str(a), str(b)): plain(t) for (a, b), t in output.directions.items()}}
    if isinstance(output, FeatureOutput):
        encoders = {
            str(site): (
                {
                    "weight": plain(e.weight),
                    "bias": plain(e.bias),
                    "center": plain(e.center),
                    "activation": str(e.activation),
                }
                if isinstance(e, Encoder)
                else None  # code, not data: refused by the scorer (check_kind), named
            )
            for site, e in output.encoders.items()
        }
        return {"features": {"encoders": encoders, "decoders": {str(s): plain(t) for s, t in output.decoders.items()}}}
    return output


def from_data(data):
    """``as_data``'s output back as the scorer's own classes."""
    from ictd_interp.analyses.methods_benchmark.methods import DirectionOutput, EdgeOutput, FeatureOutput

    if isinstance(data, dict) and "edges" in data:
        return EdgeOutput(data["edges"], None if data["circuit"] is None else frozenset(map(tuple, data["circuit"])))
    if isinstance(data, dict) and "directions" in data:
        return DirectionOutput(data["directions"])
    if isinstance(data, dict) and "features" in data:
        output = FeatureOutput(decoders=data["features"]["decoders"])
        output.encoders.update({s: _encoder(e) for s, e in data["features"]["encoders"].items()})
        return output  # an encoder that was no data is None here: check_kind refuses it, named
    return data


def outcome(ray, ref, name: str) -> dict[str, Any]:
    """A method task's result, or its failure named: its process died (killed, ``os._exit``, out of memory)."""
    try:
        return ray.get(ref)
    except Exception as err:  # a RayError: the worker died, or the task could not run
        first = next((line for line in str(err).splitlines() if line.strip()), type(err).__name__)
        return {"failed": f"method {name!r}: its process died ({type(err).__name__}: {first[:200]})", "seconds": 0.0}


def _encoder(data):
    """An encoder's data as an ``Encoder``, or None where it is none (the scorer then refuses it, named)."""
    from ictd_interp.analyses.methods_benchmark.methods import Encoder

    try:
        return None if data is None else Encoder(**data)
    except (TypeError, ValueError, AttributeError):
        return None
