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
from transformer_lens.ActivationCache import ActivationCache
from transformer_lens.FactoredMatrix import FactoredMatrix

from ictd_interp.config.fields import dtype_name
from ictd_interp.io.checkpoint import read_checkpoint
from ictd_interp.io.pretrained import resolve
from ictd_interp.models.base import ModelBase
from ictd_interp.models.loading import model_from
from ictd_interp.models.patching_guard import PATCHING_MESSAGE, from_tl_patching, patching_allowed

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


class TransformerLensSurface(Circuits, ModelBase):
    """Mixin for both ICTD model classes: needs ``cfg``, ``blocks`` (each with ``attn``, and ``mlp``
    where present), ``ln_final``, ``check_prompt`` and ``readout_direction()``."""

    def _stack(self, name: str) -> Tensor:
        return torch.stack([getattr(b.attn, name) for b in self.blocks])

    def residual_position_labels(self, n_prompt: int) -> list[str]:
        """What each residual-stream position holds for a prompt of ``n_prompt`` positions (one per prompt
        position here: the context ``S_0 .. S_{n-1}``, then the query)."""
        return [f"context S_{j}" for j in range(n_prompt - 1)] + [f"query S_{n_prompt - 1} (the prediction)"]

    def run_with_cache(self, *args, **kwargs) -> tuple[Tensor, ActivationCache]:
        """As TransformerLens: the output and an ``ActivationCache`` (``cache["pattern", 0]`` works)."""
        out, cache = super().run_with_cache(*args, **kwargs)
        return out, ActivationCache(cache, self, has_batch_dim=not kwargs.get("remove_batch_dim", False))

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

    def run_with_hooks(self, *model_args, fwd_hooks=(), bwd_hooks=(), **kwargs):
        """``HookedRootModule.run_with_hooks``, refusing TransformerLens's token patching called directly
        (``PATCHING_MESSAGE``)."""
        if not patching_allowed() and any(from_tl_patching(fn) for _, fn in fwd_hooks):
            prompt = model_args[0] if model_args else kwargs.get("input")
            raise ValueError(PATCHING_MESSAGE.format(d=prompt.shape[-1], n=prompt.shape[1]))
        return super().run_with_hooks(*model_args, fwd_hooks=list(fwd_hooks), bwd_hooks=list(bwd_hooks), **kwargs)

    def to_tokens(self, prompt: Tensor, *args, **kwargs) -> Tensor:
        """Continuous prompts are the model's tokens: validated and copied, ``[batch, pos, d_prompt]``."""
        return self.check_prompt(prompt)

    def tokens_to_residual_directions(self, tokens: Optional[Tensor] = None) -> Float[Tensor, "d_model"]:
        """The direction the value read-out takes from the (final) residual stream. Behind a final LayerNorm
        this is TransformerLens's convention: exact for direct attribution once the LayerNorm is folded
        (``from_pretrained(..., fold_ln=True)``), as with HookedTransformer."""
        return self.readout_direction()

    def to_single_token(self, string: str) -> int:
        raise ValueError(
            "to_single_token: ICTD prompts are continuous (no vocabulary); build prompts with "
            "ictd_interp.build_prompt or sample_tasks(...).prompt"
        )

    @property
    def config(self):
        """``cfg`` under the name pyvene reads."""
        return self.cfg

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def _apply(self, fn, *args, **kwargs):
        """Keep ``cfg.device`` and ``cfg.dtype`` in sync with the weights (TransformerLens utilities read
        them); the model owns its ``cfg`` (a copy made at construction), so no caller's object changes."""
        before = next(self.parameters()).dtype
        out = super()._apply(fn, *args, **kwargs)
        param = next(self.parameters())
        if (asked := param.dtype) not in (torch.float32, torch.float64):  # its checks and constructions assume these
            super()._apply(lambda t: t.to(before) if t.is_floating_point() else t)
            raise ValueError(
                f"dtype: {type(self).__name__} runs in float32 or float64, got {asked}; the model "
                f"is left in {before} (``model.to(torch.float64)`` for more precision)"
            )
        self.cfg.device = str(param.device)
        self.cfg.dtype = str(param.dtype).removeprefix("torch.")
        return out

    @classmethod
    def from_pretrained(
        cls,
        name_or_path,
        device: Optional[str] = None,
        dtype=None,
        fold_ln: bool = False,
        center_writing_weights: bool = False,
        fold_value_biases: bool = False,
    ):
        """A shipped model by name (``ictd_interp.list_pretrained()``) or a checkpoint folder written by
        ``ictd_interp.save_checkpoint``, in eval mode; ``dtype`` (``"float64"`` or ``torch.float64``)
        converts the weights and the config together. ``fold_ln``, ``center_writing_weights`` and
        ``fold_value_biases`` process the weights as TransformerLens's ``from_pretrained`` does (outputs
        unchanged; the class's ``process_weights_``): the stylised and linear models have no LayerNorm and no
        biases, so for them they change nothing. One implementation for every model class."""
        model = model_from(read_checkpoint(resolve(name_or_path)), expected=cls)
        if dtype is not None:
            model = model.to(getattr(torch, dtype_name(dtype)))
        if fold_ln or center_writing_weights or fold_value_biases:
            model.process_weights_(fold_ln, center_writing_weights, fold_value_biases)
        return model if device is None else model.to(device)
