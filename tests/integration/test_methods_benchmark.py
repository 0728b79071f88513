"""The methods benchmark: the graph adapter against the hooked forward, the planted cases against θ*'s circuit,
the scores on cases worked by hand, the exact methods at the values they must have, and the command."""

import json

import pytest

from ictd_interp.analyses.methods_benchmark import methods as M
from ictd_interp.analyses.methods_benchmark.case_specs import CASES
from ictd_interp.analyses.methods_benchmark.cases import build_case, counterfactual_labels, problem_of
from ictd_interp.analyses.methods_benchmark.evaluate import CellResult
from ictd_interp.analyses.methods_benchmark.report import write_report
from ictd_interp.analyses.methods_benchmark.run import BenchmarkBudget, run_benchmark
from ictd_interp.analyses.methods_benchmark.scores import angle_degrees
from ictd_interp.analyses.metrics import interchange
from ictd_interp.cli import main


@pytest.fixture(scope="module")
def distractors():
    return build_case(CASES["distractors"], 0)


def test_das_through_pyvene_finds_the_value_direction(monkeypatch):
    pytest.importorskip("pyvene")
    monkeypatch.setattr(interchange, "DAS_STEPS", 150)
    case = build_case(CASES["rotated"], 0)
    problem, site = problem_of(case), "blocks.1.hook_resid_post"
    axis = interchange.fit_das(problem.model, site, problem.fit, problem.fit_counterfactuals[("value", site)], [0])
    assert angle_degrees(axis, case.truth.directions["value"]) < 0.5
    assert (
        interchange.move_accuracies(
            case.model,
            case.held_out,
            site,
            counterfactual_labels(case, case.held_out, "value", site),
            {"das": interchange.swap_move(axis)},
        )["das"]
        > 1 - 1e-6
    )
    assert not problem.model.has_any_hook()  # pyvene's hooks are gone after each call


PLUGIN = '''
from ictd_interp.analyses.methods_benchmark.graph import build_graph
from ictd_interp.analyses.methods_benchmark.methods import EdgeOutput, Method, register_method


def degree(case):
    """Score an edge by how many edges leave its destination (a structural guess, no forward pass)."""
    edges = build_graph(case.model).edges
    return EdgeOutput({(u, v): float(sum(e[0] == v for e in edges)) for u, v in edges})


register_method(Method("out-degree", "edges", degree, "edges into busy readers first"))
'''


