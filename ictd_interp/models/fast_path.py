"""The training fast path: the paper-mask model's value row, exactly, without the residual stream.

Exact shortcuts of the paper mask (see ``docs/theory.md``, "Why the fast path is exact"):

* **Patterns from the features.** ``A`` is free only in its ``d x d`` feature block and no layer
  writes the feature rows, so layer ``l``'s scores are ``x_i^T A_l x_j`` whatever earlier layers did:
  each (layer, head) pattern is computed from the prompt's features before any value is. Keys are the
  ``n`` source positions only, so the query column needs no mask. One tensor per (layer, head): a
  stacked one would hand each use a full-size, zero-filled gradient in the backward pass.
* **A matrix-vector value path.** Each head writes one row (head 0 the current value, the dual form's
  head 1 the target value), so ``pattern @ v`` only needs that row's value ``V[row] . z_i``: one
  ``[batch, pos, source] x [batch, source, 1]`` product per head and layer, not a ``d_model``-wide one
  (measured faster than an elementwise product and a sum, forward and backward:
  ``benchmarks/train_throughput.py``).
* **Query only at the end.** Training reads the query's prediction alone, so the last layer needs only
  the query row of its pattern (``query_only=True``).

No hook point runs here, so ``HookedICTDTransformer.fast_values`` takes this path only when no hook
of any kind is registered; the test suite holds it against the hooked forward in float64.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config.model import ICTDConfig
from ictd_interp.tasks.prompt import PromptLayout, shift_to_predecessor


def pattern(
    cfg: ICTDConfig, A: Float[Tensor, "d_model d_model"], queries: Float[Tensor, "batch query d_feat"],
    sources: Float[Tensor, "batch source d_feat"],
) -> Float[Tensor, "batch query source"]:
    """One head's pattern over the source positions from the features alone (valid for the paper mask
    only): ``score[j, i] = x_i^T A x_j``."""
    d = cfg.d_features
    scores = (queries @ A[:d, :d].T) @ sources.transpose(-1, -2)  # (A x_j) . x_i
    if cfg.attention == "softmax":
        return torch.softmax(scores, dim=-1)
    return scores / sources.shape[1]


def paper_mask_values(
    cfg: ICTDConfig, A: Float[Tensor, "unique head d_model d_model"], V: Float[Tensor, "unique head d_model d_model"],
    prompt: Float[Tensor, "batch pos d_model"], depth: int | None = None, query_only: bool = False,
) -> Float[Tensor, "batch pos"] | Float[Tensor, "batch"]:
    """The value row after ``depth`` layers (default ``cfg.n_layers``; another depth needs tied
    weights), or only the query's value with ``query_only``; ``A``/``V`` stacked over unique layers."""
    lay = PromptLayout(cfg.d_features)
    depth = cfg.n_layers if depth is None else depth
    x = prompt[..., lay.features]
    sources = x[:, :-1]
    unique, heads = A.shape[0], range(cfg.n_heads)
    last_alone = query_only and not cfg.tied  # the last layer's pattern is needed at the query only
    full = [[pattern(cfg, A[u, h], x, sources) for h in heads] for u in range(unique - last_alone)]
    last = [pattern(cfg, A[-1, h], x[:, -1:], sources) for h in heads] if last_alone else None
    rows = [lay.current, lay.target][: cfg.n_heads]
    w = torch.stack([V[:, h, row] for h, row in enumerate(rows)], dim=1)  # [unique, head, d_model]
    fixed = torch.einsum("bpm,uhm->uhbp", prompt[..., : lay.target], w[..., : lay.target])
    target, current = prompt[..., lay.target], prompt[..., lay.current]
    for layer in range(depth):
        u = 0 if cfg.tied else layer
        final = query_only and layer == depth - 1
        z = []
        for h in heads:
            v = (fixed[u, h] + w[u, h, lay.target] * target + w[u, h, lay.current] * current)[:, :-1]
            p = last[h] if final and last_alone else full[u][h][:, -1:] if final else full[u][h]
            z.append((p @ v.unsqueeze(-1)).squeeze(-1))
        if final:
            return current[:, -1] + z[0][:, 0]
        current = current + z[0]
        target = cfg.gamma * shift_to_predecessor(current) if cfg.form == "tsm" else target + shift_to_predecessor(z[1])
    return current[:, -1] if query_only else current
