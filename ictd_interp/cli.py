"""``ictd-interp`` command line: the one module that composes the core with ``analyses`` and ``hooks``.

Heavy modules (torch, TransformerLens, analyses) are imported inside the commands, so ``--help``
answers at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Optional

from ictd_interp.cli_args import add_config_args, config_from_args
from ictd_interp.config import ICTDConfig
from ictd_interp.task_distribution import TaskDistribution
from ictd_interp.train_config import PRESETS, TrainConfig


@dataclass
class ConstructConfig:
    """theta* on randomized Boyan chains: error versus depth.

    Args:
        n_states: states per Boyan chain.
        d_features: feature dimension (one-hot needs d_features >= n_states).
        feature_kind: ``onehot`` (a diagonal kernel when scaled) or ``uniform``.
        feature_scale: inverse temperature of the softmax kernel.
        context_len: ``n``, transitions in the context.
        gamma: discount.
        max_depth: deepest model; depths 1, 2, 4, ... up to it are reported.
        form: ``tsm`` or ``dual``.
        n_tasks: tasks averaged over.
        seed: seeds the tasks.
    """

    n_states: int = 10
    d_features: int = 10
    feature_kind: str = "onehot"
    feature_scale: float = 3.0
    context_len: int = 200
    gamma: float = 0.9
    max_depth: int = 64
    form: str = "tsm"
    n_tasks: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        _ = self.tasks  # validates the task settings
        for name in ("max_depth", "n_tasks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be positive, got {getattr(self, name)}")

    @property
    def tasks(self) -> TaskDistribution:
        return TaskDistribution(n_states=self.n_states, d_features=self.d_features, context_len=self.context_len,
                                gamma=self.gamma, feature_kind=self.feature_kind, feature_scale=self.feature_scale)

    @property
    def model(self) -> ICTDConfig:
        return ICTDConfig(d_features=self.d_features, n_layers=self.max_depth, gamma=self.gamma,
                          form=self.form, dtype="float64")


@dataclass
class EvaluateConfig:
    """Out-of-distribution evaluation of a checkpoint (and theta*) on another MRP source.

    Args:
        env: ``boyan``, ``loop``, ``random``, ``random-sparse`` or ``gym:ENV_ID`` (e.g. ``gym:FrozenLake-v1``).
        n_tasks: tasks (fresh MRPs for families; one MRP, fresh features, for Gymnasium).
        n_states: states of the MRP families (Gymnasium sets its own).
        gamma: discount (the model's own temporal shift uses the gamma it was built with).
        context_len: ``n``; prefixes of it give the error versus context length.
        feature_kind: ``uniform`` or ``onehot`` (needs n_states <= the model's d).
        feature_scale: feature scale (the softmax inverse temperature).
        features: optional ``.npy`` file with a ``[n_states, d]`` feature matrix.
        terminal: Gymnasium terminal handling, ``restart`` (ergodic) or ``absorbing``.
        depth: theta*'s deepest layer for the error-versus-depth curve.
        seed: seeds MRPs, features and trajectories.
    """

    env: str = "boyan"
    n_tasks: int = 64
    n_states: int = 10
    gamma: float = 0.9
    context_len: int = 200
    feature_kind: str = "uniform"
    feature_scale: float = 1.0
    features: str = ""
    terminal: str = "restart"
    depth: int = 32
    seed: int = 0

    def __post_init__(self) -> None:
        for name, least in (("n_tasks", 2), ("n_states", 2), ("context_len", 1), ("depth", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < least:
                raise ValueError(f"--{name.replace('_', '-')}: must be an integer >= {least}, got {value!r}")
        if not 0.0 <= self.gamma < 1.0:
            raise ValueError(f"--gamma: must be in [0, 1), got {self.gamma!r}")
        if not self.feature_scale > 0:
            raise ValueError(f"--feature-scale: must be > 0, got {self.feature_scale!r}")
        if self.terminal not in ("restart", "absorbing"):
            raise ValueError(f"--terminal: must be 'restart' or 'absorbing', got {self.terminal!r}")


def evaluate(path: str, cfg: EvaluateConfig, out: str, force: bool = False) -> dict:
    """Write evaluation.json, evaluation.md and figures for ``path`` on ``cfg.env``."""
    from analyses.ood import evaluate_ood, write_ood
    from analyses.report import resolve
    from ictd_interp.run_folder import claim_output

    claim_output(out, {"command": "evaluate", "source": _source(path), **cfg.__dict__}, force)
    model = resolve(path)[0].to("cpu")
    dist = TaskDistribution(family=cfg.env, n_states=cfg.n_states, d_features=model.cfg.d_features,
                            context_len=cfg.context_len, gamma=cfg.gamma, feature_kind=cfg.feature_kind,
                            feature_scale=cfg.feature_scale, terminal=cfg.terminal)
    features = _load_features(cfg.features) if cfg.features else None
    tasks = dist.sample(cfg.n_tasks, seed=cfg.seed, features=features)
    lengths = sorted({n for n in (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048) if n < cfg.context_len} | {cfg.context_len})
    gym = cfg.env.startswith("gym:")
    policy = "uniform random over actions" if gym else "none (an MRP family: no actions)"
    # record only what applies, once: a Gymnasium environment sets its own state count
    settings = {k: v for k, v in cfg.__dict__.items() if not (gym and k == "n_states")
                and not (not gym and k == "terminal") and not (k == "features" and not v)}
    result = {"source": path, "environment": cfg.env, "policy": policy, "settings": settings,
              **evaluate_ood(model, tasks, cfg.depth, lengths)}
    write_ood(result, out)
    return result


def _load_features(path: str):
    import numpy as np

    try:
        return np.load(path)
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: cannot read a feature matrix (.npy) ({err})") from None


def construct(cfg: ConstructConfig) -> str:
    """The table of ``||v_L - v_pi||_inf`` versus depth for theta*, with the margin ``C``."""
    from analyses.convergence import errors_by_depth, fit_geometric
    from analyses.diagonality import model_margin
    from ictd_interp import HookedICTDTransformer

    tasks = cfg.tasks.sample(cfg.n_tasks, seed=cfg.seed)
    model = HookedICTDTransformer.from_theta_star(cfg.model)
    errors = errors_by_depth(model, tasks).mean(-1)
    C = model_margin(model, tasks)
    fit = fit_geometric(errors.tolist())
    depths = [2**k for k in range(cfg.max_depth.bit_length()) if 2**k <= cfg.max_depth]
    lines = [f"theta* ({cfg.form} form) on {cfg.n_tasks} Boyan chains, s={cfg.n_states}, n={cfg.context_len}, "
             f"{cfg.feature_kind} features x{cfg.feature_scale}, gamma={cfg.gamma}",
             f"Assumption 5.1 margin C: mean {C.mean():.4f}, min {C.min():.4f} "
             f"(holds when 0 < C < (1-gamma)/2 = {(1 - cfg.gamma) / 2:.3f}; "
             f"{int((C > 0).sum())}/{len(C)} tasks have C > 0)",
             f"{'depth L':>8}  {'||v_L - v_pi||_inf':>20}"]
    lines += [f"{L:>8}  {errors[L]:>20.6f}" for L in depths]
    lines.append(f"fitted geometric rate {fit['rate']:.4f}, floor {fit['floor']:.6f}; 1 - C = {1 - C.mean():.4f}")
    return "\n".join(lines)


BUILTIN_STUDIES = ("emergence", "objectives", "architectures", "depth", "features", "masks", "tied")  # analyses/studies
DESCRIPTION = """Softmax transformers that run TD learning in context: pretrain, analyse and probe them.

Start with `ictd-interp reproduce --preset quick --out runs/quick` (train, then analyse: summary.md and
figures in runs/quick/analysis). The theory behind every number: docs/theory.md."""


def preset_help() -> str:
    """Each preset with what it changes from the defaults."""
    base = TrainConfig()
    parts = []
    for name, preset in PRESETS.items():
        changed = ", ".join(f"{f.name}={getattr(preset, f.name)}" for f in fields(TrainConfig)
                            if getattr(preset, f.name) != getattr(base, f.name))
        parts.append(f"{name} ({changed})")
    return "training preset; every flag below overrides it: " + "; ".join(parts)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ictd-interp", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("construct", help="theta*: error versus depth on Boyan chains, with the margin C")
    add_config_args(p, ConstructConfig, "construction")
    for name, text in (("train", "pretrain an ICTD transformer into a run folder"),
                       ("reproduce", "pretrain a preset, then analyse it (re-run the same command to resume)")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("--preset", default="quick", choices=sorted(PRESETS), help=preset_help())
        out_help = "run folder" if name == "train" else "folder for run/ (training) and analysis/ (report)"
        p.add_argument("--out", required=name == "reproduce", help=out_help)
        if name == "train":
            p.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint")
        p.add_argument("--threads", type=positive_int, default=None,
                       help="torch CPU threads (bit-exact resumes need the same count)")
        add_config_args(p, TrainConfig, "training settings", from_preset=True)
    p = sub.add_parser("models", help="the pretrained models shipped with the package")
    p = sub.add_parser("analyze", help="every metric and figure for a checkpoint or run folder")
    p.add_argument("path", help="a run folder, a checkpoint folder or a pretrained model's name (see models)")
    p.add_argument("--out", required=True, help="folder for summary.json, summary.md and figures/")
    p.add_argument("--force", action="store_true", help="replace a folder that holds another request's results")
    p = sub.add_parser("evaluate", help="a checkpoint and theta* on another MRP source (out of distribution)")
    p.add_argument("path", help="a run folder, a checkpoint folder or a pretrained model's name (see models)")
    p.add_argument("--out", required=True, help="folder for evaluation.json, evaluation.md and figures")
    p.add_argument("--force", action="store_true", help="replace a folder that holds another request's results")
    add_config_args(p, EvaluateConfig, "evaluation")
    p = sub.add_parser("study", help="a grid of conditions x seeds on Ray, with aggregate figures and study.md")
    p.add_argument("spec", help="a study spec (.toml) or a built-in study: " + ", ".join(BUILTIN_STUDIES))
    p.add_argument("--out", required=True, help="study folder (re-running the same command resumes it)")
    p.add_argument("--workers", type=positive_int, default=None, help="cells at once on a local Ray instance (default: all cores)")
    p.add_argument("--address", default=None, help="join this Ray cluster (HOST:PORT) instead; --out must be "
                                                   "storage every node sees")
    p = sub.add_parser("study-report", help="redraw a study's figures and study.md from its CSVs")
    p.add_argument("path", help="a study folder")
    return parser


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (argparse names the flag in its error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {value}")
    return value


def _set_threads(threads: Optional[int]) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def _refuse_changes(stored: TrainConfig, requested: TrainConfig, folder, way_forward: str) -> None:
    changed = stored.differences(requested)
    if changed:
        raise ValueError(f"{folder}: holds a run with other settings ({'; '.join(changed)}); "
                         f"the stored run is never reused for a different request: {way_forward}")


def _train(args: argparse.Namespace) -> int:
    from ictd_interp import run_folder
    from ictd_interp.train import resume, train

    _set_threads(args.threads)
    if args.resume:
        stored = run_folder.load_run_config(args.resume)
        _refuse_changes(stored, config_from_args(stored, args), args.resume,
                        "resume without changing options, or train a new run with --out NEW_DIR")
        run = resume(args.resume)
    else:
        if not args.out:
            raise ValueError("--out: a run directory is required (or --resume DIR)")
        run = train(config_from_args(PRESETS[args.preset], args), args.out)
    state = f"interrupted; continue with `ictd-interp train --resume {run.out_dir}`" if run.interrupted else "finished"
    print(f"{run.out_dir}: {state} at step {run.step}")
    return 130 if run.interrupted else 0


def _source(path: str) -> str:
    """What a request was made on: a registry name as given, any other path made absolute."""
    from pathlib import Path

    from ictd_interp.registry import names

    return path if path in names() else str(Path(path).resolve())


def _analyze(path: str, out: str, force: bool = False) -> None:
    from analyses.report import analyze
    from ictd_interp.run_folder import claim_output

    claim_output(out, {"command": "analyze", "source": _source(path)}, force)
    summary = analyze(path, out)
    m = summary["metrics"]
    weights = (f"cos(V, V*) per layer {[round(c, 3) for c in m['cos_V']]}, signs (+,+,-) {m['signature_match']}, "
               if "cos_V" in m else "most TD-like head's kernel correlation "
               f"{summary['circuit']['max_td_kernel_correlation']:.3f}, ")
    print(f"{out}/summary.md: {weights}MSVE {m['eval_msve']:.4f} (theta* {m['theta_star_msve']:.4f})")


def _reproduce(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ictd_interp import run_folder
    from ictd_interp.train import resume, train

    _set_threads(args.threads)
    out, requested = Path(args.out), config_from_args(PRESETS[args.preset], args)
    run_dir = out / "run"
    if run_folder.is_run(out):
        raise ValueError(f"{out}: is a training run folder, not a reproduce folder; analyse it with "
                         f"`ictd-interp analyze {out} --out DIR` or choose another --out")
    if run_folder.config_path(run_dir).exists():
        _refuse_changes(run_folder.load_run_config(run_dir), requested, out,
                        "repeat the command with the stored options to resume or re-analyse it, or choose another --out")
        run = resume(run_dir)  # an interrupted reproduce picks up where it stopped
    else:
        if out.exists() and any(p.name not in ("run", "analysis") for p in out.iterdir()):
            raise ValueError(f"{out}: not empty and not a reproduce folder; choose another --out")
        run = train(requested, run_dir)
    if run.interrupted:
        print(f"{run_dir}: interrupted at step {run.step}; run the same command again to continue")
        return 130
    # the run was checked to be this request above, so its own analysis folder is refreshed (a folder from a
    # release before request.json existed included)
    _analyze(str(run_dir), str(out / "analysis"), force=True)
    return 0


def _study(args: argparse.Namespace) -> int:
    from analyses.study import run_study

    study = run_study(args.spec, args.out, address=args.address, workers=args.workers)
    cells = study.results.drop_duplicates("cell")
    print(f"{study.out_dir}/study.md: {int((cells['status'] == 'done').sum())}/{len(cells)} cells done, "
          f"{int((cells['status'] == 'failed').sum())} failed")
    if study.interrupted:
        print(f"{study.out_dir}: interrupted; run the same command again to continue")
        return 130
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "construct":
            print(construct(config_from_args(ConstructConfig(), args)))
            return 0
        if args.command == "train":
            return _train(args)
        if args.command == "analyze":
            _analyze(args.path, args.out, args.force)
            return 0
        if args.command == "evaluate":
            result = evaluate(args.path, config_from_args(EvaluateConfig(), args), args.out, args.force)
            n, context = result["context_lengths"][-1], result["context"]
            print(f"{args.out}/evaluation.json: {result['environment']} ({result['n_states']} states), sup error at "
                  f"n={n}: model {context['model'][-1]:.4f}, theta* of its depth {context['theta_star'][-1]:.4f}")
            return 0
        if args.command == "reproduce":
            return _reproduce(args)
        if args.command == "study":
            return _study(args)
        if args.command == "models":
            from ictd_interp.registry import list_pretrained

            for m in list_pretrained():
                cos = ("" if m["cos_V"] is None else  # a standard-architecture model has no V to compare
                       f"; min cos(V, V*) {min(c for c in m['cos_V'] if c is not None):.3f}")
                print(f"{m['name']:<18} {m['description']} (eval MSVE {m['eval_msve']:.3f}, theta* "
                      f"{m['theta_star_msve']:.3f}{cos})")
            return 0
        if args.command == "study-report":
            from analyses.study_report import write_report

            print(write_report(args.path))
            return 0
    except (ValueError, ImportError, FileNotFoundError, FileExistsError) as err:
        print(f"ictd-interp {args.command}: error: {err}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
