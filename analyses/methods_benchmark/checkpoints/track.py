"""``ictd-interp methods-benchmark --track checkpoints``: every reading scored as a classifier of what trained
checkpoints compute, on a labelled population, public or sealed; resumable, on Ray.

1. **Population** (``population``): the built-in study ``checkpoints`` (the deep recipe at 48, 24, 12 and 3 tied
   layers, at γ 0.9 and 0.7, and at 12 layers under three other objectives) trained by the studies' engine into
   ``OUT/population``; or the folders given with ``--population``: finished studies, run folders of ``ictd-interp
   train``, or folders of them (each run's checkpoints join).
   The **private split** trains the same recipes from seeds drawn from a key (``sealed.Split``): checkpoints no
   reading's rule was tuned on, since the rules are fixed in ``readings`` before the key is drawn.
2. **Records**: one Ray task per run labels its checkpoints in function space and takes every reading
   (``OUT/records/STUDY__CELL.json``; a re-run computes only the runs not yet recorded).
3. **Scores** (``scores``) and the report (``report``): ``OUT/checkpoints.md``, ``checkpoints.json`` and a figure.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Union

from ictd_interp.analyses.methods_benchmark.checkpoints.population import N_TASKS, label, run_entries
from ictd_interp.analyses.methods_benchmark.sealed import PUBLIC, Split
from ictd_interp.analyses.metrics.draws import draw_seed
from ictd_interp.analyses.metrics.readings import BY_NAME, LONG, READINGS, Contexts, score_of
from ictd_interp.analyses.studies.cells import TRAINING_OVER, read_status
from ictd_interp.analyses.studies.run import RaySession, run_study
from ictd_interp.analyses.studies.spec import StudySpec, load_spec
from ictd_interp.io import run_folder
from ictd_interp.io.progress import progress_bar
from ictd_interp.io.run_folder import claim_output
from ictd_interp.models.loading import load_checkpoint
from ictd_interp.models.registry import build_model
from ictd_interp.tasks.sampling import sample_from

STUDY = "checkpoints"  # the built-in population spec
SEALED_SEEDS = 3  # seeds per recipe on the private split
PROBE_FIT_TASKS = 64


def population_spec(split: Split = PUBLIC, seeds: Optional[int] = None) -> StudySpec:
    """The population's study: the built-in spec (``seeds`` per recipe: 0, 1, ...; default the spec's), its seeds
    drawn from the key on the private split (``seeds`` of them, default ``SEALED_SEEDS``; the k-th seed is the same
    whatever their number)."""
    spec = load_spec(STUDY)
    if split.key is None:
        return spec if seeds is None else replace(spec, seeds=list(range(seeds)))
    drawn = [split.seed(STUDY, k) % 2**31 for k in range(seeds or SEALED_SEEDS)]
    return replace(spec, seeds=drawn, source="<sealed: seeds drawn from the key>")


def chosen_readings(names: Optional[Sequence[str]]) -> list[str]:
    """The readings a track scores: ``names`` checked against ``READINGS`` (None: every one), in ``READINGS``'s
    order."""
    known = [r.name for r in READINGS]
    if names is None:
        return known
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"readings: unknown {unknown or 'none given'}; the readings are {', '.join(known)}")
    return [n for n in known if n in names]


def record_run(study: str, name: str, run: str, readings: Optional[Sequence[str]] = None) -> list[dict[str, Any]]:
    """Every checkpoint of one run (``population.run_entries``) labelled and read (``readings``: by name, None: all);
    runs in a Ray worker (its torch threads: the toolkit's policy, ``ictd_interp.io.threads``, applied when the
    first model is built)."""
    chosen = [BY_NAME[name] for name in chosen_readings(readings)]
    entries = run_entries(study, name, Path(run))
    config = run_folder.load_run_config(Path(run))
    tasks = sample_from(config.tasks, N_TASKS, seed=config.eval_seed)
    fit = sample_from(config.tasks, PROBE_FIT_TASKS, seed=draw_seed(config.eval_seed, "track_probe_fit"))
    ctx = Contexts(
        tasks, fit, sample_from(config.tasks, N_TASKS, seed=draw_seed(config.eval_seed, "readings_long"), length=LONG)
    )
    records = []
    for entry in entries:
        model = build_model(config.model) if entry.objective == "untrained" else load_checkpoint(entry.folder).model
        model.eval()
        records.append(
            {
                "run": entry.run,
                "recipe": entry.recipe,
                "step": entry.step,
                "objective": entry.objective,
                "gamma": config.tasks.gamma,
                "n_layers": model.cfg.n_layers,
                **label(model, config, tasks),
                "readings": {r.name: score_of(r, model, ctx) for r in chosen},
            }
        )
    return records


def finished_runs(folder: Path) -> list[tuple[str, Path]]:
    """``(name, run folder)`` of every finished run in ``folder``: a study's cells (``cells/*``, status done or
    trained), a run folder of ``ictd-interp train``, or a folder of run folders (finished: a ``final`` checkpoint)."""
    if (folder / "cells").is_dir():
        cells = sorted(p for p in (folder / "cells").iterdir() if p.is_dir())
        runs = [(c.name, c / "run") for c in cells if read_status(c).get("status") in TRAINING_OVER]
    else:
        candidates = [folder] if run_folder.is_run(folder) else sorted(p for p in folder.glob("*") if p.is_dir())
        runs = [(p.name, p) for p in candidates if run_folder.is_run(p) and run_folder.final_dir(p).exists()]
    if not runs:
        raise ValueError(f"{folder}: no finished runs (a study folder, a run folder or a folder of run folders)")
    return runs


def run_track(
    out_dir: Union[str, Path],
    split: Split = PUBLIC,
    studies: Sequence[Union[str, Path]] = (),
    workers: Optional[int] = None,
    address: Optional[str] = None,
    progress: bool = True,
    force: bool = False,
    seeds: Optional[int] = None,
    readings: Optional[Sequence[str]] = None,
) -> list[dict[str, Any]]:
    """Train (or resume) the population (``seeds`` per recipe: ``population_spec``), record every run not yet
    recorded, and return every record; ``readings``: score these alone (by name; None: every one)."""
    names = chosen_readings(readings)
    if "das_value" in names and importlib.util.find_spec("pyvene") is None:
        raise ValueError("the checkpoint track's das_value reading needs pyvene: pip install 'ictd-interp[interop]'")
    studies = [Path(s).resolve() for s in studies]
    for folder in studies:
        finished_runs(folder)  # a bad --population is named before anything runs
    if seeds is not None and studies:
        raise ValueError("--seeds: sizes the built-in population; a given --population has its own runs")
    request = {
        "command": "methods-benchmark",
        "track": "checkpoints",
        "population": [str(s) for s in studies],
        **({"seeds": seeds} if seeds is not None else {}),
        **({"readings": names} if readings is not None else {}),
        **({"split": split.name, "key_fingerprint": split.fingerprint()} if split.key is not None else {}),
    }
    out = claim_output(out_dir, request, force, inputs=studies)
    session = RaySession(address, workers)
    try:
        if not studies:
            run_study(population_spec(split, seeds), out / "population", session=session, progress=progress)
            studies = [out / "population"]
        _record(out / "records", studies, session, progress, None if readings is None else names)
    finally:
        session.close()
    return [r for path in sorted((out / "records").glob("*.json")) for r in json.loads(path.read_text())]


def _record(
    folder: Path, studies: Sequence[Path], session: RaySession, progress: bool, readings: Optional[list[str]]
) -> None:
    folder.mkdir(exist_ok=True)
    todo = {
        folder / f"{study.name}__{name}.json": (study.name, name, str(run), readings)
        for study in studies
        for name, run in finished_runs(study)
    }
    todo = {path: args for path, args in todo.items() if not path.exists()}
    if not todo:
        return
    ray = session.ray()
    remote = ray.remote(num_cpus=1, max_retries=1)(record_run)
    pending = {remote.remote(*args): path for path, args in todo.items()}
    bar = progress_bar(total=len(pending), disable=not progress, desc="checkpoint runs")
    try:
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            path = pending.pop(ref)
            try:
                records = ray.get(ref)
            except Exception as err:
                cause = getattr(err, "cause", None) or err
                raise ValueError(
                    f"{path.stem}: its checkpoints could not be read ({type(cause).__name__}: {cause})"
                ) from None
            path.write_text(json.dumps(records, indent=1))
            bar.update(1)
    finally:
        bar.close()
