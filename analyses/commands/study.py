"""``ictd-interp study``: a spec's cells on Ray (local or a cluster), or planned into units for a cluster scheduler
and run one unit per job (``--plan``, ``--unit``), or listed (``--dry-run``)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path


def study(args: argparse.Namespace) -> int:
    from ictd_interp.analyses.studies.run import run_study
    from ictd_interp.analyses.studies.spec import load_spec

    spec = load_spec(args.spec)  # every cell's config built, so a bad spec fails here too
    for name in ("device", "sampler"):  # set for every cell, over the spec's
        if getattr(args, name) is not None:
            spec = replace(spec, fixed={**spec.fixed, name: getattr(args, name)})
    if args.dry_run:
        print(f"{spec.name}: {spec.description}")
        print(f"preset {spec.preset}; fixed {spec.fixed or 'nothing'}; seeds {spec.seeds}")
        for condition in spec.conditions():
            print(f"  {', '.join(f'{k}={v}' for k, v in condition.items()) or '(the preset)'}: {len(spec.seeds)} runs")
        print(f"{len(spec.cells())} runs in all; measured: {spec.measured or 'not yet'}")
        return 0
    if args.out is None:
        raise ValueError("--out: a study folder is required to run a study (--dry-run lists its cells without one)")
    if args.plan is not None or args.unit is not None:
        return _study_unit(args, spec)

    result = run_study(
        spec, args.out, address=args.address, workers=args.workers, keep_freed_memory=args.keep_freed_memory
    )
    cells = result.results.drop_duplicates("cell")
    print(
        f"{result.out_dir}/study.md: {int((cells['status'] == 'done').sum())}/{len(cells)} cells done, "
        f"{int((cells['status'] == 'failed').sum())} failed"
    )
    if result.interrupted:
        print(f"{result.out_dir}: interrupted; run the same command again to continue")
        return 130
    return 0


def _study_unit(args: argparse.Namespace, spec) -> int:
    """``--plan N`` (the split into units, for a scheduler) or ``--unit K`` (one unit, here, without Ray)."""
    from ictd_interp.analyses.studies.plan import plan_units, run_unit

    out = Path(args.out)
    if args.plan is not None:
        units = plan_units(spec, out, args.plan)
        print(
            f"{out}/units.json: {len(units)} units ({', '.join(str(len(u)) for u in units)} cells); run each with "
            f"`ictd-interp study {args.spec} --out {out} --unit K` for K in 0..{len(units) - 1} (a SLURM array: "
            f"--array=0-{len(units) - 1}), then the same command without --unit for the report"
        )
        return 0
    statuses = [s["status"] for s in run_unit(spec, out, args.unit, args.keep_freed_memory)]
    counts = ", ".join(f"{statuses.count(s)} {s}" for s in sorted(set(statuses)))
    print(f"{out}: unit {args.unit}: {len(statuses)} cells: {counts}")
    return 0 if all(s == "done" for s in statuses) else 1


def study_report(args: argparse.Namespace) -> int:
    from ictd_interp.analyses.studies.report import write_report

    print(write_report(args.path))
    return 0
