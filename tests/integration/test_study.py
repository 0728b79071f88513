"""Studies on Ray: tables equal the cells' own files, cells equal standalone runs, faults lose nothing."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from ictd_interp.analyses.studies.run import load_study, run_study
from ictd_interp.analyses.studies.spec import StudySpecError, load_spec
from ictd_interp.analyses.summary.store import read_summary
from ictd_interp.analyses.summary.tables import flatten
from ictd_interp.training.trainer import train
from tests.support.study import ENV, _cli, _wait_for, _write_spec, assert_same, final_weights, spec, standalone

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        configure_logging=False,
    )
    yield
    ray.shutdown()


def stacked_standalone(configs, out: Path) -> list[dict]:
    """The same configs trained as one stack outside the study, on one torch thread like a study's stack."""
    from ictd_interp.training.stacked import train_stack

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_stack(configs, [out / str(i) for i in range(len(configs))], progress=False)
    finally:
        torch.set_num_threads(threads)
    return [load_file(str(out / str(i) / "final" / "model.safetensors")) for i in range(len(configs))]


def test_four_cells_equal_their_summaries_and_standalone_runs(local_ray, tmp_path):
    study = run_study(spec(), tmp_path / "s", progress=False)
    cells = load_spec(spec()).cells()
    assert (
        sorted(study.results["cell"].unique()) == sorted(c.name for c in cells)
        and (study.results["status"] == "done").all()
    )
    for cell in cells:
        folder = tmp_path / "s" / "cells" / cell.name
        summary = json.loads((folder / "analysis" / "summary.json").read_text())
        rows = study.results[study.results["cell"] == cell.name].sort_values("layer")
        assert len(rows) == 3 and rows["seed"].tolist() == [cell.config.seed] * 3
        scalars, per_layer = flatten(read_summary(folder / "analysis" / "summary.json"))
        assert rows["metrics.eval_msve"].tolist() == [summary["metrics"]["eval_msve"]] * 3
        assert rows["metrics.cos_V"].tolist() == pytest.approx(summary["metrics"]["cos_V"], abs=1e-15)
        current = [float("nan") if s[2] is None else s[2] for s in summary["metrics"]["signature"]]
        assert rows["metrics.signature.current value"].tolist() == pytest.approx(current, nan_ok=True)
        assert [row["metrics.cos_V"] for row in per_layer] == pytest.approx(summary["metrics"]["cos_V"], abs=1e-15)
        assert scalars["margin.theta_star_mean"] == pytest.approx(rows["margin.theta_star_mean"].iloc[0], abs=1e-15)
        # cells of one shape at 4 tasks per step train as one stack (2 workers: 2 stacks of 2): bit for bit the
        # same stack trained alone, and each model its own run up to float32 rounding over 12 steps
        status = json.loads((folder / "status.json").read_text())
        group = [c for c in cells if c.config.model.tied == cell.config.model.tied]
        assert status["models_in_process"] == 2 == len(group)
        stack = stacked_standalone([c.config for c in group], tmp_path / "stack" / cell.name)
        assert_same(final_weights(folder), stack[group.index(cell)])
        alone = standalone(cell.config, tmp_path / "alone" / cell.name)
        assert all(torch.allclose(alone[k], stack[group.index(cell)][k], rtol=1e-5, atol=1e-7) for k in alone)
        assert not list((folder / "analysis" / "figures").iterdir())  # the study draws across cells, not each
        assert "ictd-interp analyze RUN --out DIR" in (folder / "analysis" / "summary.md").read_text()
    curves = study.curves
    assert set(curves["step"]) == {0, 4, 8, 12} and len(curves) == 4 * 4 * 3
    assert (tmp_path / "s" / "figures" / "cosines_over_training.png").stat().st_size > 10_000
    report = (tmp_path / "s" / "study.md").read_text()
    assert "Student-t 95% interval" in report and "bootstrap" not in report
    assert_same_tables(load_study(tmp_path / "s"), study)

    # re-running recomputes nothing: the final checkpoints are untouched
    finals = sorted((tmp_path / "s" / "cells").glob("*/run/final/model.safetensors"))
    stamps = [p.stat().st_mtime_ns for p in finals]
    run_study(spec(), tmp_path / "s", progress=False)
    assert [p.stat().st_mtime_ns for p in finals] == stamps


