"""The analyses' commands on one model: ``construct`` (θ*'s error against depth), ``reproduce`` (train, then
analyse), ``analyze`` (every metric and figure) and ``evaluate`` (a model and θ* on another MRP source). Heavy
modules are imported inside each, so ``--help`` answers at once."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from ictd_interp.analyses.commands.configs import ConstructConfig, EvaluateConfig
from ictd_interp.cli.args import config_from_args
from ictd_interp.cli.commands import chosen_preset, refuse_changes
from ictd_interp.cli.threads import set_threads
from ictd_interp.io.pretrained import model_argument


def construct(args: argparse.Namespace) -> int:
    from ictd_interp.analyses.reports.construction import construction_table

    cfg = config_from_args(ConstructConfig(), args)
    print(construction_table(cfg.model, cfg.tasks, cfg.n_tasks, cfg.seed, cfg.max_depth))
    return 0


def reproduce(args: argparse.Namespace) -> int:
    from ictd_interp.io import run_folder
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
        refuse_changes(
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


def analyze(args: argparse.Namespace) -> int:
    _analyze(args.path, args.out, args.force, args.stamp)
    return 0


def evaluate(args: argparse.Namespace) -> int:
    """evaluation.json, evaluation.md and figures for a model on ``--env`` (out of distribution)."""
    from ictd_interp.analyses.analyze import resolve
    from ictd_interp.analyses.metrics.convergence import context_lengths
    from ictd_interp.analyses.metrics.ladder import ladder_brief
    from ictd_interp.analyses.reports.ood import evaluate_ood, write_ood
    from ictd_interp.io.run_folder import claim_output
    from ictd_interp.tasks import sample_from

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
        + (f"; {ladder_brief(result.in_context.ladder)}" if result.in_context and result.in_context.ladder else "")
    )
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


def _source(path: str) -> str:
    """What a request was made on: a registry name as given, any other path made absolute."""
    from ictd_interp.io.pretrained import names

    return path if path in names() else str(Path(path).resolve())


def _analyze(path: str, out: str, force: bool = False, stamp: bool = True) -> None:
    from ictd_interp.analyses.analyze import analyze, resolve
    from ictd_interp.analyses.metrics.ladder import ladder_brief
    from ictd_interp.io.run_folder import claim_output

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
    first = "learns in context" if verdict and verdict.learns_in_context else "does not learn in context"
    level = ladder_brief(verdict.ladder) if verdict is not None and verdict.ladder is not None else None
    learns = "" if verdict is None else f"; {level or verdict.level or first}"
    print(f"{out}/summary.md: {weights}MSVE {m.eval_msve:.4f} (theta* {m.theta_star_msve:.4f}){learns}")
