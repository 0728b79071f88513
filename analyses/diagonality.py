"""Kernel diagonality (docs/theory.md §7) and the Assumption 5.1 margin ``C`` (docs/theory.md §5)."""

from __future__ import annotations

import math

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ictd_interp import HookedICTDTransformer
from ictd_interp.metrics import assumption_margin, diagonality_by_layer, kernel_diagonality, population_kernel
from ictd_interp.tasks import TaskBatch

__all__ = [
    "kernel_diagonality", "kernel_diagonality_mean", "self_attention_mass", "population_kernel",
    "assumption_margin", "model_margin", "onehot_margin",
]


def self_attention_mass(pattern: Float[Tensor, "batch query_pos key_pos"], states: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch"]:
    """Raw mass on same-state sources, averaged over positions (a state visited often counts often)."""
    same = (states.unsqueeze(-1) == states[:, :-1].unsqueeze(1)).to(pattern.dtype)
    return (pattern[..., :-1] * same).sum(-1).mean(-1)


@torch.no_grad()
def kernel_diagonality_mean(model: HookedICTDTransformer, tasks: TaskBatch) -> Float[Tensor, "layer head"]:
    """Kernel diagonality averaged over the evaluation tasks, per layer and head."""
    device = next(model.parameters()).device
    _, cache = model.run_with_cache(tasks.prompt.to(device), names_filter=lambda n: n.endswith("hook_pattern"))
    return diagonality_by_layer(cache, tasks.states, tasks.mrp.n_states, model.cfg.n_layers, model.cfg.n_heads)


def model_margin(model: HookedICTDTransformer, tasks: TaskBatch, layer: int = 0, head: int = 0) -> Float[Tensor, "batch"]:
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