def test_cells_of_other_conditions_share_a_stack_and_a_gpu_units_analyses_run_apart(local_ray, tmp_path, monkeypatch):
    """Cells that differ in learning rate and step count (not only seed) are stacked together; with analyses apart
    (what a GPU unit does, here on the CPU) each unit leaves its cells ``trained`` and CPU tasks analyse them, and a
    cell found ``trained`` on a re-run is analysed without being trained again."""
    import ictd_interp.analyses.studies.run as study_run

    monkeypatch.setattr(study_run, "analyses_apart", lambda device: True)
    grid = {"lr": [1e-3, 1e-2], "steps": [8, 12]}
    study = run_study(spec(grid=grid, seeds=(0,)), tmp_path / "s", progress=False)
    assert (study.results["status"] == "done").all() and study.results["cell"].nunique() == 4
    statuses = {c.name: json.loads((c / "status.json").read_text()) for c in (tmp_path / "s" / "cells").iterdir()}
    assert all(s["analysis_time"] > 0 and s["models_in_process"] == 2 for s in statuses.values())
    together = {tuple(sorted(s["trained_in"][-1]["cells"])) for s in statuses.values()}
    assert len(together) == 2 and all(len({c.rsplit("__seed", 1)[0] for c in unit}) == 2 for unit in together)
    cell = next((tmp_path / "s" / "cells").iterdir())
    final = cell / "run" / "final" / "model.safetensors"
    stamp = final.stat().st_mtime_ns
    shutil.rmtree(cell / "analysis")
    (cell / "status.json").write_text(json.dumps({**statuses[cell.name], "status": "trained"}))
    run_study(spec(grid=grid, seeds=(0,)), tmp_path / "s", progress=False)
    assert (cell / "analysis" / "summary.json").exists() and final.stat().st_mtime_ns == stamp
    assert json.loads((cell / "status.json").read_text())["status"] == "done"


@pytest.mark.slow  # 31 s; the stack of objectives itself runs by default in test_model_stack.py
def test_a_study_drawing_on_the_device_stacks_cells_of_other_objectives(local_ray, tmp_path):
    """``--sampler device`` (a fixed setting of every cell): cells of other objectives share a stack, and each
    stacked model reaches what the same configs reach as one stack outside the study."""
    grid = {"lr": [1e-3, 1e-2], "objective": ["td", "mc"]}  # two workers: a stack per rate, of both objectives
    data = spec(grid=grid, seeds=(0,), sampler="device", mc_horizon=4)
    study = run_study(data, tmp_path / "s", progress=False)
    assert (study.results["status"] == "done").all() and study.results["cell"].nunique() == 4
    configs = {c.name: c.config for c in load_spec(data).cells()}
    assert {c.sampler for c in configs.values()} == {"device"}
    statuses = [json.loads((tmp_path / "s" / "cells" / name / "status.json").read_text()) for name in configs]
    units = {tuple(s["trained_in"][-1]["cells"]) for s in statuses}
    assert all(s["models_in_process"] == 2 for s in statuses) and len(units) == 2
    for unit in units:  # both objectives in each stack, each model as the same configs stacked outside the study
        assert {configs[name].objective for name in unit} == {"td", "mc"}
        alone = stacked_standalone([configs[name] for name in unit], tmp_path / unit[0])
        for name, weights in zip(unit, alone):
            assert_same(final_weights(tmp_path / "s" / "cells" / name), weights)


