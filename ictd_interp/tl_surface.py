"""What TransformerLens's utilities read from a model, for ``HookedICTDTransformer``.

TransformerLens 4's ``model_protocol.TransformerLensModelWithWeights`` is the structural surface its
utilities accept (``cfg``, ``run_with_cache``/``run_with_hooks``, ``blocks``, ``ln_final``,
``accumulated_bias``, ``to_tokens``, ``tokens_to_residual_directions``); HookedTransformer's stacked
weights (``W_Q`` ... ``QK``, ``OV``) and ``all_composition_scores`` come with it. Our "tokens" are
continuous prompts ``[batch, pos, d_model]`` and the single read-out is the current-value row.
"""

from __future__ import annotations

from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.FactoredMatrix import FactoredMatrix

try:  # TransformerLens 4
    from transformer_lens.utilities import composition_scores
except ImportError:  # TransformerLens 3.x
    from transformer_lens.utils import composition_scores


class Circuits:
    """``QK = W_Q W_K^T`` and ``OV = W_V W_O`` as ``FactoredMatrix`` views, for one layer (``[head, ...]``)
    or the whole model (``[layer, head, ...]``): score = ``z_query^T QK z_key`` (``A^T``), written
    vector = ``z_source^T OV`` (``V^T``, before any shift)."""

    @property
    def QK(self) -> FactoredMatrix:
        return FactoredMatrix(self.W_Q, self.W_K.transpose(-1, -2))

    @property
    def OV(self) -> FactoredMatrix:
        return FactoredMatrix(self.W_V, self.W_O)


class TransformerLensSurface(Circuits):
    """Mixin for both ICTD model classes: needs ``cfg``, ``blocks`` (each with ``attn``, and ``mlp``
    where present), ``ln_final``, ``check_prompt`` and ``readout_direction()``."""

    def _stack(self, name: str) -> Tensor:
        return torch.stack([getattr(b.attn, name) for b in self.blocks])

    @property
    def W_Q(self) -> Float[Tensor, "layer head d_model d_head"]:
        return self._stack("W_Q")

    @property
    def W_K(self) -> Float[Tensor, "layer head d_model d_head"]:
        return self._stack("W_K")

    @property
    def W_V(self) -> Float[Tensor, "layer head d_model d_head"]:
        return self._stack("W_V")

    @property
    def W_O(self) -> Float[Tensor, "layer head d_head d_model"]:
        return self._stack("W_O")

    def all_composition_scores(self, mode: str) -> Float[Tensor, "layer head layer head"]:
        """``||OV_{l,h} R_{l',h'}||_F / (||OV|| ||R||)`` for every earlier ``l`` and later ``l'``, where
        ``R`` is the QK circuit (``mode="Q"``), its transpose (``"K"``) or the OV circuit (``"V"``);
        zero where ``l >= l'`` (as HookedTransformer)."""
        rights = {"Q": lambda: self.QK, "K": lambda: self.QK.T, "V": lambda: self.OV}
        if mode not in rights:
            raise ValueError(f"mode: must be one of {tuple(rights)}, got {mode!r}")
        scores = composition_scores(self.OV, rights[mode](), broadcast_dims=True)
        layers = torch.arange(self.cfg.n_layers, device=scores.device)
        earlier = layers[:, None, None, None] < layers[None, None, :, None]
        return torch.where(earlier, scores, torch.zeros_like(scores))

    def accumulated_bias(self, layer: int, mlp_input: bool = False, include_mlp_biases: bool = True) -> Tensor:
        """Sum of the output biases written before ``layer`` (as HookedTransformer's): each attention's
        ``b_O`` and, with ``include_mlp_biases``, each MLP's ``b_out``; ``mlp_input`` adds layer
        ``layer``'s attention bias. The stylised model has no biases (zeros)."""
        param = next(self.parameters())
        bias = torch.zeros(self.cfg.d_model, dtype=param.dtype, device=param.device)
        for block in self.blocks[:layer]:
            bias = bias + block.attn.b_O
            if include_mlp_biases and hasattr(block, "mlp"):
                bias = bias + block.mlp.b_out
        return bias + self.blocks[layer].attn.b_O if mlp_input else bias

    def to_tokens(self, prompt: Tensor, *args, **kwargs) -> Tensor:
        """Continuous prompts are the model's tokens: validated and copied, ``[batch, pos, d_prompt]``."""
        return self.check_prompt(prompt)

    def tokens_to_residual_directions(self, tokens: Optional[Tensor] = None) -> Float[Tensor, "d_model"]:
        """The direction the value read-out takes from the (final) residual stream."""
        return self.readout_direction()

    def to_single_token(self, string: str) -> int:
        raise ValueError("to_single_token: ICTD prompts are continuous (no vocabulary); build prompts with "
                         "ictd_interp.build_prompt or sample_tasks(...).prompt")

    @property
    def config(self):
        """``cfg`` under the name pyvene reads."""
        return self.cfg

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def _apply(self, fn, *args, **kwargs):
        """Keep ``cfg.device`` in sync with the weights (TransformerLens utilities read it)."""
        out = super()._apply(fn, *args, **kwargs)
        self.cfg.device = str(next(self.parameters()).device)
        return out
