"""Checkpoint files: ``model.safetensors`` + ``config.json`` in one folder, written atomically.

A checkpoint folder is written beside its destination and renamed into place, so an interrupted
save never damages the previous checkpoint. This module knows no model class (as TransformerLens's and
SAELens's loaders): ``read_checkpoint`` returns ``(header, state dict)`` after checking the files are ours and
whole; ``ictd_interp.models.load_checkpoint`` builds the model the header names and checks the weights fit.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, NamedTuple, Optional, Union

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

FORMAT = "ictd-interp-checkpoint"
VERSION = 1
WEIGHTS, CONFIG, STATE = "model.safetensors", "config.json", "training_state.pt"
PathLike = Union[str, os.PathLike]


class CheckpointError(ValueError):
    """A checkpoint that exists but cannot be used; the message says why."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No checkpoint at the given path."""


class StoredCheckpoint(NamedTuple):
    """What a checkpoint folder holds: its folder, header (format, architecture, config, metadata) and weights."""

    folder: Path
    header: dict[str, Any]
    weights: dict[str, torch.Tensor]


def save_checkpoint(
    model: torch.nn.Module, path: PathLike, *, training_state: Optional[dict] = None, **metadata: Any
) -> Path:
    """Write ``model`` (weights, config, JSON-serialisable ``metadata``) to the folder ``path``;
    ``training_state`` (optimiser and generator states) goes beside it for exact resumption."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {
        "format": FORMAT,
        "version": VERSION,
        "architecture": model.cfg.architecture,
        "config": model.cfg.to_dict(),
        "metadata": metadata,
    }
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        weights = {k: v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()}
        save_file(weights, str(tmp / WEIGHTS))
        (tmp / CONFIG).write_text(json.dumps(header, indent=2, default=_jsonable))
        if training_state is not None:
            torch.save(training_state, tmp / STATE)
        _share_as_umask_says(tmp)
        _swap_into_place(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _share_as_umask_says(folder: Path) -> None:
    """``mkdtemp`` makes a private (0700) folder and some writers private files: give them the modes a plain
    ``mkdir`` and ``open`` would under the process's umask, so other users of shared storage can read them."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for child in folder.iterdir():
        child.chmod(0o666 & ~umask)


def _jsonable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"metadata: {type(value).__name__} is not JSON-serialisable")


def _swap_into_place(tmp: Path, path: Path) -> None:
    """Rename the new folder over the old one; the old one is removed only once the new one is in place."""
    if not path.exists():
        os.replace(tmp, path)
        return
    backup = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
    os.replace(path, backup / "ckpt")
    os.replace(tmp, path)
    shutil.rmtree(backup, ignore_errors=True)


def read_checkpoint(path: PathLike) -> StoredCheckpoint:
    """The folder (or its ``model.safetensors``/``config.json``) read and checked: ours, whole, not newer."""
    folder = _folder(Path(path))
    header = _read_header(folder)
    if not isinstance(header.get("config"), dict):
        raise CheckpointError(f"{folder / CONFIG}: config mismatch: the header holds no model config")
    return StoredCheckpoint(folder, header, _read_weights(folder))


def _folder(path: Path) -> Path:
    if path.is_file() and path.name in (WEIGHTS, CONFIG):
        path = path.parent
    if not path.exists():
        raise CheckpointNotFoundError(f"{path}: no such checkpoint (the path does not exist)")
    if not path.is_dir():
        raise CheckpointError(f"{path}: not an ictd-interp checkpoint (expected a folder with {WEIGHTS} and {CONFIG})")
    return path


def _read_header(folder: Path) -> dict[str, Any]:
    if not (folder / CONFIG).exists():
        raise CheckpointError(f"{folder}: not an ictd-interp checkpoint (no {CONFIG})")
    try:
        header = json.loads((folder / CONFIG).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{folder / CONFIG}: corrupt or truncated JSON ({err})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CheckpointError(f"{folder}: foreign checkpoint ({CONFIG} is not an ictd-interp checkpoint header)")
    if header.get("version", 0) > VERSION:
        raise CheckpointError(f"{folder}: written by a newer ictd-interp (format version {header['version']})")
    return header


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    if not (folder / WEIGHTS).exists():
        raise CheckpointError(f"{folder}: incomplete checkpoint (no {WEIGHTS})")
    try:
        return load_file(str(folder / WEIGHTS))
    except (SafetensorError, OSError, RuntimeError) as err:
        raise CheckpointError(f"{folder / WEIGHTS}: corrupt or truncated weights ({err})") from None
