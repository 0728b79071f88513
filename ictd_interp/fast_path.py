"""The training fast path: the paper-mask model's value row, exactly, without the residual stream.

Two exact shortcuts of the paper mask (see ``docs/theory.md``, "Why the fast path is exact"):

* **All patterns at once.** ``A`` is free only in its ``d x d`` feature block and no layer writes the
  feature rows, so layer ``l``'s scores are ``x_i^T A_l x_j`` whatever earlier layers did. Every
  layer's (and head's) pattern comes from one batched score product and one softmax over
  ``[unique_layer, head, batch, query_pos, key_pos]`` before any value is computed.
* **A matrix-vector value path.** Each head writes one row (head 0 the current value, the dual form's
  head 1 the target value), so ``pattern @ v`` only needs that row's value ``V[row] . z_i``: a
  ``[batch, pos, pos] @ [batch, pos]`` product per head and layer, not a ``d_model``-wide one.

No hook point runs here, so ``HookedICTDTransformer.fast_values`` takes this path only when no hook
of any kind is registered; the test suite holds it against the hooked forward in float64.
"""

from __future__ import annotations

import einops
import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config import ICTDConfig
from ictd_interp.prompt import PromptLayout


def _shift(x: Float[Tensor, "batch pos"]) -> Float[Tensor, "batch pos"]:
    """``Z Pi`` on one row: position ``k`` receives position ``k + 1``, the last receives 0."""
    return torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], dim=1)


def all_patterns(
    cfg: ICTDConfig, A: Float[Tensor, "unique head d_model d_model"], x: Float[Tensor, "batch pos d_feat"]
) -> Float[Tensor, "unique head batch query_pos key_pos"]:
    """Every layer's pattern from the features alone (valid for the paper mask only)."""
    d = cfg.d_features
    q = einops.einsum(x, A[..., :d, :d], "batch query e, unique head f e -> unique head batch query f")
    scores = q @ x.transpose(-1, -2)  # [unique, head, batch, query, key]
    key_is_query = torch.zeros(scores.shape[-1], dtype=torch.bool, device=scores.device)
    key_is_query[-1] = True
    if cfg.attention == "softmax":
        return torch.softmax(scores.masked_fill(key_is_query, float("-inf")), dim=-1)
    return scores.masked_fill(key_is_query, 0.0) / (scores.shape[-1] - 1)


def paper_mask_values(
    cfg: ICTDConfig, A: Float[Tensor, "unique head d_model d_model"], V: Float[Tensor, "unique head d_model d_model"],
    prompt: Float[Tensor, "batch pos d_model"], depth: int | None = None,
) -> Float[Tensor, "batch pos"]:
    """The value row after ``depth`` layers (default ``cfg.n_layers``; another depth needs tied
    weights); ``A``/``V`` stacked over unique layers (1 when tied)."""
    lay = PromptLayout(cfg.d_features)
    patterns = all_patterns(cfg, A, prompt[..., lay.features])
    rows = [lay.current, lay.target][: cfg.n_heads]
    w = torch.stack([V[:, h, row] for h, row in enumerate(rows)], dim=1)  # [unique, head, d_model]
    fixed = einops.einsum(prompt[..., : lay.target], w[..., : lay.target], "batch pos m, unique head m -> unique head batch pos")
    target, current = prompt[..., lay.target], prompt[..., lay.current]
    for layer in range(cfg.n_layers if depth is None else depth):
        u = 0 if cfg.tied else layer
        z = []
        for h in range(cfg.n_heads):
            v = fixed[u, h] + w[u, h, lay.target] * target + w[u, h, lay.current] * current
            z.append((patterns[u, h] @ v.unsqueeze(-1)).squeeze(-1))
        current = current + z[0]
        target = cfg.gamma * _shift(current) if cfg.form == "tsm" else target + _shift(z[1])
    return current
