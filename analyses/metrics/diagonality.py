"""Kernel diagonality (docs/theory.md §7), the state-grouped kernels ``(M^, P^)`` and the Assumption 5.1
margin ``C`` (docs/theory.md §5)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import einsum, rearrange
from jaxtyping import Float, Int
from torch import Tensor

from ictd_interp.models import HookedICTDTransformer
from ictd_interp.reference.metrics import (
    assumption_margin,
    grouped_kernel,
    kernel_diagonality,
    population_kernel,
)
from ictd_interp.reference.td import same_state
from ictd_interp.tasks.sampling import TaskBatch
from ictd_interp.training.evaluation import run_with_diagonality

__all__ = [
    "kernel_diagonality",
    "kernel_diagonality_mean",
    "self_attention_mass",
    "population_kernel",
    "assumption_margin",
    "model_margin",
    "onehot_margin",
    "state_kernels",
]


def self_attention_mass(
    pattern: Float[Tensor, "batch query_pos key_pos"], states: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch"]:
    """Raw mass on same-state sources, averaged over positions (a state visited often counts often)."""
    same = rearrange(same_state(states), "batch key query -> batch query key").to(pattern.dtype)
    return (pattern[..., :-1] * same).sum(-1).mean(-1)


@torch.no_grad()
def kernel_diagonality_mean(model: HookedICTDTransformer, tasks: TaskBatch) -> Float[Tensor, "layer head"]:
    """Kernel diagonality averaged over the evaluation tasks, per layer and head."""
    return run_with_diagonality(model, tasks)[1]


def model_margin(
    model: HookedICTDTransformer, tasks: TaskBatch, layer: int = 0, head: int = 0
) -> Float[Tensor, "batch"]:
    """``C`` per task for a model's feature block ``A_ff`` (theta*: the identity)."""
    d = model.cfg.d_features
    A_ff = model.blocks[layer].attn.A.detach()[head, :d, :d].double().cpu()
    return assumption_margin(tasks.features, A_ff, tasks.mrp.mu_pi, model.cfg.gamma)


def onehot_margin(mu_pi: Float[Tensor, "state"], scale: float, gamma: float) -> float:
    """Closed form for one-hot features ``scale * e_s`` and ``A = I``:
    ``M(s, s) = mu(s) e^{b^2} / (mu(s) e^{b^2} + 1 - mu(s))``, so ``C = min_s M(s, s) - (1+gamma)/2``."""
    boost = math.exp(scale**2)
    diag = [m * boost / (m * boost + 1 - m) for m in mu_pi.tolist()]
    return min(diag) - (1 + gamma) / 2


def state_kernels(
    pattern: Float[Tensor, "batch query_pos key_pos"], states: Int[Tensor, "batch pos"], n_states: int
) -> tuple[Float[Tensor, "batch state state"], Float[Tensor, "batch state state"]]:
    """``(M^_n, P^_n)`` indexed by (target state ``s``, state ``s'``).

    ``M^(s, s') = sum_k K(S_{k-1}, s) 1{S_{k-1} = s'}`` and ``P^(s, s') = sum_k K(S_{k-1}, s) 1{S_k = s'}``,
    with ``K(., s)`` read at the positions in state ``s`` (averaged over them; they coincide when
    scores read features only). Rows of states the context never visits are NaN.
    """
    n = pattern.shape[-1] - 1
    nxt = F.one_hot(states[:, 1:], n_states).to(pattern.dtype)
    tgt = F.one_hot(states, n_states).to(pattern.dtype)
    counts = tgt.sum(1).unsqueeze(-1)  # [batch, state, 1]
    by_state = einsum(tgt, pattern[..., :n], "batch q s, batch q k -> batch s k") / counts
    # M^ groups each target position's kernel by source state (metrics.grouped_kernel), then by target state
    M = einsum(tgt, grouped_kernel(pattern, states, n_states), "batch q s, batch q t -> batch s t") / counts
    P = einsum(by_state, nxt, "batch s k, batch k t -> batch s t")
    return M, P