def test_a_planned_study_runs_unit_by_unit_without_ray_and_resumes_per_unit(tmp_path):
    """``--plan N`` fixes the split (DIR/units.json); each ``--unit K`` (a SLURM array's job) trains its stack in
    its own process without Ray, bit for bit the same stack trained alone; a re-run unit redoes nothing, a unit
    out of range and another plan once cells started are refused, and the report follows from the cells."""
    from ictd_interp.analyses.studies.plan import plan_units, run_unit

    study, out = load_spec(spec(grid={"lr": [1e-3, 1e-2]})), tmp_path / "s"
    units = plan_units(study, out, 2)
    assert json.loads((out / "units.json").read_text())["units"] == units and len(units) == 2
    assert plan_units(study, out, 2) == units  # the same plan again: nothing changes
    for k in range(2):
        assert [s["status"] for s in run_unit(study, out, k)] == ["done", "done"]
    cells = {c.name: c for c in study.cells()}
    stack = stacked_standalone([cells[n].config for n in units[1]], tmp_path / "alone")
    for name, weights in zip(units[1], stack):
        assert_same(final_weights(out / "cells" / name), weights)
    final = out / "cells" / units[0][0] / "run" / "final" / "model.safetensors"
    stamp = final.stat().st_mtime_ns
    run_unit(study, out, 0)
    assert final.stat().st_mtime_ns == stamp
    cell = out / "cells" / units[0][0]  # left trained by a GPU unit: the unit's job analyses it, trains nothing
    shutil.rmtree(cell / "analysis")
    (cell / "status.json").write_text(
        json.dumps({**json.loads((cell / "status.json").read_text()), "status": "trained"})
    )
    assert [s["status"] for s in run_unit(study, out, 0)] == ["done", "done"]
    assert (cell / "analysis" / "summary.json").exists() and final.stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match=r"--unit: 2 is not a unit of .*units.json \(0 to 1\)"):
        run_unit(study, out, 2)
    with pytest.raises(ValueError, match="holds a plan of another request .*cells have started"):
        plan_units(study, out, 4)
    done = run_study(study, out, progress=False)  # every cell done: the report only, no Ray started
    assert (done.results["status"] == "done").all() and (out / "study.md").exists()


def assert_same_tables(a, b) -> None:
    pd.testing.assert_frame_equal(a.results, b.results)
    pd.testing.assert_frame_equal(a.curves, b.curves)


def test_a_diverging_cell_is_reported_failed_and_the_others_finish(local_ray, tmp_path):
    study = run_study(spec(grid={"lr": [3e-3, 1e6]}, seeds=[0], optimizer="sgd"), tmp_path / "s", progress=False)
    status = study.results.drop_duplicates("cell").set_index("cell")
    assert status.loc["lr-0.003__seed-0", "status"] == "done"
    assert status.loc["lr-1000000.0__seed-0", "status"] == "failed"
    assert "TrainingDiverged: non-finite loss" in status.loc["lr-1000000.0__seed-0", "error"]
    assert "lr-1000000.0__seed-0" in (tmp_path / "s" / "study.md").read_text()


def test_a_model_diverging_in_a_stack_fails_alone_and_the_others_of_its_stack_finish(local_ray, tmp_path):
    # sgd at lr 0.6: seed 3 diverges at step 7, seeds 1 and 5 do not; 2 workers: seed 1 alone, seeds 3 and 5 stacked
    study = run_study(
        spec(grid={"tied": [True]}, seeds=[1, 3, 5], optimizer="sgd", lr=0.6), tmp_path / "s", progress=False
    )
    status = study.results.drop_duplicates("cell").set_index("cell")["status"].to_dict()
    assert status == {"tied-True__seed-1": "done", "tied-True__seed-3": "failed", "tied-True__seed-5": "done"}
    run = tmp_path / "s" / "cells" / "tied-True__seed-5" / "run"
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m.get("models_in_process", 1) for m in logged] == [1, 2, 1, 1]  # stacked to step 4, then alone
    stack = ["tied-True__seed-3", "tied-True__seed-5"]
    assert json.loads((run.parent / "status.json").read_text())["trained_in"] == [
        {"cells": stack, "from_step": 0, "until_step": 4},
        {"cells": stack[1:], "from_step": 4, "until_step": 12},
    ]
    error = json.loads((tmp_path / "s" / "cells" / "tied-True__seed-3" / "status.json").read_text())["error"]
    assert error.startswith("TrainingDiverged: non-finite loss")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _killed(cell: Path) -> None:
    """The cell's status as a worker killed mid-stretch leaves it: running, under a pid no longer alive."""
    status = json.loads((cell / "status.json").read_text())
    status["trained_in"][-1]["until_step"] = None
    (cell / "status.json").write_text(json.dumps({**status, "status": "running", "pid": _dead_pid()}))


