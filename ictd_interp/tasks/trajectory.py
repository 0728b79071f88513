"""Trajectories ``S_0..S_n`` sampled from an MRP: the draws of all steps at once, the walk vectorised over tasks."""

from __future__ import annotations

from typing import Optional

import numpy as np
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
    independent trajectories. Each step maps its uniform through the current state's cumulative row
    (inverse CDF), for every trajectory at once, in numpy: only the rows the walk visits are read. (The
    same states as drawing every state's map of every step by one ``searchsorted`` and then walking
    through the maps, which read ``n_states`` times as much: a training batch's data took 0.36 against
    0.57 ms, ``data_ms`` of benchmarks/train_throughput.py, tied, median of three alternating runs.)
    """
    if n_steps < 0:
        raise ValueError(f"n_steps: must be >= 0, got {n_steps}")
    gen = resolve_generator(seed, generator)
    P, mu0 = _batched(mrp, batch)
    return trajectories_from_uniforms(P, mu0, *trajectory_uniforms(gen, P.shape[0], n_steps, P.dtype))


def trajectory_uniforms(
    generator: torch.Generator, batch: int, n_steps: int, dtype: torch.dtype = torch.float64
) -> tuple[Tensor, Optional[Tensor]]:
    """The ``U(0, 1)`` draws of ``batch`` trajectories, in the order drawn: the start ``[batch, 1]``, then
    every step's ``[batch, n_steps]`` (None for ``n_steps = 0``)."""
    u0 = torch.rand(batch, 1, generator=generator, dtype=dtype)
    return u0, (torch.rand(batch, n_steps, generator=generator, dtype=dtype) if n_steps else None)


def trajectories_from_uniforms(
    P: Float[Tensor, "batch state state"],
    mu0: Float[Tensor, "batch state"],
    u0: Float[Tensor, "batch 1"],
    u: Optional[Float[Tensor, "batch time"]],
) -> Int[Tensor, "batch pos"]:
    """The trajectories of ``sample_trajectories`` from their draws (row-wise: trajectories from
    concatenated draws are those from each part). ``S_0`` from ``mu0``, then each ``S_{t+1}`` from the
    visited row of ``P`` (one ``take`` of the rows per step), both by ``_inverse_cdf``."""
    if mu0.device.type != "cpu":
        return walk(P, mu0, u0, u)
    batch, n_states = mu0.shape
    n_steps = 0 if u is None else u.shape[1]
    states = np.empty((n_steps + 1, batch), dtype=np.int64)  # time-major: each step writes one row
    _inverse_cdf(mu0.cumsum(-1).numpy(), u0[:, 0].numpy(), out=states[0])
    if n_steps:
        rows = P.cumsum(-1).contiguous().view(batch * n_states, n_states).numpy()
        first_row, draws = np.arange(batch) * n_states, u.numpy()
        for t in range(n_steps):
            _inverse_cdf(rows.take(first_row + states[t], axis=0), draws[:, t], out=states[t + 1])
    return torch.from_numpy(np.ascontiguousarray(states.T))


def walk(
    P: Float[Tensor, "batch state state"],
    mu0: Float[Tensor, "batch state"],
    u0: Float[Tensor, "batch 1"],
    u: Optional[Float[Tensor, "batch time"]],
) -> Int[Tensor, "batch pos"]:
    """``trajectories_from_uniforms`` in torch on the tensors' device (the same count of cumulative entries
    ``<= u``, so the same states as the NumPy walk on a CPU): one gather of the visited rows per step."""
    n_states = mu0.shape[-1]
    states = [torch.clamp((mu0.cumsum(-1) <= u0).sum(-1), max=n_states - 1)]
    cdf = P.cumsum(-1)
    for t in range(0 if u is None else u.shape[1]):
        rows = torch.gather(cdf, 1, states[-1][:, None, None].expand(-1, 1, n_states))[:, 0]  # [batch, state]
        states.append(torch.clamp((rows <= u[:, t : t + 1]).sum(-1), max=n_states - 1))
    return torch.stack(states, dim=1)


def _batched(mrp: MRP, batch: Optional[int]) -> tuple[Tensor, Tensor]:
    if len(mrp.batch_shape) == 0:
        n = 1 if batch is None else batch
        return mrp.P.expand(n, -1, -1), mrp.mu0.expand(n, -1)
    if len(mrp.batch_shape) != 1 or (batch is not None and batch != mrp.batch_shape[0]):
        raise ValueError(f"batch: a batched MRP of shape {tuple(mrp.batch_shape)} gives one trajectory per task")
    return mrp.P, mrp.mu0


def _inverse_cdf(cdf: np.ndarray, u: np.ndarray, out: np.ndarray) -> None:
    """Into ``out [batch]``: for each row of ``cdf [batch, state]`` (cumulative, non-decreasing), the first
    state whose cumulative probability exceeds ``u [batch]`` (zero-probability states are skipped), at
    most the last state (a row summing to just under 1). That is the count of entries ``<= u``, taken as
    a product with ones (a sum of 0s and 1s, exact in float64, half the time of ``sum``)."""
    n_states = cdf.shape[-1]
    np.minimum((cdf <= u[:, None]).dot(np.ones(n_states)), n_states - 1, out=out, casting="unsafe")
