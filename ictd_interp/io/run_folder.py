"""The layout of a training run folder and of an output folder, owned here for training, analyses, the CLI and
studies (torch-free: paths and JSON only).

::

    RUN/
      train_config.json        the TrainConfig (runs written before 0.2 call it config.json)
      metrics.jsonl            one JSON line per evaluation: step, loss, every evaluation metric
      checkpoints/step_XXXXXXX/ model checkpoint (its header is the checkpoint's config.json)
                                + training_state.pt (optimiser, data generator, step)
      final/                   the finished model (present once training reached its last step)

Every read names the file involved when it fails.

An *output* folder (``analyze``, ``evaluate``) records the request that filled it in ``request.json``:
the same request recomputes into it, another one is refused, naming the difference, unless forced.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional, Union

from ictd_interp.config.train import TrainConfig
from ictd_interp.io.staging import refuse_unusable

TRAIN_CONFIG, LEGACY_TRAIN_CONFIG = "train_config.json", "config.json"
METRICS, CHECKPOINTS, FINAL = "metrics.jsonl", "checkpoints", "final"
PathLike = Union[str, Path]


class RunFolderError(ValueError):
    """A run folder that exists but cannot be used; the message names the file."""


def config_path(run_dir: PathLike) -> Path:
    """The training config of ``run_dir`` (the legacy name for folders written before 0.2)."""
    run_dir = Path(run_dir)
    legacy = run_dir / LEGACY_TRAIN_CONFIG
    # a checkpoint folder also has a config.json (its header), beside its weights
    is_legacy_run = legacy.exists() and (run_dir / METRICS).exists() and not (run_dir / "model.safetensors").exists()
    return legacy if is_legacy_run and not (run_dir / TRAIN_CONFIG).exists() else run_dir / TRAIN_CONFIG


def is_run(path: PathLike) -> bool:
    """A training run folder: a training config and a metrics log."""
    path = Path(path)
    return (path / METRICS).exists() and config_path(path).exists()


def load_run_config(run_dir: PathLike) -> TrainConfig:
    path = config_path(run_dir)
    if not path.exists():
        raise FileNotFoundError(f"{run_dir}: not a training run (no {TRAIN_CONFIG})")
    try:
        return TrainConfig.from_dict(json.loads(path.read_text()))
    except json.JSONDecodeError as err:
        raise RunFolderError(f"{path}: corrupt or truncated JSON ({err})") from None
    except (TypeError, ValueError) as err:
        raise RunFolderError(f"{path}: not a valid training config ({err})") from None


def write_run_config(run_dir: PathLike, config: TrainConfig) -> None:
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    (Path(run_dir) / TRAIN_CONFIG).write_text(json.dumps(config.to_dict(), indent=2))
    (Path(run_dir) / METRICS).write_text("")


def checkpoint_dir(run_dir: PathLike, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / f"step_{step:07d}"


def checkpoint_step(checkpoint: Path) -> int:
    """The step a checkpoint folder (``checkpoint_dir``'s name) was written at."""
    return int(checkpoint.name.removeprefix("step_"))


def final_dir(run_dir: PathLike) -> Path:
    return Path(run_dir) / FINAL


def checkpoints(run_dir: PathLike) -> list[Path]:
    """Every checkpoint of the run, oldest first."""
    return sorted((Path(run_dir) / CHECKPOINTS).glob("step_*"))


def set_aside(checkpoint: Path, why: str = "unusable") -> Path:
    """Rename a checkpoint out of the run's list (``unusable_step_…`` or ``superseded_step_…``, numbered if that
    is taken), so a resume never reads it again and nothing of it is overwritten; returns its new path."""
    target, k = checkpoint.with_name(f"{why}_{checkpoint.name}"), 1
    while target.exists():
        target, k = checkpoint.with_name(f"{why}_{checkpoint.name}.{k}"), k + 1
    return checkpoint.rename(target)


def latest_checkpoint(run_dir: PathLike) -> Optional[Path]:
    found = checkpoints(run_dir)
    return found[-1] if found else None


def never_started(run_dir: PathLike) -> bool:
    """A run folder holding a config but no checkpoint and no logged metrics: its request failed before the
    first step (a bad environment id, say), so it may be re-run from scratch."""
    run_dir = Path(run_dir)
    metrics = run_dir / METRICS
    return (
        config_path(run_dir).exists()
        and not checkpoints(run_dir)
        and (not metrics.exists() or not metrics.read_text().strip())
    )


def clear_unstarted(run_dir: PathLike) -> None:
    """Empty a folder ``never_started`` says holds nothing of value."""
    if not never_started(run_dir):
        raise RunFolderError(f"{run_dir}: holds a run that started; refusing to clear it")
    _clear(Path(run_dir))


def read_metrics(run_dir: PathLike) -> list[dict[str, Any]]:
    """Every logged line; a last line cut short (a run killed while writing it) is dropped with a warning,
    since the lines before it and the checkpoints are intact; any other bad line is an error."""
    path = Path(run_dir) / METRICS
    text = path.read_text()
    lines = text.splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            if number == len(lines) and not text.endswith("\n"):
                warnings.warn(
                    f"{path}: its last line is incomplete (the run was stopped while writing it); "
                    f"using the {len(rows)} complete lines before it",
                    stacklevel=1,
                )  # located here, so shown once whichever caller reads the run
                break
            raise RunFolderError(f"{path}: line {number} is not valid JSON ({err})") from None
    return rows


def append_metrics(run_dir: PathLike, entry: dict[str, Any]) -> None:
    with open(Path(run_dir) / METRICS, "a") as f:
        f.write(json.dumps(entry) + "\n")


def truncate_metrics(run_dir: PathLike, step: int) -> list[dict[str, Any]]:
    """Drop lines logged after ``step`` (a resumed run logs them again); returns the kept ones."""
    kept = [m for m in read_metrics(run_dir) if m["step"] <= step]
    (Path(run_dir) / METRICS).write_text("".join(json.dumps(m) + "\n" for m in kept))
    return kept


REQUEST, SUMMARY = "request.json", "summary.json"
LEGACY_ANALYSIS = {SUMMARY, "summary.md", "figures"}  # what analyze wrote before request.json existed


def claim_output(
    out_dir: PathLike, request: dict[str, Any], force: bool = False, inputs: Sequence[PathLike] = ()
) -> Path:
    """Make ``out_dir`` the home of ``request``'s results. An empty or absent folder, or one that holds the
    same request, is used, and so is one that holds only a request (a request that failed before writing any
    result). A folder that holds another request of the same command is refused with the difference named,
    unless ``force``, which clears it first. Never cleared, ``force`` or not: a training run, another command's
    results (a claims folder holds hours of training runs), a folder of files that ictd-interp did not write (no
    request.json: a checkpoint, someone's work; an analysis from before request.json existed excepted), a folder
    that is or holds one of the request's ``inputs`` (the model it reads), and a path that is a file. Callers read
    their inputs before claiming, so a request whose inputs are bad leaves the folder as it was."""
    out_dir = Path(out_dir)
    refuse_unusable(out_dir, inputs)
    if out_dir.exists() and any(child.name != REQUEST for child in out_dir.iterdir()):
        stored_path = out_dir / REQUEST
        stored = _read_json(stored_path) if stored_path.exists() else None
        if stored is not None and not isinstance(stored, dict):
            raise RunFolderError(
                f"{stored_path}: not a request (a JSON object); this folder was not written by "
                "ictd-interp as it is: choose another --out"
            )
        if stored != request:
            refusal = None  # the one line that refuses it, without --force or where --force may not clear
            if is_run(out_dir):
                problem, replaceable = "is a training run folder", False
            elif stored is None:
                # an analysis from a release before request.json existed (exactly what analyze writes) is ours
                replaceable = {c.name for c in out_dir.iterdir()} <= LEGACY_ANALYSIS and (out_dir / SUMMARY).exists()
                problem = "is not empty and holds no request.json" + (
                    "" if replaceable else " (not written by ictd-interp analyze/evaluate, so it is never cleared)"
                )
            elif stored.get("command") != request.get("command"):
                problem, replaceable = (
                    (
                        f"holds the results of `{stored.get('command')}`, not of "
                        f"`{request.get('command')}` (never replaced by another command)"
                    ),
                    False,
                )
            else:
                changed = [
                    f"{k}: {stored.get(k)!r} -> {request.get(k)!r}"
                    for k in sorted(set(stored) | set(request))
                    if stored.get(k) != request.get(k)
                ]
                refusal = other_request(out_dir, "the results", changed, "choose another --out, or pass --force")
                replaceable = True
            if not (force and replaceable):
                raise FileExistsError(
                    refusal
                    or f"{out_dir}: {problem}; choose another --out"
                    + (", or pass --force to replace it" if replaceable else "")
                )
            _clear(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"--out {out_dir}: cannot create the folder ({err.strerror or err})") from None
    write_request(out_dir, request)
    return out_dir


def other_request(folder: PathLike, what: str, changed: Sequence[str], way_forward: str) -> str:
    """The one refusal of every output folder that serves another request (a command's results, a training run, a
    study, a study's plan): what it holds, each difference ``key: stored -> requested``, and the way forward."""
    return (
        f"{folder}: holds {what} of another request ({'; '.join(changed)}); nothing saved is reused for a "
        f"different request: {way_forward}"
    )


def write_request(out_dir: PathLike, request: dict[str, Any]) -> None:
    """Record (again) the request a folder holds: a writer that replaces the folder whole (a checkpoint
    written into it) puts it back afterwards."""
    (Path(out_dir) / REQUEST).write_text(json.dumps(request, indent=1))


def _clear(folder: Path) -> None:
    import shutil

    for child in folder.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RunFolderError(f"{path}: corrupt JSON ({err})") from None
