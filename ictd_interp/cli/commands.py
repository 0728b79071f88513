"""One function per ``ictd-interp`` sub-command: ``(args) -> exit status``. Heavy modules (torch,
TransformerLens, ``analyses``) are imported inside them, so ``--help`` answers at once."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from ictd_interp.cli.args import config_from_args
from ictd_interp.cli.configs import ConstructConfig, EvaluateConfig
from ictd_interp.cli.threads import set_threads
from ictd_interp.config.train import MODEL_CONFIGS, PRESETS, TrainConfig
from ictd_interp.io.pretrained import model_argument


def construct(args: argparse.Namespace) -> int:
    from analyses.reports.construction import construction_table

    cfg = config_from_args(ConstructConfig(), args)
    print(construction_table(cfg.model, cfg.tasks, cfg.n_tasks, cfg.seed, cfg.max_depth))
    return 0


def train(args: argparse.Namespace) -> int:
    from ictd_interp.training import run_folder
    from ictd_interp.training.trainer import resume, train

    set_threads(args.threads, args.resume)
    if args.resume and args.out and Path(args.out).resolve() != Path(args.resume).resolve():
        raise ValueError(
            f"--out {args.out} with --resume {args.resume}: a resumed run continues in its own folder; "
            "leave --out out (or train a new run with --out alone)"
        )
    if args.resume:
        stored = run_folder.load_run_config(args.resume)
        _refuse_changes(
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


def reproduce(args: argparse.Namespace) -> int:
    from ictd_interp.training import run_folder
    from ictd_interp.training.trainer import resume, train

    out, requested = Path(args.out), config_from_args(chosen_preset(args), args)
    run_dir = out / "run"
    set_threads(args.threads, run_dir)
    if run_folder.is_run(out):
        raise ValueError(
            f"{out}: is a training run folder, not a reproduce folder; analyse it with "
            f"`ictd-interp analyze {out} --out DIR` or choose another --out"
        )
    if run_folder.config_path(run_dir).exists():
        _refuse_changes(
            run_folder.load_run_config(run_dir),
            requested,
            out,
            "repeat the command with the stored options to resume or re-analyse it, or choose another --out",
        )
        run = resume(run_dir, keep_freed_memory=args.keep_freed_memory)  # an interrupted reproduce picks up
    else:
        if out.exists() and any(p.name not in ("run", "analysis") for p in out.iterdir()):
            raise ValueError(f"{out}: not empty and not a reproduce folder; choose another --out")
        run = train(requested, run_dir, keep_freed_memory=args.keep_freed_memory)
    if run.interrupted:
        print(f"{run_dir}: interrupted at step {run.step}; run the same command again to continue")
        return 130
    # the run was checked to be this request above, so its own analysis folder is refreshed (a folder from a
    # release before request.json existed included)
    _analyze(str(run_dir), str(out / "analysis"), force=True)
    return 0


def models(args: argparse.Namespace) -> int:
    """A table a person reads in a terminal: name, what it is, its level on the verdict ladder, its MSVE with
    the 95% interval over its card's held-out tasks (``--long``: every card in full; ``--json``: the listing)."""
    import json

    from ictd_interp.io.pretrained import list_pretrained

    listed = list_pretrained()
    if args.json:
        print(json.dumps(listed, indent=1))
        return 0
    if args.long:
        for m in listed:
            print(f"{m['name']}: {m['description']}\n  train: {m['command']}\n  verdict: {_level(m)}")
            for rung in (m["ladder"] or {}).get("rungs", []):
                deep = ", ".join(f"{v:.3f}" for v in rung["msve"])
                print(
                    f"  n = {rung['n']}: model at {rung['depths']} layers {deep}; every-visit MC "
                    f"{rung['tabular_mc']:.3f}, CE {rung['tabular_td']:.3f}, constant {rung['constant']:.3f}"
                )
        return 0
    rows = [("name", "what", "verdict (ladder level)", "MSVE [95%]")]
    for m in listed:
        lo_hi = m["msve_interval"]
        msve = f"{m['eval_msve']:.3f}" + (f" [{lo_hi[0]:.3f}, {lo_hi[1]:.3f}]" if lo_hi else "")
        rows.append((m["name"], m["what"], _level(m), msve))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print("\nLevels: learns in context < beats Monte Carlo < runs TD (docs/theory.md §7b); --long for every number.")
    return 0


