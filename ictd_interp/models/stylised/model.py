"""The hooked ICTD transformer (docs/theory.md §4): one class for theta* and for trained weights.

Residual stream = prompt rows (``[batch, pos, d_model]``). Per layer, attention with query
``A z_j``, key ``z_i`` and value ``V z_i``, no ``1/sqrt(d)``, the query position masked as a source;
then either the parameter-free temporal shift (TSM form) or, in the dual form, a second head whose
output is shifted to the predecessor position. Every intermediate is a ``HookPoint`` named as in
TransformerLens's HookedTransformer.
"""

from __future__ import annotations

from typing import Optional, Union

import torch
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint
from transformer_lens.HookedRootModule import HookedRootModule

from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.models.base import check_return_type, check_tasks, select_return
from ictd_interp.models.chunked_attention import chunked_attention, use_chunks
from ictd_interp.models.hook_names import attn_param
from ictd_interp.models.stylised.fast_path import paper_mask_values, reduced_weights
from ictd_interp.models.stylised.fused_backward import fused_values
from ictd_interp.models.stylised.masks import attention_mask, value_mask
from ictd_interp.models.tl_surface import Circuits, TransformerLensSurface
from ictd_interp.tasks.prompt import PromptLayout, check_prompt, shift_to_predecessor


def softmax_pattern(
    scores: Float[Tensor, "batch head query_pos key_pos"],
) -> Float[Tensor, "batch head query_pos key_pos"]:
    return torch.softmax(scores, dim=-1)


def linear_pattern(
    scores: Float[Tensor, "batch head query_pos key_pos"],
) -> Float[Tensor, "batch head query_pos key_pos"]:
    """The predecessor's ``(1/n) M0 (Z^T A Z)``: the masked (query) source gets weight 0."""
    n = scores.shape[-1] - 1
    return scores.masked_fill(scores == float("-inf"), 0.0) / n


