"""``methods-benchmark --track checkpoints`` end to end on a tiny population: every run's checkpoints labelled and
read, the report written, a re-run recomputing nothing, and the planted track's flags refused by name."""

import json

import pytest
import torch

from ictd_interp.analyses.methods_benchmark.checkpoints.population import LABELS, OBJECTIVES
from ictd_interp.analyses.metrics.readings import BY_NAME, READINGS, Contexts
from ictd_interp.analyses.studies.cells import write_status
from ictd_interp.analyses.studies.spec import load_spec
from ictd_interp.cli import main
from ictd_interp.config import ICTDConfig, TaskDistribution
from ictd_interp.models.registry import build_model
from ictd_interp.models.stylised.model import HookedICTDTransformer
from ictd_interp.tasks.sampling import sample_from
from ictd_interp.training.trainer import train
from tests.support.study import spec

pytest.importorskip("ray")


def test_the_track_labels_reads_reports_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    pop, out = tmp_path / "pop", tmp_path / "out"
    td, mc = load_spec(spec({"objective": ["td", "mc"]}, seeds=(0,), tied=True)).cells()
    train(td.config, pop / "cells" / td.name / "run", progress=False)  # a study's folder, its cell done
    write_status(pop / "cells" / td.name, "done")
    train(mc.config, tmp_path / "mine" / "mc-run", progress=False)  # a folder of `train`'s run folders
    populations = ["--population", str(pop), "--population", str(tmp_path / "mine")]
    command = ["methods-benchmark", "--track", "checkpoints", *populations, "--out", str(out)]
    assert main([*command, "--workers", "2"]) == 0
    assert "8 checkpoints of 2 runs" in capsys.readouterr().out
    assert sorted(p.name for p in (out / "records").iterdir()) == ["mine__mc-run.json", f"pop__{td.name}.json"]
    records = [r for p in sorted((out / "records").glob("*.json")) for r in json.loads(p.read_text())]
    assert sorted(r["step"] for r in records) == [0, 0, 4, 4, 8, 8, 12, 12]  # 20%, 60%, 100% of 12 steps
    assert {r["objective"] for r in records} == {"td", "mc", "untrained"} <= set(OBJECTIVES)
    assert all(r["label"] in (*LABELS, "undecided") for r in records)
    assert all(set(r["readings"]) == {x.name for x in READINGS} for r in records)
    report = (out / "checkpoints.md").read_text()
    assert all(f"| `{x.name}` |" in report for x in READINGS) and "8 checkpoints of 2 runs" in report
    assert (out / "figures" / "checkpoint_auroc.png").stat().st_size > 10_000
    written = {p: p.stat().st_mtime_ns for p in (out / "records").iterdir()}
    assert main(command) == 0
    assert {p: p.stat().st_mtime_ns for p in written} == written  # nothing recomputed
    assert main([*command, "--methods", "linear-probe"]) == 2
    assert "--methods: the checkpoint track scores its own readings" in capsys.readouterr().err
    assert main([*command, "--seeds", "2"]) == 2
    assert "--seeds: sizes the built-in population" in capsys.readouterr().err
    assert main(["methods-benchmark", "--out", str(tmp_path / "p"), "--population", str(pop)]) == 2
    assert "--population: only --track checkpoints takes it" in capsys.readouterr().err
    assert (
        main([*command[:3], "--population", str(pop), "--readings", "depth_limt", "--out", str(tmp_path / "o3")]) == 2
    )
    assert "readings: unknown ['depth_limt']" in capsys.readouterr().err
    assert main([*command[:3], "--population", str(tmp_path / "none"), "--out", str(tmp_path / "o2")]) == 2
    assert f"{tmp_path / 'none'}: no finished runs" in capsys.readouterr().err


def test_das_finds_theta_stars_value_row_and_leaves_a_checkpoint_as_it_was():
    """On θ* the DAS reading recovers the value row (effect IIA near 1); on an untrained model it finds nothing; it
    runs on a float64 copy: the model's dtype, weights and ``requires_grad`` flags are untouched."""
    pytest.importorskip("pyvene")
    dist = TaskDistribution(n_states=5, d_features=4, context_len=20, gamma=0.9)
    ctx = Contexts(sample_from(dist, 32, seed=1), sample_from(dist, 32, seed=2), sample_from(dist, 4, seed=3))
    das = BY_NAME["das_value"]
    assert das.score(HookedICTDTransformer.from_theta_star(ICTDConfig(d_features=4, n_layers=6)), ctx) > 0.99
    model = build_model(ICTDConfig(d_features=4, n_layers=4, tied=True))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert das.score(model, ctx) < das.threshold
    assert next(model.parameters()).dtype == torch.float32 and all(p.requires_grad for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()) and not model.has_any_hook()
