"""State features ``x(s)`` (docs/theory.md §1). Their scale β sets the softmax kernel's
inverse temperature, β² under θ*."""

from __future__ import annotations

from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config.fields import FEATURE_KINDS, check_onehot


def make_features(
    n_states: int,
    d: int,
    kind: str = "uniform",
    scale: float = 1.0,
    *,
    generator: Optional[torch.Generator] = None,
    batch: Optional[int] = None,
    device: Optional[torch.device] = None,
) -> Float[Tensor, "*batch state d_feat"]:
    """Feature matrix ``X [s, d]`` (or ``[batch, s, d]``): ``scale * U(-1, 1)`` or ``scale * e_s``.

    One-hot features put state ``s`` on axis ``s`` and need ``d >= n_states``; with a large
    ``scale`` they make the kernel diagonal and softmax TD tabular (docs/theory.md §2).
    """
    if kind not in FEATURE_KINDS:
        raise ValueError(f"kind: must be one of {FEATURE_KINDS}, got {kind!r}")
    if n_states < 1 or d < 1:
        raise ValueError(f"n_states and d must be positive, got n_states={n_states}, d={d}")
    shape = (n_states, d) if batch is None else (batch, n_states, d)
    if kind == "onehot":
        check_onehot(d, n_states, "d", advice="; use kind='uniform' or pass your own feature matrix")
        return scale * torch.eye(n_states, d, dtype=torch.float64, device=device).expand(shape).clone()
    return uniform_features(torch.rand(shape, generator=generator, dtype=torch.float64), scale)


def uniform_features(u: Float[Tensor, "*batch state d_feat"], scale: float) -> Float[Tensor, "*batch state d_feat"]:
    """``scale * U(-1, 1)`` features from ``U(0, 1)`` draws ``u`` (entrywise)."""
    return scale * (2 * u - 1)
