"""The core's sub-commands, one function each: ``(args) -> exit status`` (``train``, ``models``,
``import-incontexttd``), and what ``reproduce`` above shares with ``train`` (the preset chosen, a stored run never
reused for another request). Heavy modules (torch) are imported inside them, so ``--help`` answers at once."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from ictd_interp.cli.args import config_from_args
from ictd_interp.cli.threads import set_threads
from ictd_interp.config.train import MODEL_CONFIGS, PRESETS, TrainConfig


def train(args: argparse.Namespace) -> int:
    from ictd_interp.io import run_folder
    from ictd_interp.training.trainer import resume, train

    set_threads(args.threads, args.resume)
    if args.resume and args.out and Path(args.out).resolve() != Path(args.resume).resolve():
        raise ValueError(
            f"--out {args.out} with --resume {args.resume}: a resumed run continues in its own folder; "
            "leave --out out (or train a new run with --out alone)"
        )
    if args.resume:
        stored = run_folder.load_run_config(args.resume)
        refuse_changes(
            stored,
            config_from_args(stored, args),
            args.resume,
            "resume without changing options, or train a new run with --out NEW_DIR",
        )
        run = resume(args.resume, keep_freed_memory=args.keep_freed_memory)
    else:
        if not args.out:
            raise ValueError("--out: a run directory is required (or --resume DIR)")
        run = train(config_from_args(chosen_preset(args), args), args.out, keep_freed_memory=args.keep_freed_memory)
    import torch

    state = (
        "interrupted; continue with `ictd-interp train --resume "
        f"{run.out_dir} --threads {torch.get_num_threads()}`"
        f" (the same threads: a bit-exact resume needs them)"
        if run.interrupted
        else "finished"
    )
    print(f"{run.out_dir}: {state} at step {run.step}")
    return 130 if run.interrupted else 0


def models(args: argparse.Namespace) -> int:
    """A table a person reads in a terminal: name, what it is, its level on the verdict ladder, its MSVE with
    the 95% interval over its card's held-out tasks (``--long``: every card in full; ``--json``: the listing)."""
    import json

    from ictd_interp.io.pretrained import list_pretrained
    from ictd_interp.io.text import shown

    listed = list_pretrained()
    if args.json:
        print(json.dumps(listed, indent=1))
        return 0
    if args.long:
        for m in listed:
            print(f"{m['name']}: {m['description']}\n  train: {m['command']}\n  verdict: {_level(m)}")
            for rung in (m["ladder"] or {}).get("rungs", []):
                deep = ", ".join(shown(v) for v in rung["msve"])
                top = f", Bayes {rung['bayes']:.3f}" if "bayes" in rung else ""
                gap = f"; gap to Bayes closed {rung['gap_closed']:.2f}" if "gap_closed" in rung else ""
                print(
                    f"  n = {rung['n']}: model at {rung['depths']} layers {deep}; every-visit MC "
                    f"{rung['tabular_mc']:.3f}, CE {rung['tabular_td']:.3f}{top}, constant {rung['constant']:.3f}{gap}"
                )
        return 0
    rows = [("name", "what", "ladder level", "MSVE [95%]")]
    for m in listed:
        lo_hi = m["msve_interval"]
        msve = f"{m['eval_msve']:.3f}" + (f" [{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]" if lo_hi else "")
        rows.append((m["name"], m["what"], _level(m), msve))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    widths[1] = min(widths[1], WHAT_WIDTH)  # the description wraps: the table fits 100 columns
    for i, row in enumerate(rows):
        what = textwrap.wrap(row[1], widths[1]) or [""]
        print("  ".join(cell.ljust(w) for cell, w in zip((row[0], what[0], *row[2:]), widths)).rstrip())
        for more in what[1:]:
            print((" " * (widths[0] + 2) + more).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print("\nLevels (docs/theory.md §7b): learns in context; beats Monte Carlo; runs TD, which need not beat")
    print("Monte Carlo at the trained depth (it gets there deeper). --long: every number.")
    return 0


WHAT_WIDTH = 30  # the `models` table's description column, wrapped


def _level(m: dict) -> str:
    if m["level"]:
        return m["level"]
    return {True: "learns in context", False: "does not learn in context", None: "no verdict"}[m["learns_in_context"]]


def import_incontexttd(args: argparse.Namespace) -> int:
    """Checkpoints of a model trained with the predecessor's public code: the last logged step in ``--out``,
    or (``--all-steps``) one checkpoint per logged step in ``--out/step-XXXXXX``."""
    from ictd_interp.io.checkpoint import save_checkpoint
    from ictd_interp.io.incontexttd import read_incontexttd
    from ictd_interp.io.run_folder import claim_output, write_request
    from ictd_interp.models.registry import build_model

    run = read_incontexttd(args.path, n_layers=args.n_layers, gamma=args.gamma, activation=args.activation)
    request = {
        "command": "import-incontexttd",
        "source": str(Path(args.path).resolve()),
        "n_layers": args.n_layers,
        "gamma": args.gamma,
        "activation": args.activation,
        "all_steps": args.all_steps,
    }
    out = claim_output(args.out, request, args.force, inputs=[args.path])
    chosen = range(len(run.steps)) if args.all_steps else [len(run.steps) - 1]
    model = build_model(run.config)
    for i in chosen:
        model.load_state_dict(run.weights[i])
        folder = out / f"step-{run.steps[i]:06d}" if args.all_steps else out
        save_checkpoint(
            model, folder, imported_from=run.source, logged_step=run.steps[i], task=run.task, their_logged=run.logged[i]
        )
    write_request(out, request)  # a checkpoint written into --out itself replaced the folder
    where = (
        f"{len(chosen)} checkpoints in {out}/step-*"
        if args.all_steps
        else f"the checkpoint of logged step {run.steps[-1]} in {out}"
    )
    print(
        f"{args.path}: {run.source['mode']} model, d={run.config.d_features}, L={run.config.n_layers}, "
        f"gamma={run.config.gamma}, {run.config.activation}: {where}"
    )
    return 0


def refuse_changes(stored: TrainConfig, requested: TrainConfig, folder, way_forward: str) -> None:
    from ictd_interp.io.run_folder import other_request

    changed = stored.differences(requested)
    if changed:
        raise ValueError(other_request(folder, "a training run", changed, way_forward))


# an architecture's own quick preset, from the registry (one without uses "quick")
ARCHITECTURE_PRESETS = {a: cls.quick_preset for a, cls in MODEL_CONFIGS.items() if cls.quick_preset}


def chosen_preset(args):
    """``--preset``, or the quick preset of ``--architecture``; a preset of another architecture than the one
    asked for is refused (it would silently bring that architecture's settings)."""
    architecture = getattr(args, "architecture", None)
    name = args.preset or ARCHITECTURE_PRESETS.get(architecture, "quick")
    preset = PRESETS[name]
    if args.preset and architecture and architecture != preset.architecture and architecture in ARCHITECTURE_PRESETS:
        raise ValueError(
            f"--preset {name} is a {preset.architecture} preset; with --architecture "
            f"{architecture} use --preset {ARCHITECTURE_PRESETS[architecture]} (or leave --preset out)"
        )
    return preset
