"""The analyses' commands over many models: ``claims`` (every claim of the paper re-derived with intervals and
verdicts) and ``methods-benchmark`` (interpretability methods scored against circuits planted exactly)."""

from __future__ import annotations

import argparse
from pathlib import Path


def claims(args: argparse.Namespace) -> int:
    from ictd_interp.analyses.claims.run import ClaimsInterrupted, run_claims

    try:
        rows = run_claims(args.out, args.budget, workers=args.workers, address=args.address, force=args.force)
    except ClaimsInterrupted as stop:
        print(stop)
        return 130
    for row in rows:
        print(f"{row.id:<24} {row.verdict}")
    print(f"{args.out}/claims.md: {len(rows)} claims")
    return 0


def methods_benchmark(args: argparse.Namespace) -> int:
    from ictd_interp.analyses.methods_benchmark.report import write_report
    from ictd_interp.analyses.methods_benchmark.run import narrowed, run_benchmark
    from ictd_interp.analyses.methods_benchmark.sealed import Split
    from ictd_interp.analyses.methods_benchmark.selection import methods_of

    split = Split.read(args.split, args.key_file)
    if args.track == "checkpoints":
        return checkpoint_track(args, split)
    given = ["--population"] * bool(args.population) + ["--readings"] * (args.readings is not None)
    if given:
        raise ValueError(f"{', '.join(given)}: only --track checkpoints takes {'them' if len(given) > 1 else 'it'}")
    names = lambda text: None if text is None else [m.strip() for m in text.split(",") if m.strip()]  # noqa: E731
    budget = narrowed(args.budget, names(args.cases), args.seeds)
    cells, budget = run_benchmark(
        args.out,
        budget,
        methods=names(args.methods),
        plugins=args.plugin,
        workers=args.workers,
        address=args.address,
        force=args.force,
        split=split,
    )
    path = write_report(cells, budget, Path(args.out))
    print(f"{path}: {len(cells)} cells, methods {', '.join(methods_of(cells))}")
    return 0


def population_name(split, population: list) -> str:
    """What the report and its figure call the checkpoints scored: the built-in population trained from the public
    seeds or from the key's, or studies the user gave (``--population``), whichever split was named."""
    if population:
        return "given"
    return "public" if split.key is None else "sealed"


def checkpoint_track(args: argparse.Namespace, split) -> int:
    """``methods-benchmark --track checkpoints``: the planted track's method flags do not apply and are refused."""
    from ictd_interp.analyses.methods_benchmark.checkpoints.report import write_report
    from ictd_interp.analyses.methods_benchmark.checkpoints.track import run_track

    given = [f"--{flag}" for flag in ("methods", "cases") if getattr(args, flag) is not None] + (
        ["--plugin"] if args.plugin else []
    )
    if given:
        raise ValueError(f"{', '.join(given)}: the checkpoint track scores its own readings; leave them out")
    readings = None if args.readings is None else [n.strip() for n in args.readings.split(",") if n.strip()]
    records = run_track(
        args.out,
        split,
        args.population,
        workers=args.workers,
        address=args.address,
        force=args.force,
        seeds=args.seeds,
        readings=readings,
    )
    path = write_report(records, Path(args.out), population_name(split, args.population))
    print(f"{path}: {len(records)} checkpoints of {len({r['run'] for r in records})} runs")
    return 0
