"""A checkpoint folder to a model: the class its header names (from the registry), the weights checked
against what that model declares (names, shapes, finiteness, frozen entries, ties), then loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Optional

import torch

from ictd_interp.io.checkpoint import CONFIG, CheckpointError, PathLike, StoredCheckpoint, read_checkpoint
from ictd_interp.models.registry import HookedModel, config_from_dict, model_class


class Checkpoint(NamedTuple):
    model: HookedModel
    metadata: dict[str, Any]


def load_checkpoint(path: PathLike, device: str = "cpu") -> Checkpoint:
    """Load a checkpoint folder (or its ``model.safetensors``), or a shipped model by name (``depth3-td-s0``),
    as ``(model, metadata)``."""
    from ictd_interp.io.pretrained import resolve

    as_path = Path(path)
    stored = read_checkpoint(as_path if as_path.exists() or len(as_path.parts) > 1 else resolve(path))
    return Checkpoint(model_from(stored).to(device), stored.header.get("metadata", {}))


def model_from(stored: StoredCheckpoint, expected: Optional[type] = None) -> HookedModel:
    """The model ``stored`` holds; ``expected``: the class the caller asked for (an error names the other)."""
    architecture = stored.header.get("architecture", "stylised")
    try:
        cls = model_class(architecture)
    except ValueError as err:
        raise CheckpointError(f"{stored.folder / CONFIG}: the stored {err}") from None
    if expected is not None and cls is not expected:
        raise ValueError(
            f"{stored.folder}: holds a {cls.__name__} ({architecture} architecture), not a "
            f"{expected.CONFIG.architecture}-architecture model; load it with "
            f"{cls.__name__}.from_pretrained or ictd_interp.load_checkpoint"
        )
    try:
        cfg = config_from_dict(architecture, stored.header["config"])
    except (TypeError, ValueError, KeyError) as err:
        raise CheckpointError(
            f"{stored.folder / CONFIG}: config mismatch: the stored config is invalid ({err})"
        ) from None
    model = cls(cfg)
    _check_weights(model, stored.weights, stored.folder)
    model.load_state_dict(stored.weights)
    return model


def _check_weights(model: HookedModel, weights: dict[str, torch.Tensor], folder: Path) -> None:
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
    frozen = model.nonzero_frozen(weights)
    if frozen:
        raise CheckpointError(
            f"{folder}: config mismatch: {frozen[0]} has nonzero entries that the "
            f"{model.cfg.mask!r} training mask freezes at 0"
        )
    for group in model.tied_parameters():
        if any(not torch.equal(weights[group[0]], weights[name]) for name in group[1:]):
            raise CheckpointError(f"{folder}: config mismatch: the config says tied but layers hold different weights")
