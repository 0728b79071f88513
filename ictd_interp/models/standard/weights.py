"""TransformerLens's weight processing for the standard architecture (``from_pretrained(..., fold_ln=True)``).

Each step rewrites the weights without changing any output, so that TransformerLens's direct
attribution (``decompose_resid(apply_ln=True)`` times ``tokens_to_residual_directions()``, which read
only ``hook_scale`` and ``W_U``) adds up to the model's value:

* ``fold_ln``: a LayerNorm ``(x - mean)/scale * w + b`` feeding ``W`` becomes ``(x - mean)/scale``
  feeding ``diag(w) W`` with bias ``b W`` added to the reader's bias (``ln1`` into ``W_Q, W_K, W_V``,
  ``ln2`` into ``W_in``, ``ln_final`` into ``W_U``); the LayerNorm keeps ``w = 1, b = 0``. The reading
  weights are then centred over ``d_model`` (their input is centred, so the mean direction reads 0).
* ``center_writing_weights``: every matrix writing to the residual stream (``W_E, W_pos, W_O, W_out``
  and their biases) loses its mean over ``d_model``: every reader is behind a LayerNorm, which removes
  the mean anyway. Needs ``layer_norm``.
* ``fold_value_biases``: a head's value bias ``b_V`` passes through attention unchanged (each pattern
  row sums to 1), so ``b_O += sum_h b_V[h] W_O[h]`` and ``b_V = 0``.

Tied blocks share their parameters, so they are processed once. The stylised model has no LayerNorm
and no biases: there is nothing to process.
"""

from __future__ import annotations

from typing import Optional

import torch
from einops import einsum
from torch import Tensor, nn


@torch.no_grad()
def process_weights_(
    model, fold_ln: bool = False, center_writing_weights: bool = False, fold_value_biases: bool = False
) -> None:
    """Apply the chosen steps to ``model`` (a ``HookedStandardTransformer``) in place, in TL's order."""
    blocks = list(model.blocks)[:1] if model.cfg.tied else list(model.blocks)
    if center_writing_weights and not model.cfg.layer_norm:
        raise ValueError(
            "center_writing_weights: this model has no LayerNorm (layer_norm=False), so its readers see "
            "the residual's mean: centring the writing weights would change the output"
        )
    if fold_ln and model.cfg.layer_norm:  # without LayerNorm there is nothing to fold
        _fold_layer_norms(model, blocks)
    if center_writing_weights:
        _center_writers(model, blocks)
    if fold_value_biases:
        for block in blocks:
            attn = block.attn
            attn.b_O.add_(einsum(attn.b_V, attn.W_O, "h e, h e d -> d"))
            attn.b_V.zero_()


def _fold_layer_norms(model, blocks: list[nn.Module]) -> None:
    """Every LayerNorm's scale and shift into the weights that read it."""
    for block in blocks:
        _fold_attention(block.ln1, block.attn)
        if hasattr(block, "mlp"):
            _fold_into(block.ln2, block.mlp.W_in, block.mlp.b_in)
    _fold_into(model.ln_final, model.unembed.W_U, model.unembed.b_U)


def _center_writers(model, blocks: list[nn.Module]) -> None:
    """Every weight that writes to the residual stream, centred over ``d_model``."""
    _center(model.embed.W_E, model.embed.b_E)
    if model.cfg.pos_embed:
        _center(model.pos_embed.W_pos)
    for block in blocks:
        _center(block.attn.W_O, block.attn.b_O)
        if hasattr(block, "mlp"):
            _center(block.mlp.W_out, block.mlp.b_out)


def _fold_attention(ln: nn.Module, attn: nn.Module) -> None:
    for W, b in ((attn.W_Q, attn.b_Q), (attn.W_K, attn.b_K), (attn.W_V, attn.b_V)):
        b.add_(einsum(ln.b, W, "d, h d e -> h e"))
        W.mul_(ln.w[None, :, None])
        W.sub_(W.mean(dim=1, keepdim=True))  # [head, d_model, d_head]: centred over d_model
    ln.w.fill_(1.0)
    ln.b.zero_()


def _fold_into(ln: nn.Module, W: Tensor, b: Tensor) -> None:
    """``W [d_model, out]``, ``b [out]``: the LayerNorm's scale and shift move into the reader."""
    b.add_(ln.b @ W)
    W.mul_(ln.w[:, None])
    W.sub_(W.mean(dim=0, keepdim=True))
    ln.w.fill_(1.0)
    ln.b.zero_()


def _center(W: Tensor, b: Optional[Tensor] = None) -> None:
    """Remove the mean over the last (``d_model``) axis of a writing matrix and its bias."""
    W.sub_(W.mean(dim=-1, keepdim=True))
    if b is not None:
        b.sub_(b.mean())
