"""Attention interventions: swap in another pattern, or rescale the scores by a temperature."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

import torch
from einops import rearrange
from jaxtyping import Int
from torch import Tensor
from transformer_lens.hook_points import HookPoint

from ictd_interp.hooks.types import Hooks
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.hook_names import get_act_name
from ictd_interp.reference.td import same_state_kernel


def replace_pattern(pattern: Tensor) -> Callable:
    """Hook for ``hook_pattern``: use ``pattern`` (broadcast to ``[batch, head, query_pos, key_pos]``)."""

    def hook(act: Tensor, hook: HookPoint) -> Tensor:
        return pattern.to(act).expand_as(act).clone()

    return hook


def uniform_pattern(n_pos: int) -> Tensor:
    """Every query spreads its attention evenly over the ``n`` sources (the query is never a source)."""
    pattern = torch.full((n_pos, n_pos), 1.0 / (n_pos - 1), dtype=torch.float64)
    pattern[:, -1] = 0.0
    return pattern


def tabular_pattern(states: Int[Tensor, "batch pos"]) -> Tensor:
    """The same-state (tabular) kernel: uniform over sources in the query's state, or over all
    sources when the state never appears as a source. ``[batch, 1, query_pos, key_pos]``."""
    pattern = rearrange(same_state_kernel(states), "batch key query -> batch query key")
    return torch.cat([pattern, torch.zeros_like(pattern[..., :1])], dim=-1).unsqueeze(1)


def pattern_hooks(pattern: Tensor, layers: Sequence[int]) -> Hooks:
    return [(get_act_name("pattern", l), replace_pattern(pattern)) for l in layers]


@torch.no_grad()
def theta_star_pattern_hooks(
    model: HookedICTDTransformer, prompt: Tensor, layers: Optional[Sequence[int]] = None
) -> Hooks:
    """Give each layer theta*'s pattern on the same prompt (theta*'s pattern reads features only,
    so it is the same at every layer)."""
    star = HookedICTDTransformer.from_theta_star(model.cfg).to(prompt.device)
    _, cache = star.run_with_cache(prompt, names_filter=get_act_name("pattern", 0))
    layers = range(model.cfg.n_layers) if layers is None else layers
    return pattern_hooks(cache["pattern", 0], layers)


def temperature(tau: float) -> Callable:
    """Hook for ``hook_attn_scores``: divide scores by ``tau`` (``tau < 1`` sharpens, ``> 1`` flattens)."""
    if not tau > 0:
        raise ValueError(f"tau: must be positive, got {tau}")

    def hook(act: Tensor, hook: HookPoint) -> Tensor:
        return act / tau

    return hook


def temperature_hooks(tau: float, layers: Sequence[int]) -> Hooks:
    return [(get_act_name("attn_scores", l), temperature(tau)) for l in layers]
