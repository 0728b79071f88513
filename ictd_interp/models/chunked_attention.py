"""Attention over chunks of query positions: memory linear in the context length.

The full forward holds the ``[batch, head, query, source]`` scores and pattern: O(n²) memory, 80 GB per head
and task at n = 10⁵ in float64. Each query's softmax reads only its own row of scores, so the rows can be
computed ``QUERY_CHUNK`` queries at a time and dropped once their ``z`` is written: the same values (each row's
scores, softmax and weighted sum are the same sums; the matrix products' blocking may round differently, within
1e-12 in float64: tests/unit/test_chunked.py), O(QUERY_CHUNK · n) memory per head and task. The attention modules take
this path only when the context is longer than ``QUERY_CHUNK`` (so every shorter forward is the full one, bit
for bit) and no hook is attached to ``hook_attn_scores`` or ``hook_pattern`` (a hook there needs the whole
tensor: then the full forward runs, at its cost). Peak memory against n: ``benchmarks/long_context.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.hook_points import HookPoint

QUERY_CHUNK = 1024


def hooked(*points: torch.nn.Module) -> bool:
    """Whether any forward, pre-forward or backward hook is attached to one of ``points`` (modules)."""
    return any(p._forward_hooks or p._forward_pre_hooks or p._backward_hooks or p._backward_pre_hooks for p in points)


def use_chunks(n_positions: int, *points: HookPoint) -> bool:
    """The explicit choice: chunks when the context exceeds ``QUERY_CHUNK`` and no hook needs the pattern."""
    return n_positions > QUERY_CHUNK and not hooked(*points)


def chunked_attention(
    q: Float[Tensor, "batch head query d"],
    k_t: Float[Tensor, "batch head d key"],
    v: Float[Tensor, "batch head key e"],
    pattern_fn: Callable[[Tensor], Tensor],
    scale: float = 1.0,
) -> Float[Tensor, "batch head query e"]:
    """``pattern_fn(q k / scale, the last source masked) @ v``, ``QUERY_CHUNK`` query rows at a time."""
    parts = []
    for start in range(0, q.shape[2], QUERY_CHUNK):
        scores = q[:, :, start : start + QUERY_CHUNK] @ k_t
        if scale != 1.0:
            scores = scores / scale
        scores[..., -1] = float("-inf")  # the query (last) position is never a source
        parts.append(pattern_fn(scores) @ v)
    return torch.cat(parts, dim=2)