def test_a_stack_killed_between_its_first_checkpoints_restarts_together_and_a_retry_never_redoes_a_done_cell(tmp_path):
    from ictd_interp.analyses.studies.cells import run_stacked_cells
    from ictd_interp.training.stacked import train_stack

    cells = load_spec(spec(grid={"tied": [True]})).cells()
    dirs, configs = [tmp_path / c.name for c in cells], [c.config.to_dict() for c in cells]
    names, stop = [c.name for c in cells], str(tmp_path / "STOP")
    polls = iter(range(10**6))
    train_stack([c.config for c in cells], [d / "run" for d in dirs], progress=False, stop=lambda: next(polls) >= 4)
    shutil.rmtree(dirs[1] / "run" / "checkpoints")  # killed after cell 0 wrote step 4, before cell 1 did
    for d in dirs:
        (d / "status.json").write_text(json.dumps({"trained_in": [{"cells": names, "from_step": 0, "until_step": 4}]}))
        _killed(d)
    assert [s["status"] for s in run_stacked_cells([str(d) for d in dirs], configs, stop)] == ["done", "done"]
    stack = stacked_standalone([c.config for c in cells], tmp_path / "alone")
    for d, weights in zip(dirs, stack):  # both from step 0, together: bit for bit the uninterrupted stack
        assert_same(final_weights(d), weights)
        assert json.loads((d / "status.json").read_text())["trained_in"] == [
            {"cells": names, "from_step": 0, "until_step": 12}
        ]
    assert (dirs[0] / "superseded_run" / "checkpoints" / "step_0000004").exists()  # kept, never read

    final = dirs[0] / "run" / "final" / "model.safetensors"
    stamp, done = final.stat().st_mtime_ns, json.loads((dirs[0] / "status.json").read_text())
    shutil.rmtree(dirs[1] / "analysis")
    _killed(dirs[1])  # killed during cell 1's analysis, after cell 0 was done: Ray retries the unit
    assert [s["status"] for s in run_stacked_cells([str(d) for d in dirs], configs, stop)] == ["done", "done"]
    assert final.stat().st_mtime_ns == stamp and json.loads((dirs[0] / "status.json").read_text()) == done
    assert (dirs[1] / "analysis" / "summary.json").exists()
    redone = json.loads((dirs[1] / "status.json").read_text())
    assert redone["trained_in"] == [{"cells": names, "from_step": 0, "until_step": 12}]  # trained nothing: no stretch
    assert redone["models_in_process"] == 2 and redone["earlier_attempts"]  # as its stack trained it; the kill said


def test_a_cell_trained_before_trained_in_was_recorded_continues_alone_with_an_unknown_first_stretch(tmp_path):
    from ictd_interp.analyses.studies.cells import last_unit, run_cell

    cell = load_spec(spec(grid={"tied": [True]}, seeds=[0])).cells()[0]
    polls = iter(range(10**6))
    train(cell.config, tmp_path / "c" / "run", progress=False, stop=lambda: next(polls) >= 4)
    (tmp_path / "c" / "status.json").write_text(json.dumps({"status": "interrupted", "models_in_process": 2}))
    assert last_unit(tmp_path / "c") == ["c"]  # its stack unknown: it continues alone
    assert run_cell(str(tmp_path / "c"), cell.config.to_dict(), str(tmp_path / "STOP"))["trained_in"] == [
        {"cells": None, "from_step": 0, "until_step": 4},
        {"cells": ["c"], "from_step": 4, "until_step": 12},
    ]


