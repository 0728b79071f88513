"""Attention patterns from an ``ActivationCache`` and their state-grouped kernels (SPEC §5)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import einsum
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.ActivationCache import ActivationCache

from ictd_interp.metrics import grouped_kernel

__all__ = ["patterns", "grouped_kernel", "state_kernels"]


def patterns(cache: ActivationCache, n_layers: int) -> Float[Tensor, "layer batch head query_pos key_pos"]:
    """Every layer's pattern, stacked (``pattern[l, b, h, j, i]`` is ``S_l[i, j]`` of SPEC §4)."""
    return torch.stack([cache["pattern", l] for l in range(n_layers)])


def state_kernels(
    pattern: Float[Tensor, "batch query_pos key_pos"], states: Int[Tensor, "batch pos"], n_states: int
) -> tuple[Float[Tensor, "batch state state"], Float[Tensor, "batch state state"]]:
    """``(M^_n, P^_n)`` indexed by (target state ``s``, state ``s'``).

    ``M^(s, s') = sum_k K(S_{k-1}, s) 1{S_{k-1} = s'}`` and ``P^(s, s') = sum_k K(S_{k-1}, s) 1{S_k = s'}``,
    with ``K(., s)`` read at the positions in state ``s`` (averaged over them; they coincide when
    scores read features only). Rows of states the context never visits are NaN.
    """
    n = pattern.shape[-1] - 1
    src = F.one_hot(states[:, :n], n_states).to(pattern.dtype)
    nxt = F.one_hot(states[:, 1:], n_states).to(pattern.dtype)
    tgt = F.one_hot(states, n_states).to(pattern.dtype)
    counts = tgt.sum(1).unsqueeze(-1)  # [batch, state, 1]
    by_state = einsum(tgt, pattern[..., :n], "batch q s, batch q k -> batch s k") / counts
    M = einsum(by_state, src, "batch s k, batch k t -> batch s t")
    P = einsum(by_state, nxt, "batch s k, batch k t -> batch s t")
    return M, P
