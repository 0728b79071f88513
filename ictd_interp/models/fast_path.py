"""The training fast path: the paper-mask model's value row, exactly, without the residual stream.

Exact shortcuts of the paper mask (see ``docs/theory.md``, "Why the fast path is exact"):

* **All patterns at once.** ``A`` is free only in its ``d x d`` feature block and no layer writes the
  feature rows, so layer ``l``'s scores are ``x_i^T A_l x_j`` whatever earlier layers did. Every
  layer's (and head's) pattern comes from one batched score computation and one softmax over
  ``[unique_layer, head, batch, query_pos, source]`` before any value is computed. Keys are the
  ``n`` source positions only, so the query column needs no mask.
* **A matrix-vector value path.** Each head writes one row (head 0 the current value, the dual form's
  head 1 the target value), so ``pattern @ v`` only needs that row's value ``V[row] . z_i``: a
  ``[batch, pos, source] x [batch, source]`` product per head and layer, not a ``d_model``-wide one
  (an elementwise product and a sum: on CPU, batched GEMV is several times slower).
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


def patterns(
    cfg: ICTDConfig, A: Float[Tensor, "unique head d_model d_model"], queries: Float[Tensor, "batch query d_feat"],
    sources: Float[Tensor, "batch source d_feat"],
) -> Float[Tensor, "unique head batch query source"]:
    """Patterns over the source positions from the features alone (valid for the paper mask only):
    ``score[j, i] = x_i^T A x_j``, one batched product for every layer and head."""
    d = cfg.d_features
    q = torch.einsum("bjf,uhef->uhbje", queries, A[..., :d, :d])  # A z_j on the feature block
    scores = q @ sources.transpose(-1, -2)
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
    unique = A.shape[0]
    last_alone = query_only and not cfg.tied  # the last layer's pattern is needed at the query only
    full = patterns(cfg, A[: unique - 1] if last_alone else A, x, sources)
    last = patterns(cfg, A[unique - 1 :], x[:, -1:], sources) if last_alone else None
    rows = [lay.current, lay.target][: cfg.n_heads]
    w = torch.stack([V[:, h, row] for h, row in enumerate(rows)], dim=1)  # [unique, head, d_model]
    fixed = torch.einsum("bpm,uhm->uhbp", prompt[..., : lay.target], w[..., : lay.target])
    target, current = prompt[..., lay.target], prompt[..., lay.current]
    for layer in range(depth):
        u = 0 if cfg.tied else layer
        final = query_only and layer == depth - 1
        z = []
        for h in range(cfg.n_heads):
            v = (fixed[u, h] + w[u, h, lay.target] * target + w[u, h, lay.current] * current)[:, :-1]
            pattern = last[0, h] if final and last_alone else full[u, h][:, -1:] if final else full[u, h]
            z.append((pattern * v[:, None, :]).sum(-1))
        if final:
            return current[:, -1] + z[0][:, 0]
        current = current + z[0]
        target = cfg.gamma * shift_to_predecessor(current) if cfg.form == "tsm" else target + shift_to_predecessor(z[1])
    return current[:, -1] if query_only else current
