"""The prompt ``Z_0`` of docs/theory.md §3 in TransformerLens layout: ``[batch, pos, d_model]`` (``Z_0`` transposed).

Position ``j < n`` holds ``(x(S_j), R_{j+1}, gamma v(S_{j+1}), v(S_j))``; the last position is the
query ``(x(S_n), 0, 0, v(S_n))``. Value rows start at 0 and the layers fill them in.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor


@dataclass(frozen=True)
class PromptLayout:
    """Names of the ``d + 3`` prompt rows (the residual stream's coordinates)."""

    d_features: int

    @property
    def features(self) -> slice:
        return slice(0, self.d_features)

    @property
    def reward(self) -> int:
        return self.d_features

    @property
    def target(self) -> int:
        return self.d_features + 1

    @property
    def current(self) -> int:
        return self.d_features + 2

    @property
    def d_model(self) -> int:
        return self.d_features + 3


def build_prompt(x: Tensor, rewards: Tensor) -> Float[Tensor, "batch pos d_model"]:
    """Stack features ``x [batch, n+1, d]``, rewards ``[batch, n]`` and two zero value rows; the
    query's reward is 0. Inputs are validated here, with errors that name them."""
    if x.ndim != 3 or x.shape[1] < 2:
        raise ValueError(f"x: expected [batch, n+1, d] with n >= 1, got shape {tuple(x.shape)}")
    if tuple(rewards.shape) != (x.shape[0], x.shape[1] - 1):
        raise ValueError(
            f"rewards: expected shape {(x.shape[0], x.shape[1] - 1)} for x {tuple(x.shape)}, got {tuple(rewards.shape)}"
        )
    if not (torch.isfinite(x).all() and torch.isfinite(rewards).all()):
        raise ValueError("x/rewards: contain NaN or infinite entries")
    rewards = rewards.to(x.dtype)
    reward_row = torch.cat([rewards, rewards.new_zeros(rewards.shape[0], 1)], dim=1)
    values = x.new_zeros(*x.shape[:2], 2)
    return torch.cat([x, reward_row.unsqueeze(-1), values], dim=-1)


def context_inputs(
    features: Float[Tensor, "*fbatch state d_feat"],
    reward: Float[Tensor, "*rbatch state"],
    states: Int[Tensor, "batch pos"],
) -> tuple[Float[Tensor, "batch pos d_feat"], Float[Tensor, "batch key_pos"]]:
    """Look up ``x(S_0..S_n)`` and ``R_1..R_n = r(S_0..S_{n-1})`` for trajectories of the tasks
    (``features``/``reward`` per task, or one shared matrix broadcast over the batch)."""
    batch = states.shape[0]
    feats = features.expand(batch, -1, -1) if features.ndim == 2 else features
    rew = reward.expand(batch, -1) if reward.ndim == 1 else reward
    x = torch.gather(feats, 1, states.unsqueeze(-1).expand(-1, -1, feats.shape[-1]))
    return x, torch.gather(rew, 1, states[:, :-1])


def shift_to_predecessor(x: Float[Tensor, "batch pos ..."]) -> Float[Tensor, "batch pos ..."]:
    """``Z Pi``: position ``k < n`` receives position ``k + 1``; the last position receives 0."""
    return torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], dim=1)


def check_prompt(prompt: Tensor, width: int, dtype: torch.dtype, n_ctx: int | None = None) -> Tensor:
    """A model's input check: ``[batch, pos, width]`` with ``2 <= pos (<= n_ctx)`` and finite entries;
    returns a copy in ``dtype`` (never the caller's tensor). Errors name what is wrong."""
    if not isinstance(prompt, Tensor) or prompt.ndim != 3:
        shape = tuple(prompt.shape) if isinstance(prompt, Tensor) else type(prompt).__name__
        raise ValueError(f"prompt: expected a tensor [batch, pos, d_model={width}], got {shape}")
    if prompt.shape[-1] != width:
        raise ValueError(f"prompt: width {prompt.shape[-1]} does not match d_model = d_features + 3 = {width}")
    if prompt.shape[1] < 2:
        raise ValueError(f"prompt: needs at least one context position and the query, got pos={prompt.shape[1]}")
    if n_ctx is not None and prompt.shape[1] > n_ctx:
        raise ValueError(f"prompt: {prompt.shape[1]} positions exceed the positional embedding's n_ctx={n_ctx}")
    if not torch.isfinite(prompt.sum()):  # one reduction: any NaN or inf makes the sum non-finite
        raise ValueError("prompt: contains NaN or infinite entries")
    return prompt.to(dtype, copy=True)
