"""θ*'s circuit written into the standard architecture (docs/theory.md §10), as small pure functions.

Derivation (one head per layer, ``d_model = d_head = d + 3``, no MLP, no LayerNorm, identity read-in):

* Read-in. ``W_E = I``: the residual stream at input is the prompt, ``x_j = (φ(S_j), R_{j+1}, 0, 0)`` (the
  value rows are 0 at input, and nothing in this architecture ever writes the target row).
* Scores. ``W_Q = A*ᵀ √d_head``, ``W_K = I``: ``q_j · k_i / √d_head = x_j A*ᵀ x_iᵀ = z_iᵀ A* z_j`` — the stylised
  layer's score, so the pattern is the kernel ``K(S_i, S_j)`` of softmax-weighted TD.
* Values. ``W_V = V*ᵀ``, ``W_O = I``: head output ``Σ_i K(S_i, S_j) V* x_i``, which adds
  ``α (R_{i+1} + t_i − v_i)`` to the current row, with the target row ``t_i = 0``.
* Read-out. ``W_U = e_current``: the value at every position.

So each layer computes ``v ← v + α K (R − v)``: the stylised θ* with its bootstrap path cut (the shift that
fills the target row with ``γ v(S_{j+1})`` has no counterpart in a standard block), equal to
``HookedICTDTransformer.from_theta_star`` under ``ictd_interp.hooks.ablation.ablate_target_path`` layer by layer
(tests/unit/test_standard_circuits.py, float64, 1e-10).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config.standard import StandardConfig
from ictd_interp.models.standard.model import HookedStandardTransformer
from ictd_interp.models.stylised.model import HookedICTDTransformer


def standard_config_for(star: HookedICTDTransformer, **overrides) -> StandardConfig:
    """The smallest standard config that holds ``star``'s circuit: one head of width ``d + 3`` per layer."""
    d = star.cfg.d_features
    return StandardConfig(
        **{
            "d_features": d,
            "d_model": d + 3,
            "d_head": d + 3,
            "n_heads": 1,
            "n_layers": star.cfg.n_layers,
            "d_mlp": 0,
            "layer_norm": False,
            "dtype": "float64",
            **overrides,
        }
    )


def theta_star_weights(star: HookedICTDTransformer, cfg: StandardConfig) -> dict[str, Float[Tensor, "..."]]:
    """θ*'s A and V as head 0's QK and OV circuits (``1/√d_head`` undone) in the first ``d + 3`` residual
    dimensions; every other weight 0. ``cfg`` may be wider (more heads, dimensions, MLP units) than
    ``standard_config_for(star)``; the extra parts are left 0 for the caller to fill."""
    d, e = star.cfg.d_features, cfg.d_head
    m = d + 3
    if cfg.d_features != d or cfg.n_layers != star.cfg.n_layers or cfg.d_model < m or e < m:
        raise ValueError(
            f"standard config: needs d_features={d}, n_layers={star.cfg.n_layers}, d_model >= {m} "
            f"and d_head >= {m} to hold θ*, got {cfg.d_features}, {cfg.n_layers}, {cfg.d_model}, {e}"
        )
    if star.cfg.attention != "softmax":
        raise ValueError(
            f"attention: θ*'s circuit in a standard block needs softmax attention, got {star.cfg.attention!r}"
        )
    if cfg.layer_norm or cfg.pos_embed:
        raise ValueError("standard config: θ*'s circuit is written without LayerNorm and positional embeddings")
    shapes = HookedStandardTransformer(cfg).state_dict()
    weights = {k: torch.zeros_like(v, dtype=torch.float64) for k, v in shapes.items()}
    eye = torch.eye(m, dtype=torch.float64)
    weights["embed.W_E"][:, :m] = eye
    weights["unembed.W_U"][star.layout.current, 0] = 1.0
    for l, block in enumerate(star.blocks):
        A, V = block.attn.A[0].to(torch.float64), block.attn.V[0].to(torch.float64)
        weights[f"blocks.{l}.attn.W_Q"][0, :m, :m] = A.T * math.sqrt(e)
        weights[f"blocks.{l}.attn.W_K"][0, :m, :m] = eye
        weights[f"blocks.{l}.attn.W_V"][0, :m, :m] = V.T
        weights[f"blocks.{l}.attn.W_O"][0, :m, :m] = eye
    return weights


def standard_theta_star(star: HookedICTDTransformer) -> HookedStandardTransformer:
    """A one-head standard model computing ``star``'s layers with the bootstrap path cut (module docstring)."""
    model = HookedStandardTransformer(standard_config_for(star))
    model.load_state_dict(theta_star_weights(star, model.cfg))
    return model
