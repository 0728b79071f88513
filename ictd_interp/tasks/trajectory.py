"""Trajectories ``S_0..S_n`` sampled from an MRP, vectorised over tasks and over time."""

from __future__ import annotations

from typing import Optional

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ictd_interp.tasks.mrp import MRP, resolve_generator


def sample_trajectories(
    mrp: MRP,
    n_steps: int,
    batch: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
    *,
    seed: Optional[int] = None,
) -> Int[Tensor, "batch pos"]:
    """State indices ``[batch, n_steps + 1]``.

    A batched MRP gives one trajectory per task; a single MRP gives ``batch`` (default 1)
    independent trajectories. Time is not looped over: every step's transition map is drawn at
    once and the maps are composed by a parallel prefix scan (``log2(n_steps)`` gathers).
    """
    if n_steps < 0:
        raise ValueError(f"n_steps: must be >= 0, got {n_steps}")
    gen = resolve_generator(seed, generator)
    P, mu0 = _batched(mrp, batch)
    u0 = torch.rand(P.shape[0], 1, generator=gen, dtype=P.dtype)
    s0 = _inverse_cdf(mu0.cumsum(-1), u0).squeeze(-1)
    if n_steps == 0:
        return s0.unsqueeze(-1)
    u = torch.rand(P.shape[0], n_steps, generator=gen, dtype=P.dtype)
    maps = _inverse_cdf(P.cumsum(-1), u.unsqueeze(1).expand(-1, P.shape[1], -1)).transpose(1, 2)
    prefix = _compose_prefix(maps)
    rest = torch.gather(prefix, 2, s0.view(-1, 1, 1).expand(-1, n_steps, 1)).squeeze(-1)
    return torch.cat([s0.unsqueeze(-1), rest], dim=1)


def _batched(mrp: MRP, batch: Optional[int]) -> tuple[Tensor, Tensor]:
    if len(mrp.batch_shape) == 0:
        n = 1 if batch is None else batch
        return mrp.P.expand(n, -1, -1), mrp.mu0.expand(n, -1)
    if len(mrp.batch_shape) != 1 or (batch is not None and batch != mrp.batch_shape[0]):
        raise ValueError(f"batch: a batched MRP of shape {tuple(mrp.batch_shape)} gives one trajectory per task")
    return mrp.P, mrp.mu0


def _inverse_cdf(cdf: Float[Tensor, "... k"], u: Float[Tensor, "... m"]) -> Int[Tensor, "... m"]:
    """First index whose cumulative probability exceeds ``u`` (zero-probability states are skipped)."""
    return torch.searchsorted(cdf.contiguous(), u.contiguous(), right=True).clamp_max(cdf.shape[-1] - 1)


def _compose_prefix(maps: Int[Tensor, "batch time state"]) -> Int[Tensor, "batch time state"]:
    """Hillis-Steele scan: afterwards ``maps[:, t]`` sends ``S_0`` to ``S_{t+1}``."""
    offset = 1
    while offset < maps.shape[1]:
        later = torch.gather(maps[:, offset:], 2, maps[:, :-offset])
        maps = torch.cat([maps[:, :offset], later], dim=1)
        offset *= 2
    return maps
