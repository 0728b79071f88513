"""Checkpoints: ``model.safetensors`` + ``config.json`` in one folder, written atomically.

A checkpoint folder is written beside its destination and renamed into place, so an interrupted
save never damages the previous checkpoint; loading validates everything before building a model
and says what is wrong: missing, not ours, corrupt or truncated, or weights that do not fit the config.
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

from ictd_interp.architectures import ICTDModel, build_model, config_from_dict

FORMAT = "ictd-interp-checkpoint"
VERSION = 1
WEIGHTS, CONFIG, STATE = "model.safetensors", "config.json", "training_state.pt"
PathLike = Union[str, os.PathLike]


class CheckpointError(ValueError):
    """A checkpoint that exists but cannot be used; the message says why."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No checkpoint at the given path."""


class Checkpoint(NamedTuple):
    model: ICTDModel
    metadata: dict[str, Any]


def save_checkpoint(
    model: ICTDModel, path: PathLike, *, training_state: Optional[dict] = None, **metadata: Any
) -> Path:
    """Write ``model`` (weights, config, JSON-serialisable ``metadata``) to the folder ``path``;
    ``training_state`` (optimiser and generator states) goes beside it for exact resumption."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"format": FORMAT, "version": VERSION, "architecture": model.cfg.architecture,
              "config": model.cfg.to_dict(), "metadata": metadata}
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        weights = {k: v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()}
        save_file(weights, str(tmp / WEIGHTS))
        (tmp / CONFIG).write_text(json.dumps(header, indent=2, default=_jsonable))
        if training_state is not None:
            torch.save(training_state, tmp / STATE)
        _swap_into_place(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


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


def load_checkpoint(path: PathLike, device: str = "cpu") -> Checkpoint:
    """Load a checkpoint folder (or its ``model.safetensors``) as ``(model, metadata)``."""
    folder = _folder(Path(path))
    header = _read_header(folder)
    try:
        cfg = config_from_dict(header.get("architecture", "stylised"), header["config"])
    except (TypeError, ValueError, KeyError) as err:
        raise CheckpointError(f"{folder / CONFIG}: config mismatch: the stored config is invalid ({err})") from None
    weights = _read_weights(folder)
    model = build_model(cfg)
    _check_weights(model, weights, folder)
    model.load_state_dict(weights)
    return Checkpoint(model.to(device), header.get("metadata", {}))


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


def _check_weights(model: ICTDModel, weights: dict[str, torch.Tensor], folder: Path) -> None:
    """Names, shapes, finiteness, and the constraints the model declares: entries its training mask
    freezes (``frozen_entries``) and weights it ties across layers (``tied_parameters``)."""
    expected = model.state_dict()
    missing, extra = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    if missing or extra:
        raise CheckpointError(f"{folder}: config mismatch: weights missing {missing}, unexpected {extra}")
    for name, tensor in weights.items():
        if tensor.shape != expected[name].shape:
            raise CheckpointError(
                f"{folder}: config mismatch: {name} has shape {tuple(tensor.shape)}, "
                f"the config expects {tuple(expected[name].shape)}"
            )
        if not torch.isfinite(tensor).all():
            raise CheckpointError(f"{folder}: corrupt weights: {name} holds NaN or infinite entries")
    for name, frozen in model.frozen_entries().items():
        if (weights[name][frozen.cpu()] != 0).any():
            raise CheckpointError(f"{folder}: config mismatch: {name} has nonzero entries that the "
                                  f"{model.cfg.mask!r} training mask freezes at 0")
    for group in model.tied_parameters():
        if any(not torch.equal(weights[group[0]], weights[name]) for name in group[1:]):
            raise CheckpointError(f"{folder}: config mismatch: the config says tied but layers hold different weights")
