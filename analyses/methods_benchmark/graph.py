"""The computation graph of a standard-architecture model, node by node, with edges that can be patched.

Nodes are the writers to the residual stream: ``embed`` (read-in plus positional embedding), every head
``a{l}.h{h}`` and every MLP ``m{l}``. Destinations are the readers: every head (through its query, key and
value: one input), every MLP, and ``output`` (the final LayerNorm and read-out). An edge ``u -> v`` is
``u``'s write as ``v`` reads it. Because the residual stream is a sum, a destination's input is
``Σ_u out_u + biases``, and patching the edge replaces ``out_u`` by ``u``'s output on the corrupted prompts
in ``v``'s input alone (ACDC's and edge attribution patching's convention: later nodes then see the
change through the edges that remain). With no patch the graph forward is the hooked forward
(tests/unit/test_methods_benchmark.py, float64, 1e-12). This is the small graph adapter the methods share, in
the place of ``auto-circuit``'s patchable model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
from einops import einsum
from jaxtyping import Float
from torch import Tensor

from ictd_interp.models.standard.model import HookedStandardTransformer

Edge = tuple[str, str]
OUTPUT = "output"


@dataclass(frozen=True)
class Graph:
    """Node and destination names in forward order, and every edge ``(source, destination)``."""

    nodes: tuple[str, ...]
    destinations: tuple[str, ...]
    edges: tuple[Edge, ...]


def head_name(layer: int, head: int) -> str:
    return f"a{layer}.h{head}"


def mlp_name(layer: int) -> str:
    return f"m{layer}"


def _layer_readers(model: HookedStandardTransformer, layer: int) -> list[list[str]]:
    """The destinations of one block in the order they read: its heads together, then its MLP."""
    heads = [head_name(layer, h) for h in range(model.cfg.n_heads)]
    return [heads] + ([[mlp_name(layer)]] if not model.cfg.attn_only else [])


def build_graph(model: HookedStandardTransformer) -> Graph:
    """Every edge from a writer to a later reader (heads of one layer read the same residual stream)."""
    nodes, destinations, edges = ["embed"], [], []
    for layer in range(model.cfg.n_layers):
        for group in _layer_readers(model, layer):
            destinations += group
            edges += [(u, v) for v in group for u in nodes]
            nodes += group
    destinations.append(OUTPUT)
    edges += [(u, OUTPUT) for u in nodes]
    return Graph(tuple(nodes), tuple(destinations), tuple(edges))


def _head(
    model: HookedStandardTransformer, layer: int, head: int, x: Float[Tensor, "batch pos d_model"]
) -> Float[Tensor, "batch pos d_model"]:
    """One head's write from its own input (the block's ``ln1`` applied to it), as ``StandardAttention``."""
    block = model.blocks[layer]
    attn, x = block.attn, block.ln1(x)
    q = x @ attn.W_Q[head] + attn.b_Q[head]
    k = x @ attn.W_K[head] + attn.b_K[head]
    v = x @ attn.W_V[head] + attn.b_V[head]
    scores = einsum(q, k, "b q e, b k e -> b q k") / math.sqrt(model.cfg.d_head)
    scores[..., -1] = float("-inf")  # the query (last) position is never a source
    z = torch.softmax(scores, dim=-1) @ v
    return z @ attn.W_O[head]


def _mlp(model: HookedStandardTransformer, layer: int, x: Tensor) -> Tensor:
    block = model.blocks[layer]
    return block.mlp(block.ln2(x))


def run_graph(
    model: HookedStandardTransformer,
    prompt: Float[Tensor, "batch pos d_prompt"],
    patched: Optional[dict[Edge, Tensor]] = None,
    embed: Optional[Tensor] = None,
    probes: Optional[dict[str, Tensor]] = None,
    keep: Optional[tuple[dict[Edge, Tensor], dict[str, Tensor]]] = None,
) -> tuple[dict[str, Tensor], Float[Tensor, "batch"]]:
    """Every node's output and the query prediction. ``patched[(u, v)]`` is the value ``u`` writes into ``v``'s
    input instead of its own output (its output on the corrupted prompts); ``embed`` replaces the read-in's
    output (integrated gradients interpolate it); ``probes[v]``, zeros with ``requires_grad``, is added to
    ``v``'s input so that its gradient is ``∂ prediction / ∂ input_v``. ``keep = (masks, corrupted)``: edge
    ``(u, v)`` carries ``m`` of ``u``'s output in this run and ``1 − m`` of its output on the corrupted prompts
    (``corrupted[u]``), for a mask ``m = masks[(u, v)]`` in [0, 1], differentiable (mask optimisation)."""
    patched, probes = patched or {}, probes or {}
    by_destination: dict[str, list[tuple[str, Tensor]]] = {}
    for (u, v), value in patched.items():
        by_destination.setdefault(v, []).append((u, value))
    if embed is None:
        embed = model.embed(prompt) + (model.pos_embed(prompt) if model.cfg.pos_embed else 0)
    out, resid = {"embed": embed}, embed

    masks, corrupted = keep if keep is not None else ({}, {})

    def read(v: str) -> Tensor:
        x = resid
        for u, value in by_destination.get(v, []):
            x = x + (value - out[u])
        for u in (u for (u, w) in masks if w == v):
            x = x + (1 - masks[(u, v)]) * (corrupted[u] - out[u])
        return x + probes[v] if v in probes else x

    for layer in range(model.cfg.n_layers):
        heads = [head_name(layer, h) for h in range(model.cfg.n_heads)]
        written = {v: _head(model, layer, h, read(v)) for h, v in enumerate(heads)}
        out.update(written)
        resid = resid + sum(written.values()) + model.blocks[layer].attn.b_O
        if not model.cfg.attn_only:
            v = mlp_name(layer)
            out[v] = _mlp(model, layer, read(v))
            resid = resid + out[v]
    values = model.unembed(model.ln_final(read(OUTPUT)))
    return out, values[:, -1]