def _level(m: dict) -> str:
    if m["level"]:
        return m["level"]
    return {True: "learns in context", False: "does not learn in context", None: "no verdict"}[m["learns_in_context"]]


def analyze(args: argparse.Namespace) -> int:
    _analyze(args.path, args.out, args.force, args.stamp)
    return 0


def evaluate(args: argparse.Namespace) -> int:
    """evaluation.json, evaluation.md and figures for a model on ``--env`` (out of distribution)."""
    from analyses.analyze import resolve
    from analyses.metrics.convergence import context_lengths
    from analyses.reports.ood import evaluate_ood, write_ood
    from ictd_interp.tasks import sample_from
    from ictd_interp.training.run_folder import claim_output

    path = model_argument(args.path)
    model, trained = resolve(path)[:2]  # the inputs are read before --out is claimed: a bad one clears nothing
    model = model.to("cpu")
    defaults = EvaluateConfig.for_model(
        model.cfg.d_features, args.env, trained.tasks.context_len, trained.tasks.gamma
    )  # the model's own context length and discount unless asked
    try:
        cfg: EvaluateConfig = config_from_args(defaults, args)
    except ValueError as err:  # the tasks' d_features is the model's, not a flag: name the model
        head, _, rest = str(err).partition(": ")
        raise ValueError(f"{path}: the model's {rest}" if head == "d_features" else err) from None
    if abs(cfg.tasks.gamma - trained.tasks.gamma) > 1e-12:
        raise ValueError(
            f"gamma: {cfg.tasks.gamma:g}, but {path} was trained at gamma = {trained.tasks.gamma:g} (its temporal "
            "shift writes gamma * v(next), so it evaluates tasks of that discount only)"
        )
    features = _load_features(cfg.features) if cfg.features else None
    try:
        tasks = sample_from(cfg.tasks, cfg.n_tasks, seed=cfg.seed, features=features)
    except ValueError as err:
        named = cfg.features and str(err).startswith("features")
        raise ValueError(f"{cfg.features}: {err}" if named else err) from None
    claim_output(
        args.out,
        {"command": "evaluate", "source": _source(args.path), **cfg.flat()},
        args.force,
        inputs=[path] + ([cfg.features] if cfg.features else []),
    )
    lengths = context_lengths(cfg.tasks.context_len)
    policy = "uniform random over actions" if cfg.env.startswith("gym:") else "none (an MRP family: no actions)"
    result = replace(
        evaluate_ood(model, tasks, cfg.depth, lengths, None if features is not None else cfg.tasks, cfg.seed),
        source=str(args.path),
        environment=cfg.env,
        policy=policy,
        settings=cfg.settings(),
    )
    write_ood(result, args.out)
    print(
        f"{args.out}/evaluation.json: {result.environment} ({result.n_states} states), sup error at "
        f"n={result.context_lengths[-1]}: model {result.context.model[-1]:.4f}, theta* of its depth "
        f"{result.context.theta_star[-1]:.4f}"
    )
    return 0


def import_incontexttd(args: argparse.Namespace) -> int:
    """Checkpoints of a model trained with the predecessor's public code: the last logged step in ``--out``,
    or (``--all-steps``) one checkpoint per logged step in ``--out/step-XXXXXX``."""
    from ictd_interp.io.checkpoint import save_checkpoint
    from ictd_interp.io.incontexttd import read_incontexttd
    from ictd_interp.models.registry import build_model
    from ictd_interp.training.run_folder import claim_output, write_request

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


def study_report(args: argparse.Namespace) -> int:
    from analyses.studies.report import write_report

    print(write_report(args.path))
    return 0


