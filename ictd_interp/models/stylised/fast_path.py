"""The training fast path: the paper-mask model's value row, exactly, without the residual stream.

Exact shortcuts of the paper mask (see ``docs/theory.md``, "Why the fast path is exact"):

* **Patterns from the features.** ``A`` is free only in its ``d x d`` feature block and no layer
  writes the feature rows, so layer ``l``'s scores are ``x_i^T A_l x_j`` whatever earlier layers did:
  each (layer, head) pattern is computed from the prompt's features before any value is. Keys are the
  ``n`` source positions only, so the query column needs no mask. One tensor per (layer, head): a
  stacked one would hand each use a full-size, zero-filled gradient in the backward pass.
* **One value row per head.** Each head writes one row (head 0 the current value, the dual form's
  head 1 the target value), so ``pattern @ v`` only needs that row's value ``w . z_i``: a batched
  matrix-vector product. Under autograd it is ``bmm`` with one column (the numerics the shipped models
  were trained with); the fused backward's forward uses ``torch.linalg.vecdot`` (faster than ``bmm``,
  whose backward it no longer needs: docs/performance.md, "Choices measured").
* **Query only at the end.** Training reads the query's prediction alone, so the last layer needs only
  the query row of its pattern (``query_only=True``).

The weights enter as ``reduced_weights``: ``A``'s feature blocks ``[unique, head, d, d]`` and ``V``'s
value rows ``[unique, head, d_model]``. ``paper_mask_values`` is differentiated either by autograd or by
the hand-written backward of ``fused_backward.py`` (``ICTDConfig.backward``), which records what it
needs on a ``Tape`` while running this same forward.

**A model axis** (``training/model_stack.py``): the weights may carry leading axes ``[*model, unique, ...]``
with prompts ``[*model, batch, pos, d_model]``, so ``M`` models of one shape run in the same operations.
Every position index below counts from the end, so without a model axis the operations are exactly the
single model's (bit for bit: a test holds it); with one, each model's values equal its own forward's up
to rounding (float64: 1e-12, tested).

No hook point runs here, so ``HookedICTDTransformer.fast_values`` takes this path only when no hook
of any kind is registered; the test suite holds it against the hooked forward in float64.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.tasks.prompt import PromptLayout


@dataclass
class Tape:
    """What the hand-written backward reads from a forward pass: the patterns (``full[u][h]``
    ``[batch, pos, source]``; ``last[h]`` ``[batch, 1, source]``, the last layer's query row when it is
    computed alone) and, per layer, its inputs ``current``/``target`` ``[batch, pos]``, each head's
    values ``v`` ``[batch, source]`` and outputs ``z`` ``[batch, rows]``."""

    full: list[list[Tensor]] = field(default_factory=list)
    last: list[Tensor] | None = None
    layers: list[tuple[Tensor, Tensor, list[Tensor], list[Tensor]]] = field(default_factory=list)


def reduced_weights(
    cfg: ICTDConfig,
    A: Float[Tensor, "*model unique head d_model d_model"],
    V: Float[Tensor, "*model unique head d_model d_model"],
) -> tuple[Float[Tensor, "*model unique head d_feat d_feat"], Float[Tensor, "*model unique head d_model"]]:
    """The entries the paper mask leaves free and the fast path reads: ``A``'s feature block and the row
    of ``V`` each head writes."""
    lay, d = PromptLayout(cfg.d_features), cfg.d_features
    rows = [lay.current, lay.target][: cfg.n_heads]
    return A[..., :d, :d], torch.stack([V[..., h, row, :] for h, row in enumerate(rows)], dim=-2)


def pattern(
    cfg: ICTDConfig,
    A_feat: Float[Tensor, "*model d_feat d_feat"],
    queries: Float[Tensor, "*model batch query d_feat"],
    sources: Float[Tensor, "*model batch source d_feat"],
) -> Float[Tensor, "*model batch query source"]:
    """One head's pattern over the source positions from the features alone (valid for the paper mask
    only): ``score[j, i] = x_i^T A x_j``."""
    if A_feat.ndim == 2:
        keys = queries @ A_feat.mT  # A x_j
    else:  # a model axis: one product per model over all its rows (a broadcast would take one per prompt)
        keys = (queries.flatten(-3, -2) @ A_feat.mT).view(queries.shape)
    scores = keys @ sources.mT  # (A x_j) . x_i
    if cfg.attention == "softmax":
        return torch.softmax(scores, dim=-1)
    return scores / sources.shape[-2]


def paper_mask_values(
    cfg: ICTDConfig,
    A_feat: Float[Tensor, "*model unique head d_feat d_feat"],
    w: Float[Tensor, "*model unique head d_model"],
    prompt: Float[Tensor, "*model batch pos d_model"],
    depth: int,
    query_only: bool = False,
    tape: Tape | None = None,
) -> Float[Tensor, "*model batch pos"] | Float[Tensor, "*model batch"]:
    """The value row after ``depth`` layers (another depth than ``cfg.n_layers`` needs tied weights), or
    only the query's value with ``query_only``; weights from ``reduced_weights``; ``tape`` records."""
    lay = PromptLayout(cfg.d_features)
    product = _bmm_product if tape is None else _dot_product
    x = prompt[..., lay.features]
    sources = x[..., :-1, :]
    unique, heads = A_feat.shape[-4], range(cfg.n_heads)
    last_alone = query_only and not cfg.tied  # the last layer's pattern is needed at the query only
    full = [[pattern(cfg, A_feat[..., u, h, :, :], x, sources) for h in heads] for u in range(unique - last_alone)]
    last = [pattern(cfg, A_feat[..., -1, h, :, :], x[..., -1:, :], sources) for h in heads] if last_alone else None
    fixed = torch.einsum("...bpm,...uhm->...uhbp", prompt[..., : lay.target], w[..., : lay.target])
    target, current = prompt[..., lay.target], prompt[..., lay.current]
    if tape is not None:
        tape.full, tape.last = full, last
    for layer in range(depth):
        u = 0 if cfg.tied else layer
        final = query_only and layer == depth - 1
        vs = [
            (
                fixed[..., u, h, :, :]
                + w[..., u, h, lay.target, None, None] * target
                + w[..., u, h, lay.current, None, None] * current
            )[..., :-1]
            for h in heads
        ]
        ps = last if final and last_alone else [p[..., -1:, :] for p in full[u]] if final else full[u]
        z = [product(p, v) for p, v in zip(ps, vs)]
        if tape is not None:
            tape.layers.append((current, target, vs, z))
        if final:
            return current[..., -1] + z[0][..., 0]
        current = current + z[0]
        target = cfg.gamma * shift_row(current) if cfg.form == "tsm" else target + shift_row(z[1])
    return current[..., -1] if query_only else current


def shift_row(x: Float[Tensor, "*model batch pos"]) -> Float[Tensor, "*model batch pos"]:
    """``shift_to_predecessor`` of a value row (positions last): position ``k < n`` receives ``k + 1``."""
    return torch.cat([x[..., 1:], torch.zeros_like(x[..., :1])], dim=-1)


def _bmm_product(
    p: Float[Tensor, "*model batch rows source"], v: Float[Tensor, "*model batch source"]
) -> Float[Tensor, "*model batch rows"]:
    return (p @ v.unsqueeze(-1)).squeeze(-1)


def _dot_product(
    p: Float[Tensor, "*model batch rows source"], v: Float[Tensor, "*model batch source"]
) -> Float[Tensor, "*model batch rows"]:
    return torch.linalg.vecdot(p, v.unsqueeze(-2))