def test_a_tiny_benchmark_with_a_plugin_resumes_and_refuses_a_changed_request(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    plugin = tmp_path / "my_method.py"
    plugin.write_text(PLUGIN)
    budget = BenchmarkBudget("tiny", seeds=2, n_tasks=8, cases=("rotated", "distractors"))
    methods = ["activation-patching", "out-degree", "linear-probe"]
    cells, _ = run_benchmark(tmp_path / "b", budget, methods=methods, plugins=[plugin], workers=2, progress=False)
    assert len(cells) == 4 and {c.case for c in cells} == {"rotated", "distractors"}
    assert all(c.scores["activation-patching"].auroc == 1.0 for c in cells)
    written = {p: p.stat().st_mtime_ns for p in (tmp_path / "b" / "cells").iterdir()}
    again, _ = run_benchmark(tmp_path / "b", budget, methods=methods, plugins=[plugin], progress=False)
    assert again == cells and {p: p.stat().st_mtime_ns for p in written} == written  # nothing recomputed
    with pytest.raises(FileExistsError, match="methods"):
        run_benchmark(tmp_path / "b", budget, methods=methods[:1], progress=False)
    assert json.loads((tmp_path / "b" / "cells" / "rotated-s0.json").read_text())["true_edges"] == 9
    report = write_report(cells, budget, tmp_path / "b").read_text()  # the typed cells, rendered
    assert "| out-degree |" in report and "| rotated | value |" in report and "AUROC 1.000 [1.000, 1.000]" in report
    assert (tmp_path / "b" / "figures" / "directions_linear-probe.png").stat().st_size > 10_000
    monkeypatch.setattr("ictd_interp.analyses.methods_benchmark.run.run_benchmark", lambda *a, **k: (cells, budget))
    assert main(["methods-benchmark", "--out", str(tmp_path / "b")]) == 0  # the command's own summary line


def test_the_command_names_an_unknown_method(tmp_path, capsys):
    assert main(["methods-benchmark", "--out", str(tmp_path / "m"), "--methods", "probe,acdc"]) == 2
    assert "methods: unknown ['probe']" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_a_method_returning_nan_fails_its_cell_and_is_never_scored(tmp_path):
    from ictd_interp.analyses.methods_benchmark.evaluate import EdgeScores, Roc
    from ictd_interp.analyses.methods_benchmark.report import failure_lines
    from ictd_interp.analyses.methods_benchmark.selection import edge_methods

    ok = EdgeScores(auroc=1.0, auprc=1.0, roc=Roc([0.0, 1.0], [0.0, 1.0]))
    cells = [
        CellResult("plain", 0, 4, 2, {"good": ok, "nan-method": ok}),
        CellResult("plain", 1, 4, 2, {"good": ok}, {"nan-method": "auroc: 1 of 4 scores are not finite"}),
    ]
    assert edge_methods(cells) == ["good"]
    lines = failure_lines(cells)
    assert any("`nan-method` failed on 1 cell(s); first: plain seed 1: auroc: 1 of 4" in line for line in lines)


def test_a_method_author_narrows_the_benchmark_to_some_cases_and_seeds(tmp_path, capsys):
    from ictd_interp.analyses.methods_benchmark.run import narrowed
    from ictd_interp.cli import main

    small = narrowed("quick", ["rotated"], 1)
    assert small.cases == ("rotated",) and small.seeds == 1 and small.n_tasks == 32
    with pytest.raises(ValueError, match=r"cases: unknown \['nope'\]"):
        narrowed("quick", ["nope"])
    assert main(["methods-benchmark", "--out", str(tmp_path / "b"), "--cases", "nope"]) == 2
    assert "error: cases: unknown ['nope']; the cases are" in capsys.readouterr().err


def test_the_documented_python_route_runs_as_written(tmp_path, monkeypatch):
    """docs/methods_benchmark.md's plugin file and Python example, run as written: the structural guess scores
    below the exact reference, which finds every planted edge on ``distractors``."""
    import re
    import sys
    from pathlib import Path

    docs = (Path(__file__).parents[2] / "docs" / "methods_benchmark.md").read_text()
    plugin, example = re.findall(r"```python\n(.*?)```", docs.split("## Score your own method")[1], re.S)[:2]
    (tmp_path / "my_method.py").write_text(plugin)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(M.METHODS, "out-degree", raising=False)
    monkeypatch.delitem(sys.modules, "my_method", raising=False)
    namespace: dict = {}
    exec(compile(example, "methods_benchmark.md", "exec"), namespace)
    cells = namespace["cells"]
    assert [c.scores["activation-patching"].auroc for c in cells] == [1.0, 1.0]
    assert all(c.scores["out-degree"].auroc < 1.0 for c in cells)
    assert (tmp_path / "runs" / "mine-python" / "report.md").exists()
    M.METHODS.pop("out-degree", None)


ADVERSARIES = '''
import gc, json, os, sys, time
import ictd_interp.analyses.methods_benchmark.evaluate as evaluate
import ictd_interp.analyses.methods_benchmark.scores as scores
from ictd_interp.analyses.methods_benchmark.methods import EDGES, Method, register_method, random_ranking

# at import, in whatever process imports it: every score 1, every written number 1
evaluate.score_edges = lambda case, output: (_ for _ in ()).throw(RuntimeError("patched scorer ran"))
json.dumps = lambda *args, **kwargs: "{}"


def quitter(problem):
    sys.exit(3)


def killer(problem):
    os._exit(1)


def sleeper(problem):
    time.sleep(120)


def snoop(problem):
    """Looks for the truth in its own process: the stack's frames and every object the collector holds."""
    frames, frame = [], sys._getframe()
    while frame is not None:
        frames.append(frame.f_locals)
        frame = frame.f_back
    found = [o for o in gc.get_objects() if type(o).__name__ in ("Case", "GroundTruth")]
    if found or any("case" in f for f in frames):
        return random_ranking(problem)  # never reached: nothing of the case is in this process
    raise LookupError("no truth in this process")


def patcher(problem):
    """Makes every AUROC 1 in its own process: the scorer's is elsewhere."""
    evaluate.auroc = scores.auroc = lambda *args, **kwargs: 1.0
    return random_ranking(problem)


for f in (quitter, killer, sleeper, snoop, patcher):
    register_method(Method(f.__name__, EDGES, f, "an adversary"))
'''


def test_no_method_can_break_the_harness_or_another_methods_score(tmp_path, monkeypatch):
    """Each adversary fails its own cell, named, in its own process; the reference methods after them score
    exactly as in a run without them."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    plugin = tmp_path / "adversaries.py"
    plugin.write_text(ADVERSARIES)
    budget = BenchmarkBudget("tiny", seeds=1, n_tasks=8, cases=("distractors",))
    names = ["quitter", "killer", "sleeper", "snoop", "patcher"]
    (cell,), _ = run_benchmark(
        tmp_path / "b", budget, methods=names, plugins=[plugin], workers=2, progress=False, timeout=5
    )
    assert not set(names) & set(M.METHODS)  # this process never imported the plugin
    assert cell.failed["quitter"].endswith("raised SystemExit: 3")
    assert "its process died" in cell.failed["killer"]
    assert "did not finish within 5 s" in cell.failed["sleeper"]
    assert "raised LookupError: no truth in this process" in cell.failed["snoop"]
    from dataclasses import replace

    from ictd_interp.analyses.methods_benchmark.evaluate import (
        score_method,  # the references, scored here without any plugin
    )

    case = build_case(replace(CASES["distractors"], n_tasks=8), 0)
    alone = {
        name: score_method(M.METHODS[name], case).auroc for name in ("random", "weight-reader", "activation-patching")
    }
    assert cell.scores["patcher"].auroc == alone["random"] < 1.0  # its own patch reached no scorer
    assert {name: cell.scores[name].auroc for name in alone} == alone and cell.scores["truth"].auroc == 1.0
    report = write_report([cell], budget, tmp_path / "b").read_text()
    assert "`killer` failed on 1 cell(s)" in report


def test_edge_pruning_tests_edges_jointly_and_sees_through_a_cancelling_pair():
    """Masks trained together remove both heads of a cancelling pair at no cost, which single-edge patching scores
    as large effects: on ``cancelling`` edge pruning ranks the circuit first (AUROC > 0.9, every true edge kept)
    where exact single-edge patching is near chance."""
    from ictd_interp.analyses.methods_benchmark.evaluate import score_method

    case = build_case(CASES["cancelling"], 0)
    pruned = score_method(M.METHODS["edge-pruning"], case)
    single = score_method(M.METHODS["activation-patching"], case)
    assert pruned.auroc > 0.9 and pruned.recall == 1.0 and single.auroc < 0.6
