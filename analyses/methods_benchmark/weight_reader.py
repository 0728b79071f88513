"""The weight reader: an edge ranking that never runs the model, built in as a reference row. A case a reader of
weights alone solves does not test whether a method reads activations; the report shows its score beside every
method's, so a method's score reads against it.

Derivation. An edge ``u -> v`` carries ``u``'s write as ``v`` reads it. ``u`` writes through a matrix into the
residual stream (the read-in ``W_E``; a head's ``W_V W_O``; an MLP's ``W_out``) and ``v`` reads through another (a
head's ``[W_Q | W_K | W_V]``; an MLP's ``W_in``; the output's ``W_U``), so ``||W_u R_v||_F`` bounds how much of any
write of unit size reaches ``v``: the edge's weight-only strength. A strong edge into a node that reaches the output
by weak paths matters little, so each edge is weighted by its reader's best path onward,
``reach(v) = max_w strength(v -> w) reach(w)``, ``reach(output) = 1``, in one backward sweep. LayerNorm and the
activations are ignored: they are what only a forward pass sees.

Features from weights alone (``unit_directions``): where an MLP writes sparse features, read each unit's write
direction, the unit-normalised row of ``W_out``; a unit is a feature exactly when the model's basis is the
features' (``superposed``), not where several units write one feature (``entangled``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ictd_interp.analyses.methods_benchmark.graph import OUTPUT, Edge, build_graph
from ictd_interp.models.standard.model import HookedStandardTransformer


def writer(model: HookedStandardTransformer, node: str) -> Tensor:
    """What ``node`` writes into the residual stream through: ``[its input, d_model]``."""
    if node == "embed":
        return model.embed.W_E
    layer, rest = int(node[1 : node.index(".")] if "." in node else node[1:]), node.split(".")[-1]
    if node.startswith("a"):
        attn, head = model.blocks[layer].attn, int(rest[1:])
        return attn.W_V[head] @ attn.W_O[head]
    return model.blocks[layer].mlp.W_out


def reader(model: HookedStandardTransformer, node: str) -> Tensor:
    """What ``node`` reads the residual stream through: ``[d_model, its input]``."""
    if node == OUTPUT:
        return model.unembed.W_U
    layer = int(node[1 : node.index(".")] if "." in node else node[1:])
    if node.startswith("a"):
        attn, head = model.blocks[layer].attn, int(node.split(".")[-1][1:])
        return torch.cat([attn.W_Q[head], attn.W_K[head], attn.W_V[head]], dim=-1)
    return model.blocks[layer].mlp.W_in


@torch.no_grad()
def unit_directions(model: HookedStandardTransformer, blocks: int) -> Tensor:
    """The MLP units of blocks ``0 .. blocks - 1``, each its unit write direction: ``[units, d_model]``."""
    rows = torch.cat([model.blocks[l].mlp.W_out.detach() for l in range(blocks)])
    return rows / rows.norm(dim=-1, keepdim=True)


@torch.no_grad()
def weight_scores(model: HookedStandardTransformer) -> dict[Edge, float]:
    """Every edge's ``||W_u R_v||_F`` times its reader's best path to the output (the module docstring)."""
    edges = build_graph(model).edges
    strength = {(u, v): float(torch.linalg.matrix_norm(writer(model, u) @ reader(model, v))) for u, v in edges}
    reach = {OUTPUT: 1.0}
    for u, v in reversed(edges):  # edges are listed by reader in forward order: a reader's onward edges come later
        reach[u] = max(reach.get(u, 0.0), strength[(u, v)] * reach.get(v, 0.0))
    return {(u, v): strength[(u, v)] * reach.get(v, 0.0) for u, v in edges}