def test_a_changed_spec_under_an_existing_folder_is_refused(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "spec.json").write_text(json.dumps(load_spec(spec()).to_dict()))
    with pytest.raises(StudySpecError, match=r"seeds: \[0, 1\] -> \[0, 1, 2\]"):
        run_study(spec(seeds=[0, 1, 2]), tmp_path / "s", progress=False)


@pytest.mark.slow  # 31 s; the stack's killed worker (the next test) is the same path with more to resume
def test_killed_worker_resumes_the_cell_to_the_same_weights(tmp_path):
    data = spec(grid={"n_layers": [3]}, seeds=[0], steps=300, checkpoint_every=50, eval_every=150)
    out = tmp_path / "s"
    proc = _cli("study", str(_write_spec(tmp_path / "k.toml", data)), "--out", str(out), "--workers", "1")
    cell = out / "cells" / "n_layers-3__seed-0"
    _wait_for(lambda: (cell / "run" / "checkpoints" / "step_0000050").exists())
    pid = json.loads((cell / "status.json").read_text())["pid"]
    os.kill(pid, signal.SIGKILL)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    status = json.loads((cell / "status.json").read_text())
    assert status["status"] == "done" and status["pid"] != pid  # a new worker finished it
    assert [a["pid"] for a in status["earlier_attempts"]] == [pid] and "died" in status["earlier_attempts"][0][
        "outcome"
    ]
    assert f"its worker process {pid} died" in output  # the reason, beside Ray's own retry message
    assert_same(final_weights(cell), standalone(load_spec(data).cells()[0].config, tmp_path / "alone"))


@pytest.mark.slow  # 35-45 s; a killed cell's worker (above) and a stopped stack (test_model_stack.py) run by default
def test_a_killed_stacks_worker_resumes_every_cell_of_the_stack_to_the_same_weights(tmp_path):
    data = spec(grid={"n_layers": [3]}, seeds=[0, 1], steps=300, checkpoint_every=50, eval_every=150)
    out = tmp_path / "s"
    proc = _cli("study", str(_write_spec(tmp_path / "k.toml", data)), "--out", str(out), "--workers", "1")
    cells = [out / "cells" / f"n_layers-3__seed-{s}" for s in (0, 1)]
    _wait_for(lambda: all((c / "run" / "checkpoints" / "step_0000050").exists() for c in cells))
    pids = {json.loads((c / "status.json").read_text())["pid"] for c in cells}
    assert len(pids) == 1  # one worker process steps both cells
    os.kill(pids.pop(), signal.SIGKILL)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    stack = stacked_standalone([c.config for c in load_spec(data).cells()], tmp_path / "alone")
    for cell, weights in zip(cells, stack):
        status = json.loads((cell / "status.json").read_text())
        assert status["status"] == "done" and status["models_in_process"] == 2 and status["earlier_attempts"]
        assert_same(final_weights(cell), weights)  # resumed together: bit for bit the uninterrupted stack