def claims(args: argparse.Namespace) -> int:
    from analyses.claims.run import ClaimsInterrupted, run_claims

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
    from analyses.methods_benchmark.report import write_report
    from analyses.methods_benchmark.run import narrowed, run_benchmark
    from analyses.methods_benchmark.sealed import Split

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
        split=Split.read(args.split, args.key_file),
    )
    path = write_report(cells, budget, Path(args.out))
    print(f"{path}: {len(cells)} cells, methods {', '.join(cells[0].scores)}")
    return 0


def _load_features(path: str):
    """A ``[states, d]`` feature matrix saved with ``numpy.save``: finite, its inner products too."""
    import numpy as np
    import torch

    try:
        with open(path, "rb") as f:
            if f.read(6) != b"\x93NUMPY":
                raise ValueError(f"{path}: not a .npy file (write the [states, d] matrix with numpy.save)")
        X = np.load(path, allow_pickle=False)
    except OSError as err:
        raise ValueError(f"{path}: cannot read a feature matrix ({err.strerror or err})") from None
    except ValueError as err:
        raise ValueError(
            str(err) if str(err).startswith(path) else f"{path}: cannot read a feature matrix (.npy) ({err})"
        ) from None
    if not (np.issubdtype(X.dtype, np.integer) or np.issubdtype(X.dtype, np.floating)):
        raise ValueError(f"{path}: the features must be real numbers, got dtype {X.dtype}")
    if not np.isfinite(X).all():
        raise ValueError(
            f"{path}: the features must be finite numbers ({int(np.size(X) - np.isfinite(X).sum())} "
            "entries are NaN or inf)"
        )
    with np.errstate(over="ignore"):  # every score <x, x'> is at most the largest squared norm (Cauchy-Schwarz)
        largest = float(np.max(np.sum(np.square(X.astype(np.float64)), axis=-1), initial=0.0))
    if not np.isfinite(largest):
        raise ValueError(
            f"{path}: the features' inner products (the attention scores) overflow float64; "
            f"largest entry {np.abs(X).max():.3g}"
        )
    return torch.as_tensor(X, dtype=torch.float64)


def _refuse_changes(stored: TrainConfig, requested: TrainConfig, folder, way_forward: str) -> None:
    changed = stored.differences(requested)
    if changed:
        raise ValueError(
            f"{folder}: holds a run with other settings ({'; '.join(changed)}); "
            f"the stored run is never reused for a different request: {way_forward}"
        )


def _source(path: str) -> str:
    """What a request was made on: a registry name as given, any other path made absolute."""
    from ictd_interp.io.pretrained import names

    return path if path in names() else str(Path(path).resolve())


def _analyze(path: str, out: str, force: bool = False, stamp: bool = True) -> None:
    from analyses.analyze import analyze, resolve
    from ictd_interp.training.run_folder import claim_output

    model = model_argument(path)
    resolved = resolve(model)  # read before --out is claimed: a model that cannot be loaded clears nothing
    request = {"command": "analyze", "source": _source(path), **({} if stamp else {"stamp": False})}
    claim_output(out, request, force, inputs=[model])
    summary = analyze(model, out, resolved=resolved, stamp=stamp)
    m, verdict = summary.metrics, summary.in_context
    once = lambda values: values[:1] if len(set(map(str, values))) == 1 else values  # noqa: E731 (tied: one layer)
    weights = (
        f"cos(V, V*) per layer {[round(c, 3) for c in once(m.cos_V)]}, signs (+,+,-) {once(m.signature_match)}, "
        if m.cos_V is not None
        else f"most TD-like head's kernel correlation {summary.circuit.max_td_kernel_correlation:.3f}, "
    )
    learns = (
        ""
        if verdict is None
        else ("; learns in context" if verdict.learns_in_context else "; does not learn in context")
    )
    print(f"{out}/summary.md: {weights}MSVE {m.eval_msve:.4f} (theta* {m.theta_star_msve:.4f}){learns}")


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
