"""``ictd-interp claims``: every claim of the paper (and this project's findings) re-derived, as one artefact.

The folder holds ``request.json`` (the budget: a folder never mixes budgets), ``studies/<name>/`` (ordinary
study folders run on Ray: re-running resumes them, finished cells are reused), ``rows/<id>.json`` (each claim
once computed, reused on a re-run), ``figures/`` and ``claims.md`` / ``claims.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Union

from ictd_interp.analyses.analyze import analyze
from ictd_interp.analyses.claims import control_rows, findings, neu_limit, theory, trained
from ictd_interp.analyses.claims.budget import BUDGETS, Budget
from ictd_interp.analyses.claims.claim import Claim
from ictd_interp.analyses.claims.claim_figures import draw
from ictd_interp.analyses.claims.claims_md import write_claims
from ictd_interp.analyses.studies.cells import DONE
from ictd_interp.analyses.studies.results import CELL, CONDITION, STATUS
from ictd_interp.analyses.studies.run import RaySession, check_address, load_study, run_study
from ictd_interp.analyses.summary.store import read_summary
from ictd_interp.io.progress import progress_bar
from ictd_interp.io.run_folder import claim_output, final_dir
from ictd_interp.models import HookedICTDTransformer

ORDER = (
    "theorem1",
    "assumption51",
    "theorem2_rate",
    "theorem2_floor",
    "theorem3",
    "emergence_weights",
    "emergence_weight_size",
    "emergence_diagonality",
    "emergence_signature",
    "finding_iteration",
    "finding_iteration_deep",
    "finding_iteration_deep_long",
    "finding_iteration_deep_spectral",
    "finding_iteration_horizon",
    "finding_baseline",
    "finding_depth_sampling",
    "finding_same_state_head",
    "control_constructions",
    "control_emergence",
    "control_acting",
)


class ClaimsInterrupted(Exception):
    """Ctrl-C during a study: its cells checkpointed, nothing computed from it; the same command resumes."""


def run_claims(
    out_dir: Union[str, Path],
    budget: Union[str, Budget] = "quick",
    workers: Optional[int] = None,
    address: Optional[str] = None,
    progress: bool = True,
    force: bool = False,
) -> list[Claim]:
    """Run (or resume) the claims report into ``out_dir``; returns its rows in order."""
    budget = _budget(budget)
    if address is not None and force:
        check_address(address)  # before a forced claim clears the folder (otherwise checked when Ray is needed)
    out_dir = claim_output(out_dir, {"command": "claims", "budget": budget.to_dict()}, force)
    session = RaySession(address, workers)  # one Ray instance for every study, started only if a cell is left
    (out_dir / "figures").mkdir(exist_ok=True)
    specs = budget.studies()
    studies = {name: out_dir / "studies" / name for name in specs}
    complete = True  # a row computed from a study with failed cells is shown, never saved: a re-run retries them
    try:
        for name, spec in specs.items():  # Ray: resumable, finished cells reused
            study = run_study(spec, studies[name], progress=progress, keep_freed_memory=True, session=session)
            if study.interrupted:  # no row is computed from a study that has not finished
                raise ClaimsInterrupted(
                    f"{out_dir}: interrupted while running the {name} study; run the same command again to continue"
                )
            complete = complete and study.failed.empty
    finally:
        session.close()
    steps = _steps(budget, studies, out_dir)
    bar = progress_bar(total=len(steps), disable=not progress, desc="claims")
    claims: dict[str, Claim] = {}
    for ids, compute, trained_rows in steps:
        cached = [_cached(out_dir, i) for i in ids]
        reused = all(c is not None for c in cached)
        rows = cached if reused else compute()
        for claim in rows:
            if not reused and (complete or not trained_rows):
                _save(out_dir, claim)
            claims[claim.id] = claim
        bar.update(1)
    bar.close()
    for claim in claims.values():  # drawn from the saved numbers: a re-run redraws without recomputing
        if claim.figure:
            draw(claim).savefig(out_dir / "figures" / f"{claim.figure}.png", dpi=120)
    ordered = [claims[i] for i in ORDER if i in claims]
    write_claims(ordered, budget, out_dir)
    return ordered


def _budget(budget: Union[str, Budget]) -> Budget:
    if isinstance(budget, Budget):
        return budget
    if budget not in BUDGETS:
        raise ValueError(f"budget: must be one of {sorted(BUDGETS)}, got {budget!r}")
    return BUDGETS[budget]


def _steps(budget: Budget, studies: dict[str, Path], out_dir: Path) -> list:
    """Each step: the claim ids it writes, a function computing those claims, and whether they come from the
    trained studies."""
    objectives = lambda: load_study(studies["objectives"])  # noqa: E731
    sampling = lambda: load_study(studies["depth_sampling"])  # noqa: E731
    controls = lambda: load_study(studies["control_objectives"])  # noqa: E731
    td = "objective=td"
    return [
        (["theorem1"], lambda: [theory.theorem1(budget)], False),
        (["control_constructions"], lambda: [control_rows.constructions(budget)], False),
        (["assumption51"], lambda: [theory.assumption(budget)], False),
        (["theorem2_rate", "theorem2_floor"], lambda: theory.theorem2(budget), False),
        (
            ["theorem3"],
            lambda: [neu_limit.theorem3(budget, HookedICTDTransformer.from_pretrained(budget.neu_model))],
            False,
        ),
        (
            ["emergence_weights"],
            lambda: [trained.weights(objectives().results, len(budget.seeds), budget.forward)],
            True,
        ),
        (
            ["emergence_weight_size"],
            lambda: [trained.weight_size(objectives().results, len(budget.seeds), theory.GAMMA)],
            True,
        ),
        (
            ["emergence_diagonality"],
            lambda: [trained.diagonality(objectives().curves, len(budget.seeds), theory.GAMMA, budget.eval_tasks())],
            True,
        ),
        (["emergence_signature"], lambda: [trained.signature(objectives().results)], True),
        (["finding_iteration"], lambda: [findings.iterated(objectives().results, td)], True),
        *(
            ([claim_id], lambda c=claim_id, f=field: [findings.iterated_shipped(getattr(budget, f), c)], False)
            for claim_id, (_, field) in findings.SHIPPED_ITERATED.items()
        ),
        (
            ["finding_baseline"],
            lambda: [findings.constant_baseline(objectives().results, td, budget.eval_tasks())],
            True,
        ),
        (
            ["finding_depth_sampling"],
            lambda: [
                findings.depth_sampling(sampling().results, "train_depths=", f"train_depths={budget.depth_sampling}")
            ],
            True,
        ),
        (["finding_same_state_head"], lambda: [_same_state(budget, studies, out_dir)], True),
        (["control_emergence"], lambda: [trained.control_weights(controls().results, len(budget.seeds))], True),
        (["control_acting"], lambda: [control_rows.acting(budget, _trained_models(controls(), td))], True),
    ]


def _trained_models(study, condition: str) -> dict[str, HookedICTDTransformer]:
    """The finished models of one condition of a study, by seed (float64: the acting row's precision)."""
    done = study.results[(study.results[CONDITION] == condition) & (study.results[STATUS] == DONE)]
    objective = condition.replace("objective=", "")
    return {
        f"trained, {objective} objective, seed {cell.rsplit('seed-', 1)[-1]}": HookedICTDTransformer.from_pretrained(
            final_dir(study.out_dir / "cells" / cell / "run"), dtype="float64"
        )
        for cell in dict.fromkeys(done[CELL])
    }


def _same_state(budget: Budget, studies: dict[str, Path], out_dir: Path) -> Claim:
    if "architectures" in studies:
        cells = sorted((studies["architectures"] / "cells").glob("*/analysis/summary.json"))
        summaries = [read_summary(p) for p in cells]
        source = f"the standard architecture trained with the standard-quick preset, {len(summaries)} seeds"
    else:
        folder = out_dir / "analysis" / "standard-quick-s0"
        path = folder / "summary.json"
        summaries = [
            read_summary(path) if path.exists() else analyze("standard-quick-s0", folder, neu=False, draw=False)
        ]  # numbers only
        source = "the shipped standard-quick-s0 (one seed; --budget full trains three)"
    return findings.same_state_head(summaries, source)


def _save(out_dir: Path, claim: Claim) -> None:
    (out_dir / "rows").mkdir(exist_ok=True)
    (out_dir / "rows" / f"{claim.id}.json").write_text(json.dumps(claim.to_dict(), indent=1, default=str))


def _cached(out_dir: Path, claim_id: str) -> Optional[Claim]:
    path = out_dir / "rows" / f"{claim_id}.json"
    if not path.exists():
        return None
    try:
        return Claim(**json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError) as err:
        raise ValueError(f"{path}: not a claims row ({err}); delete it to recompute") from None