class ICTDAttention(Circuits, nn.Module):
    """One attention layer; ``A`` is the QK circuit and ``V`` the OV circuit of each head."""

    def __init__(self, cfg: ICTDConfig):
        super().__init__()
        self.cfg = cfg
        shape = (cfg.n_heads, cfg.d_model, cfg.d_model)
        self.A = nn.Parameter(torch.zeros(shape, dtype=cfg.torch_dtype))
        self.V = nn.Parameter(torch.zeros(shape, dtype=cfg.torch_dtype))
        self.register_buffer("mask_A", attention_mask(cfg), persistent=False)
        self.register_buffer("mask_V", value_mask(cfg), persistent=False)
        # Heads whose output is shifted to the predecessor position (the dual form's target head).
        self.register_buffer("shifted_heads", torch.arange(cfg.n_heads) >= 1, persistent=False)
        self.pattern_fn = softmax_pattern if cfg.attention == "softmax" else linear_pattern
        self.hook_q = HookPoint()  # [batch, pos, head, d_head]
        self.hook_k = HookPoint()  # [batch, pos, head, d_head]
        self.hook_v = HookPoint()  # [batch, pos, head, d_head]
        self.hook_attn_scores = HookPoint()  # [batch, head, query_pos, key_pos]
        self.hook_pattern = HookPoint()  # [batch, head, query_pos, key_pos]
        self.hook_z = HookPoint()  # [batch, pos, head, d_head]
        self.hook_result = HookPoint()  # [batch, pos, head, d_model]

    def forward(self, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        """Every hook output is a fresh tensor: an in-place edit in a hook changes only what flows
        downstream of that hook (never the residual stream, the caller's prompt or another activation)."""
        if use_chunks(resid.shape[1], self.hook_attn_scores, self.hook_pattern):  # no pattern held: O(n) memory
            q, k = self._qk(resid)
            v = self.hook_v(self._project(resid, self.V))
            z = chunked_attention(q.permute(0, 2, 1, 3), k.permute(0, 2, 3, 1), v.transpose(1, 2), self.pattern_fn)
            z = self.hook_z(z.transpose(1, 2))
        else:
            pattern = self._pattern(resid)
            v = self.hook_v(self._project(resid, self.V))
            # z = pattern @ v per head: [batch, head, query, key] @ [batch, head, key, d] (faster on CPU than the
            # transposed product (v^T pattern^T)^T: docs/performance.md, "Choices measured")
            z = self.hook_z((pattern @ v.transpose(1, 2)).transpose(1, 2))
        result = self.hook_result(self._shift_heads(z))
        return result.sum(dim=2)

    def _qk(self, resid: Float[Tensor, "batch pos d_model"]) -> tuple[Tensor, Tensor]:
        """``q, k [batch, pos, head, d_model]`` through their hooks."""
        q = self.hook_q(self._project(resid, self.A))
        k = self.hook_k(resid.unsqueeze(2).repeat(1, 1, self.cfg.n_heads, 1))  # a copy, not a view of resid
        return q, k

    def _pattern(self, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch head query_pos key_pos"]:
        q, k = self._qk(resid)
        scores = q.permute(0, 2, 1, 3) @ k.permute(0, 2, 3, 1)
        scores[..., -1] = float("-inf")  # M: the query (last) position is never a source
        return self.hook_pattern(self.pattern_fn(self.hook_attn_scores(scores)))

    @staticmethod
    def _project(
        resid: Float[Tensor, "batch pos d_model"], W: Float[Tensor, "head d m"]
    ) -> Float[Tensor, "batch pos head d"]:
        """``W z`` for every position and head, as one flat GEMM."""
        flat = resid.reshape(-1, resid.shape[-1]) @ W.flatten(0, 1).T  # [m, (head d)]
        return flat.view(*resid.shape[:2], W.shape[0], W.shape[1])

    def _shift_heads(self, z: Float[Tensor, "batch pos head d"]) -> Float[Tensor, "batch pos head d"]:
        if self.cfg.n_heads == 1:
            return z.clone()
        return torch.where(self.shifted_heads[:, None], shift_to_predecessor(z), z)

    # TransformerLens weight names: q = z W_Q, k = z W_K, v = z W_V, result = z W_O (per head).
    @property
    def W_Q(self) -> Float[Tensor, "head d_model d_head"]:
        return self.A.transpose(-1, -2)

    @property
    def W_K(self) -> Float[Tensor, "head d_model d_head"]:
        """The key is the residual itself (``hook_k`` = ``z``): the identity."""
        return self._eye()

    @property
    def W_V(self) -> Float[Tensor, "head d_model d_head"]:
        return self.V.transpose(-1, -2)

    @property
    def W_O(self) -> Float[Tensor, "head d_head d_model"]:
        """The identity: a head's result is its ``z`` (the dual form then shifts head 1's result)."""
        return self._eye()

    @property
    def b_Q(self) -> Float[Tensor, "head d_head"]:
        return torch.zeros(self.A.shape[:2], dtype=self.A.dtype, device=self.A.device)

    b_K = b_V = b_Q

    @property
    def b_O(self) -> Float[Tensor, "d_model"]:
        return torch.zeros(self.A.shape[-1], dtype=self.A.dtype, device=self.A.device)

    def _eye(self) -> Tensor:
        return torch.eye(self.cfg.d_model, dtype=self.A.dtype, device=self.A.device).expand_as(self.A)


class TemporalShift(nn.Module):
    """TSM (parameter-free): ``U Z + W Z Pi`` rewrites the target row as ``gamma * v(next)``.

    Returns its *write* (new target row minus old, on the target row only), which the block adds to
    the residual stream and exposes as ``hook_mlp_out``, so TransformerLens's residual
    decompositions (``decompose_resid``) account for the shift as the block's second sublayer."""

    def __init__(self, cfg: ICTDConfig):
        super().__init__()
        layout = PromptLayout(cfg.d_features)
        self.gamma, self.current = cfg.gamma, layout.current
        target = torch.zeros(cfg.d_model, dtype=cfg.torch_dtype)
        target[layout.target] = 1.0
        self.register_buffer("target_row", target, persistent=False)
        self.hook_shifted = HookPoint()  # [batch, pos, d_model]: gamma * v(next) on the target row

    def forward(
        self, resid: Float[Tensor, "batch pos d_model"], neuron: "ShiftNeuron"
    ) -> Float[Tensor, "batch pos d_model"]:
        nxt = shift_to_predecessor(resid[..., self.current])
        shifted = self.hook_shifted(self.gamma * nxt.unsqueeze(-1) * self.target_row)
        write = shifted - resid * self.target_row  # nonzero on the target row only
        return neuron.hook_post(write[..., neuron.row : neuron.row + 1]) * neuron.W_out[0]


class ShiftNeuron(nn.Module):
    """The shift's write seen as one MLP neuron, the view TransformerLens's neuron-level tools take
    (``stack_neuron_results``, ``get_full_resid_decomposition``): activation ``hook_post`` =
    ``gamma v(next) - t`` per position (``d_mlp = 1``), output direction ``W_out = e_target``, no bias.
    It holds no parameters; the write it carries is exactly the TSM's."""

    def __init__(self, cfg: ICTDConfig):
        super().__init__()
        self.row = PromptLayout(cfg.d_features).target
        W_out = torch.zeros(1, cfg.d_model, dtype=cfg.torch_dtype)
        W_out[0, self.row] = 1.0
        self.register_buffer("W_out", W_out, persistent=False)  # [d_mlp, d_model]
        self.register_buffer("b_out", torch.zeros(cfg.d_model, dtype=cfg.torch_dtype), persistent=False)
        self.hook_post = HookPoint()  # [batch, pos, d_mlp]


class ICTDBlock(nn.Module):
    def __init__(self, cfg: ICTDConfig):
        super().__init__()
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        self.attn = ICTDAttention(cfg)
        self.hook_attn_out = HookPoint()  # [batch, pos, d_model]
        self.hook_resid_mid = HookPoint()  # [batch, pos, d_model]: after attention (before the shift)
        if cfg.form == "tsm":
            self.tsm = TemporalShift(cfg)
            self.mlp = ShiftNeuron(cfg)
            self.hook_mlp_out = HookPoint()  # [batch, pos, d_model]: the shift's write (target row)
        self.hook_resid_post = HookPoint()  # [batch, pos, d_model]

    def forward(self, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        resid = self.hook_resid_pre(resid.clone())  # a fresh tensor: never the previous hook's output
        resid = self.hook_resid_mid(resid + self.hook_attn_out(self.attn(resid)))
        if hasattr(self, "tsm"):
            return self.hook_resid_post(resid + self.hook_mlp_out(self.tsm(resid, self.mlp)))
        return self.hook_resid_post(resid.clone())


class HookedICTDTransformer(TransformerLensSurface, HookedRootModule):
    """ICTD transformer: ``model(prompt)`` returns the value row ``[batch, pos]`` of the last layer.

    The query's prediction is ``model(prompt)[:, -1]`` (or ``return_type="query"``);
    ``stop_at_layer=l`` returns the residual stream after ``l`` layers instead. theta* and trained
    weights load into this same class. Models are built in eval mode (TransformerLens's patching
    requires it; nothing here behaves differently in training mode).
    """

    CONFIG = ICTDConfig

    ln_final = nn.Identity()  # no LayerNorm: TransformerLens's "apply_ln" steps are the identity

    def __init__(self, cfg: Union[ICTDConfig, dict]):
        super().__init__()
        self.cfg = self.own_config(cfg)
        self.layout = PromptLayout(self.cfg.d_features)
        self.hook_prompt = HookPoint()  # [batch, pos, d_model]: a copy of the caller's prompt
        self.hook_embed = HookPoint()  # [batch, pos, d_model]: the residual stream's input (= the prompt)
        self.blocks = nn.ModuleList(ICTDBlock(self.cfg) for _ in range(self.cfg.n_layers))
        self._tie()
        self.init_weights()
        self._mask_gradients()
        self.finish_init()

    def _tie(self) -> None:
        """A tied model's blocks share the first block's ``A`` and ``V`` (one parameter each)."""
        if self.cfg.tied:
            for block in self.blocks[1:]:
                block.attn.A, block.attn.V = self.blocks[0].attn.A, self.blocks[0].attn.V

    def _apply(self, fn, recurse: bool = True):
        """``nn.Module._apply`` (``.to``, ``.double`` ...), keeping the ties and gradient masks: a move torch makes
        by new parameters (to the ``meta`` device, say) would give each block its own copy, unmasked."""
        before = [id(p) for p in self.parameters()]
        super()._apply(fn, recurse)
        if [id(p) for p in self.parameters()] != before:
            self._tie()
            self._mask_gradients()
        return self

    def init_weights(self) -> None:
        """Seeded Gaussian init (std ``init_scale``) on the trainable entries, exact zeros elsewhere."""
        gen = torch.Generator().manual_seed(self.cfg.seed)
        with torch.no_grad():
            for attn in self.unique_attention():
                for param, mask in ((attn.A, attn.mask_A), (attn.V, attn.mask_V)):
                    noise = torch.randn(param.shape, generator=gen, dtype=param.dtype)
                    param.copy_(self.cfg.init_scale * noise.to(param.device) * mask)

    def _mask_gradients(self) -> None:
        """Frozen entries get zero gradient, so every optimiser keeps them at exactly 0."""
        for attn in self.unique_attention():
            attn.A.register_hook(lambda grad, attn=attn: grad * attn.mask_A)
            attn.V.register_hook(lambda grad, attn=attn: grad * attn.mask_V)

    def unique_attention(self) -> list[ICTDAttention]:
        """The attention modules that own parameters (one when weights are tied)."""
        return [self.blocks[0].attn] if self.cfg.tied else [b.attn for b in self.blocks]

    def forward(
        self, prompt: Tensor, stop_at_layer: Optional[int] = None, return_type: str = "values"
    ) -> Union[
        Float[Tensor, "batch pos"], Float[Tensor, "batch"], Float[Tensor, ""], Float[Tensor, "batch pos d_model"]
    ]:
        """``prompt [batch, pos, d_model]`` is validated by ``check_prompt`` and copied (never aliased)
        into the model's dtype: a float64 prompt given to a float32 model is rounded to float32 (load the
        model in float64 to compute in float64).

        ``return_type``: ``"values"`` (the value row ``[batch, pos]``), ``"query"`` (the query's
        prediction ``[batch]``) or ``"query_sum"`` (its sum over the batch: a scalar, so
        ``run_with_cache(prompt, return_type="query_sum", incl_bwd=True)`` caches each prompt's
        gradient of its own prediction)."""
        check_return_type(return_type)
        resid = self.hook_embed(self.hook_prompt(self.check_prompt(prompt)).clone())
        for block in self.blocks[:stop_at_layer]:
            resid = block(resid)
        if stop_at_layer is not None:
            return resid
        values = resid[..., self.layout.current]
        return select_return(values, return_type)

    def fast_values(
        self, prompt: Float[Tensor, "batch pos d_model"], depth: Optional[int] = None, query_only: bool = False
    ) -> Union[Float[Tensor, "batch pos"], Float[Tensor, "batch"]]:
        """The value row (or only the query's value) for training objectives: the exact paper-mask fast
        path (``fast_path.py``) when no hook of any kind is registered, else the hooked forward (so
        every hook fires). ``depth`` (tied models) runs the layer that many times instead of ``n_layers``.

        The prompt is not validated (training builds it); frozen entries are assumed zero, which the
        gradient masks keep and checkpoint loading checks."""
        depth = self.checked_depth(depth)
        if self.cfg.mask != "paper" or self.has_any_hook():
            if depth != self.cfg.n_layers:
                raise ValueError("depth: another depth needs the fast path (paper mask, no hook registered)")
            values = self(prompt)
            return values[:, -1] if query_only else values
        return self.hook_free_values(prompt, depth, query_only)

    def hook_free_values(self, prompt: Tensor, depth: int, query_only: bool) -> Tensor:
        """``fast_values`` without the hook check: the paper-mask fast path, differentiated as
        ``cfg.backward`` says (``compile_fast_path`` replaces it by its compiled form)."""
        attns = self.unique_attention()
        A, V = torch.stack([a.A for a in attns]), torch.stack([a.V for a in attns])
        values = fused_values if self.cfg.backward == "fused" else paper_mask_values
        return values(self.cfg, *reduced_weights(self.cfg, A, V), prompt.to(A.dtype), depth, query_only)

    def state_space_values(
        self, tasks, depth: Optional[int] = None, every_layer: bool = False
    ) -> Float[Tensor, "*layer batch pos"]:
        """The value row ``[batch, pos]`` of a ``TaskBatch``, computed exactly on its states' transition counts
        (``state_space.py``: cost independent of ``n`` once counted), float64, on the CPU. Chosen explicitly,
        never a silent switch. ``depth``: layers run (a tied model repeats its layer, a per-layer model its last
        one); ``every_layer``: the values after each layer ``[layer, batch, pos]``. Refused, naming why, for the
        dual form, the full mask and linear attention.

        Hooks fire for reading, with the positional forward's activations rebuilt from the state values
        (``state_space_hooks.py``: every per-position hook; a hook on the scores or the pattern, an edit and a
        backward hook are refused). A cache, with TransformerLens's own caching hooks::

            cache, fwd, _ = model.get_caching_hooks(names_filter=lambda name: name.endswith("resid_post"))
            with model.hooks(fwd_hooks=fwd):
                values = model.state_space_values(tasks)
        """
        from ictd_interp.models.stylised.state_space import positional_state_values

        check_tasks(self, tasks)
        return positional_state_values(self, tasks, self.cfg.n_layers if depth is None else depth, every_layer)

    def check_prompt(self, prompt: Tensor) -> Tensor:
        """Fail fast, naming the problem, before any layer runs; returns a copy in the model's dtype."""
        return check_prompt(prompt, self.cfg.d_model, self.blocks[0].attn.A.dtype)

    def readout_direction(self) -> Float[Tensor, "d_model"]:
        """The value read-out: the current-value row."""
        param = self.blocks[0].attn.A
        direction = torch.zeros(self.cfg.d_model, dtype=param.dtype, device=param.device)
        direction[self.layout.current] = 1.0
        return direction

    def frozen_entries(self) -> dict[str, Tensor]:
        """Per state-dict name, the entries the training mask pins at 0 (checkpoints check them)."""
        return {
            attn_param(l, name): getattr(block.attn, f"mask_{name}") == 0
            for l, block in enumerate(self.blocks)
            for name in ("A", "V")
        }

    def tied_parameters(self) -> list[list[str]]:
        """Groups of state-dict names that must hold equal weights (one group per tied weight)."""
        if not self.cfg.tied:
            return []
        return [[attn_param(l, name) for l in range(self.cfg.n_layers)] for name in ("A", "V")]

    @classmethod
    def from_theta_star(cls, cfg, alpha: float = 1.0, depth: Optional[int] = None) -> "HookedICTDTransformer":
        """The constructed model that runs ``depth`` (default: ``n_layers``) steps of softmax-weighted
        TD (Theorem 1). ``cfg`` may be any model's config: θ* is built in the architecture that config
        compares with (``cfg.theta_star_config()``: a stylised config's own; the TSM softmax model of a
        standard config's depth). The one constructor of θ* (docs/theory.md §4)."""
        from ictd_interp.models.stylised.theta_star import theta_star

        cfg = cfg.theta_star_config()
        if depth is not None:
            cfg = ICTDConfig.from_dict({**cfg.to_dict(), "n_layers": depth})
        model = cls(cfg)
        model.load_state_dict(theta_star(cfg, alpha))
        return model