@pytest.mark.slow  # 24 s; grouping.stack_groups' ``previous`` rule is held in tests/unit/test_model_stack.py
def test_a_stopped_study_resumed_on_fewer_workers_keeps_each_cells_stack_and_its_weights(
    local_ray, tmp_path, monkeypatch
):
    import threading

    data = spec(grid={"tied": [True]}, seeds=[0, 1, 2, 3], steps=1000, checkpoint_every=50, eval_every=500)
    out, names = tmp_path / "s", [f"tied-True__seed-{s}" for s in range(4)]
    cells = [out / "cells" / name for name in names]
    first = threading.Thread(target=run_study, args=(data, out), kwargs={"progress": False})
    first.start()  # 2 workers: stacks {0, 1} and {2, 3}
    _wait_for(lambda: all((c / "run" / "checkpoints" / "step_0000050").exists() for c in cells))
    (out / "STOP").touch()
    first.join(timeout=300)
    stopped = [json.loads((c / "status.json").read_text()) for c in cells]
    assert [s["status"] for s in stopped] == ["interrupted"] * 4
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 1.0})  # anew, one worker would stack all four
    run_study(data, out, progress=False)
    for cell, before, group in zip(cells, stopped, [names[:2], names[:2], names[2:], names[2:]]):
        (stretch,), path = before["trained_in"], json.loads((cell / "status.json").read_text())["trained_in"]
        assert stretch["cells"] == group and stretch["from_step"] == 0 and 50 <= stretch["until_step"] < 1000
        assert path == [stretch, {"cells": group, "from_step": stretch["until_step"], "until_step": 1000}]
    for group in (cells[:2], cells[2:]):  # bit for bit the same stacks trained without a stop
        configs = [c.config for c in load_spec(data).cells() if c.name in {g.name for g in group}]
        for cell, weights in zip(group, stacked_standalone(configs, tmp_path / "alone" / group[0].name)):
            assert_same(final_weights(cell), weights)


@pytest.mark.slow  # 26 s: starts a Ray head of its own; every other study test runs on a local Ray instance
def test_a_real_cluster_on_loopback(tmp_path):
    port = 6400 + os.getpid() % 500
    ray_bin = Path(sys.executable).parent / "ray"
    head = subprocess.Popen(
        [
            str(ray_bin),
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--block",
        ],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(3)
        proc = _cli(
            "study",
            str(_write_spec(tmp_path / "c.toml", spec(seeds=[0]))),
            "--out",
            str(tmp_path / "s"),
            "--address",
            f"127.0.0.1:{port}",
        )
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, output
        assert "2/2 cells done" in output
    finally:
        head.terminate()  # stops only the head this test started
        head.wait(timeout=60)


def test_sparse_curves_warn_and_get_markers(tmp_path, monkeypatch):
    import warnings as w

    import ictd_interp.analyses.studies.run as study_run
    from ictd_interp.analyses.studies import report as study_report

    data = pd.DataFrame(
        {"condition": ["c"] * 4, "cell": ["x", "x", "y", "y"], "step": [0, 10, 0, 10], "v": [1.0, 0.5, 1.2, 0.6]}
    )
    fig = study_report.Figure()
    ax = fig.add_subplot()
    study_report.band_lines(ax, data, "step", "v")
    assert ax.get_lines()[0].get_marker() == "o"  # two evaluations: markers, not a bare straight line

    def no_ray(*args, **kwargs):
        raise RuntimeError("no cells run here")

    monkeypatch.setattr(study_run, "_run_on_ray", no_ray)
    with w.catch_warnings(record=True) as caught:
        w.simplefilter("always")
        with pytest.raises(RuntimeError, match="no cells"):  # only the warning, given before any cell runs
            run_study(spec(steps=4, eval_every=8), tmp_path / "s", progress=False)
    assert any("steps < eval_every" in str(c.message) for c in caught)


def test_an_unreachable_ray_address_is_refused_before_any_folder_is_touched(tmp_path):
    """Ray retries an unreachable head for minutes; the address is checked first, in one line, and a forced
    claims folder holding earlier results keeps them."""
    from ictd_interp.analyses.claims.run import run_claims
    from ictd_interp.analyses.studies.run import check_address

    with pytest.raises(ValueError, match="expected HOST:PORT"):
        check_address("localhost")
    with pytest.raises(ValueError, match=r"--address 127.0.0.1:1: no Ray head answers there"):
        check_address("127.0.0.1:1")
    out = tmp_path / "claims"
    out.mkdir()
    (out / "request.json").write_text('{"command": "claims", "budget": "an older one"}')
    (out / "claims.md").write_text("earlier report")
    with pytest.raises(ValueError, match="no Ray head answers there"):
        run_claims(out, "quick", address="127.0.0.1:1", force=True)
    assert (out / "claims.md").read_text() == "earlier report"
