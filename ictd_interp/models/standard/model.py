"""The standard-architecture ICTD transformer (docs/theory.md §10): nothing pinned, nothing tied to θ*.

A learned linear read-in of each prompt column (features and reward; the value rows are zero at
input), optional learned positional embeddings, pre-LN blocks of multi-head softmax attention (scaled
dot product; the query position is never a source, as in the stylised model) and a GELU MLP, a final
LayerNorm and a linear read-out of the value at every position (the query's is the prediction).

Built as our own ``HookedRootModule`` with TransformerLens's ``HookPoint``s rather than TL's
``HookedTransformer`` components: TL 4 removed those, and TL's attention is causal while ICTD
attention lets every position read every context source. Hook names are exactly HookedTransformer's
(``hook_embed``, ``blocks.{l}.ln1.hook_normalized``, ``attn.hook_q`` ..., ``hook_mlp_out``, ``ln_final``).
"""

from __future__ import annotations

import math
from typing import Optional, Union

import torch
import torch.nn.functional as F
from einops import einsum, rearrange
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint
from transformer_lens.HookedRootModule import HookedRootModule

from ictd_interp.config.standard import StandardConfig
from ictd_interp.models.base import check_return_type, select_return
from ictd_interp.models.chunked_attention import chunked_attention, use_chunks
from ictd_interp.models.standard.weights import process_weights_
from ictd_interp.models.tl_surface import Circuits, TransformerLensSurface
from ictd_interp.tasks.prompt import PromptLayout, check_prompt


def _weight(cfg: StandardConfig, *shape: int) -> nn.Parameter:
    return nn.Parameter(torch.empty(shape, dtype=cfg.torch_dtype))


def _zeros(cfg: StandardConfig, *shape: int) -> nn.Parameter:
    return nn.Parameter(torch.zeros(shape, dtype=cfg.torch_dtype))


class LayerNorm(nn.Module):
    """TransformerLens's LayerNorm: centre, divide by ``hook_scale`` (``hook_normalized`` reads the result, before
    the gain ``w`` and bias ``b``, as TransformerLens's own since its PR #770), then ``w`` and ``b``."""

    def __init__(self, cfg: StandardConfig, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.w = nn.Parameter(torch.ones(cfg.d_model, dtype=cfg.torch_dtype))
        self.b = _zeros(cfg, cfg.d_model)
        self.hook_scale = HookPoint()  # [batch, pos, 1]
        self.hook_normalized = HookPoint()  # [batch, pos, d_model]

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        x = x - x.mean(-1, keepdim=True)
        scale = self.hook_scale((x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt())
        return self.hook_normalized(x / scale) * self.w + self.b

    def fast(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        """The same map in one fused kernel (no hook points)."""
        return F.layer_norm(x, x.shape[-1:], self.w, self.b, self.eps)


class NoNorm(nn.Identity):
    """``layer_norm=False``: the identity, with the same ``fast`` entry."""

    def fast(self, x: Tensor) -> Tensor:
        return x


def _norm(cfg: StandardConfig) -> nn.Module:
    return LayerNorm(cfg) if cfg.layer_norm else NoNorm()


class StandardAttention(Circuits, nn.Module):
    """Multi-head softmax attention, ``q k / sqrt(d_head)``; every position reads the context sources
    ``0 .. n-1`` (never the query ``n``). ``QK``/``OV`` as ``FactoredMatrix`` (``Circuits``)."""

    def __init__(self, cfg: StandardConfig):
        super().__init__()
        self.cfg = cfg
        h, d, e = cfg.n_heads, cfg.d_model, cfg.d_head
        self.W_Q, self.W_K, self.W_V = _weight(cfg, h, d, e), _weight(cfg, h, d, e), _weight(cfg, h, d, e)
        self.W_O = _weight(cfg, h, e, d)
        self.b_Q, self.b_K, self.b_V = _zeros(cfg, h, e), _zeros(cfg, h, e), _zeros(cfg, h, e)
        self.b_O = _zeros(cfg, d)
        for name in ("q", "k", "v", "attn_scores", "pattern", "z", "result"):
            setattr(self, f"hook_{name}", HookPoint())
        # the fast path folds 1/sqrt(d_head) into W_Q, b_Q where that is exact: sqrt(d_head) a power of two
        self.fold_scale = e & (e - 1) == 0 and (e.bit_length() - 1) % 2 == 0

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        q, k, v = self._project(x)
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        if use_chunks(x.shape[1], self.hook_attn_scores, self.hook_pattern):  # no pattern held: O(n) memory
            z = chunked_attention(
                rearrange(q, "b q h e -> b h q e"),
                rearrange(k, "b k h e -> b h e k"),
                rearrange(v, "b k h e -> b h k e"),
                lambda s: torch.softmax(s, dim=-1),
                math.sqrt(self.cfg.d_head),
            )
            z = self.hook_z(rearrange(z, "b h q e -> b q h e"))
        else:
            scores = einsum(q, k, "b q h e, b k h e -> b h q k") / math.sqrt(self.cfg.d_head)
            scores[..., -1] = float("-inf")  # the query (last) position is never a source
            pattern = self.hook_pattern(torch.softmax(self.hook_attn_scores(scores), dim=-1))
            z = self.hook_z(einsum(pattern, v, "b h q k, b k h e -> b q h e"))
        result = self.hook_result(einsum(z, self.W_O, "b q h e, h e d -> b q h d"))
        return result.sum(dim=2) + self.b_O

    def fast(
        self, x: Float[Tensor, "batch pos d_model"], query_only: bool = False
    ) -> Float[Tensor, "batch query d_model"]:
        """The same map without hook points: keys and values at the sources alone (the query's weight is
        exactly 0 either way), projections and output as ``addmm``; ``query_only`` computes the query's
        output alone (``query = 1``) and its query vector alone. (A hand-written backward for this core and
        ``scaled_dot_product_attention`` were both slower on CPU: docs/performance.md, "Choices measured".)
        With ``fold_scale`` (``sqrt(d_head)`` a power of two: d_head 1, 4, 16, 64 ...) the queries are
        computed by ``W_Q / sqrt(d_head)`` and ``b_Q / sqrt(d_head)``: scaling by a power of two is exact in
        floating point (normal numbers), so scores, values and gradients are bit for bit those of dividing
        the scores, without that pass over the ``[batch, head, query, source]`` scores forward and
        backward."""
        batch, pos, d_model = x.shape
        h, e = self.cfg.n_heads, self.cfg.d_head
        W, b = self._qkv_weights(query_scale=1 / math.sqrt(e) if self.fold_scale else 1.0)
        if query_only:
            q = torch.addmm(b[: h * e], x[:, -1], W[:, : h * e]).view(batch, 1, h, e)
            kv = torch.addmm(b[h * e :], x[:, :-1].reshape(-1, d_model), W[:, h * e :]).view(batch, pos - 1, 2, h, e)
            k, v = kv.unbind(dim=2)
        else:
            q, k, v = torch.addmm(b, x.reshape(-1, d_model), W).view(batch, pos, 3, h, e).unbind(dim=2)
            k, v = k[:, :-1], v[:, :-1]
        q, k, v = (rearrange(t, "b p h e -> b h p e") for t in (q, k, v))
        scores = q @ k.transpose(-1, -2)  # [b, h, query, source]
        pattern = torch.softmax(scores if self.fold_scale else scores / math.sqrt(e), dim=-1)
        z = rearrange(pattern @ v, "b h q e -> (b q) (h e)")
        return torch.addmm(self.b_O, z, self.W_O.reshape(h * e, -1)).view(batch, -1, d_model)

    def _project(self, x: Float[Tensor, "batch pos d_model"]) -> tuple[Tensor, Tensor, Tensor]:
        """``q, k, v [batch, pos, head, d_head]`` from one GEMM (``x W + b`` for the three at once)."""
        W, b = self._qkv_weights()
        qkv = (x.reshape(-1, x.shape[-1]) @ W + b).view(*x.shape[:2], 3, self.cfg.n_heads, self.cfg.d_head)
        return qkv.unbind(dim=2)

    def _qkv_weights(
        self, query_scale: float = 1.0
    ) -> tuple[Float[Tensor, "d_model qkv_head_e"], Float[Tensor, "qkv_head_e"]]:
        W_Q, b_Q = (self.W_Q, self.b_Q) if query_scale == 1.0 else (self.W_Q * query_scale, self.b_Q * query_scale)
        W = rearrange(torch.stack([W_Q, self.W_K, self.W_V]), "t h d e -> d (t h e)")
        return W, torch.stack([b_Q, self.b_K, self.b_V]).flatten()


class MLP(nn.Module):
    def __init__(self, cfg: StandardConfig):
        super().__init__()
        self.W_in, self.b_in = _weight(cfg, cfg.d_model, cfg.d_mlp), _zeros(cfg, cfg.d_mlp)
        self.W_out, self.b_out = _weight(cfg, cfg.d_mlp, cfg.d_model), _zeros(cfg, cfg.d_model)
        self.act = F.gelu if cfg.act_fn == "gelu" else F.relu
        self.hook_pre = HookPoint()  # [batch, pos, d_mlp]
        self.hook_post = HookPoint()  # [batch, pos, d_mlp]

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        post = self.hook_post(self.act(self.hook_pre(x @ self.W_in + self.b_in)))
        return post @ self.W_out + self.b_out

    def fast(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        return F.linear(self.act(F.linear(x, self.W_in.T, self.b_in)), self.W_out.T, self.b_out)


class StandardBlock(nn.Module):
    """Pre-LN block; attention-only blocks (``d_mlp = 0``) have no ``ln2``/``mlp``/``hook_resid_mid``,
    as HookedTransformer's."""

    def __init__(self, cfg: StandardConfig):
        super().__init__()
        self.ln1 = _norm(cfg)
        self.attn = StandardAttention(cfg)
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        if not cfg.attn_only:
            self.ln2 = _norm(cfg)
            self.mlp = MLP(cfg)
            self.hook_resid_mid = HookPoint()
            self.hook_mlp_out = HookPoint()
        self.hook_resid_post = HookPoint()

    def forward(self, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        resid = self.hook_resid_pre(resid.clone())  # a fresh tensor: never the previous hook's output
        resid = resid + self.hook_attn_out(self.attn(self.ln1(resid)))
        if hasattr(self, "mlp"):
            resid = self.hook_resid_mid(resid)
            resid = resid + self.hook_mlp_out(self.mlp(self.ln2(resid)))
        return self.hook_resid_post(resid)

    def fast(
        self, resid: Float[Tensor, "batch pos d_model"], query_only: bool = False
    ) -> Float[Tensor, "batch query d_model"]:
        """The block without hook points; ``query_only``: the residual stream at the query alone."""
        resid = (resid[:, -1:] if query_only else resid) + self.attn.fast(self.ln1.fast(resid), query_only)
        return resid + self.mlp.fast(self.ln2.fast(resid)) if hasattr(self, "mlp") else resid


class ReadIn(nn.Module):
    """``hook_embed = prompt W_E + b_E``: a linear read of each prompt column (``W_E [d_prompt, d_model]``)."""

    def __init__(self, cfg: StandardConfig):
        super().__init__()
        self.W_E, self.b_E = _weight(cfg, cfg.d_prompt, cfg.d_model), _zeros(cfg, cfg.d_model)

    def forward(self, prompt: Float[Tensor, "batch pos d_prompt"]) -> Float[Tensor, "batch pos d_model"]:
        return prompt @ self.W_E + self.b_E


class PosEmbed(nn.Module):
    def __init__(self, cfg: StandardConfig):
        super().__init__()
        self.W_pos = _weight(cfg, cfg.n_ctx, cfg.d_model)

    def forward(self, prompt: Float[Tensor, "batch pos d_prompt"]) -> Float[Tensor, "batch pos d_model"]:
        return self.W_pos[: prompt.shape[1]].expand(prompt.shape[0], -1, -1).clone()


class ReadOut(nn.Module):
    """``values = resid W_U + b_U`` (``W_U [d_model, 1]``): the value at every position."""

    def __init__(self, cfg: StandardConfig):
        super().__init__()
        self.W_U, self.b_U = _weight(cfg, cfg.d_model, 1), _zeros(cfg, 1)

    def forward(self, resid: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos"]:
        return (resid @ self.W_U + self.b_U)[..., 0]


class HookedStandardTransformer(TransformerLensSurface, HookedRootModule):
    """``model(prompt)`` returns the value read out at every position ``[batch, pos]``; the query's
    prediction is ``[:, -1]``. Same call surface as ``HookedICTDTransformer`` (``stop_at_layer``,
    ``return_type``, ``fast_values``, ``run_with_cache``); built in eval mode."""

    CONFIG = StandardConfig

    def __init__(self, cfg: Union[StandardConfig, dict]):
        super().__init__()
        self.cfg = self.own_config(cfg)
        self.layout = PromptLayout(self.cfg.d_features)
        self.embed = ReadIn(self.cfg)
        self.hook_embed = HookPoint()  # [batch, pos, d_model]
        if self.cfg.pos_embed:
            self.pos_embed = PosEmbed(self.cfg)
            self.hook_pos_embed = HookPoint()  # [batch, pos, d_model]
        self.blocks = nn.ModuleList(StandardBlock(self.cfg) for _ in range(self.cfg.n_layers))
        self.ln_final = _norm(self.cfg)
        self.unembed = ReadOut(self.cfg)
        self.init_weights()
        if self.cfg.tied:
            for block in self.blocks[1:]:
                _share_parameters(self.blocks[0], block)
        self.finish_init()

    def process_weights_(self, fold_ln: bool, center_writing_weights: bool, fold_value_biases: bool) -> None:
        """TransformerLens's weight processing in place, in its order (``weight_processing``; outputs unchanged)."""
        process_weights_(self, fold_ln, center_writing_weights, fold_value_biases)

    def init_weights(self) -> None:
        """Seeded Gaussian init (std ``init_range``) of every matrix; biases 0, LayerNorm weights 1."""
        gen = torch.Generator().manual_seed(self.cfg.seed)
        with torch.no_grad():
            for name, param in self.named_parameters():
                if name.rsplit(".", 1)[-1].startswith("W_"):
                    param.copy_(self.cfg.init_range * torch.randn(param.shape, generator=gen, dtype=param.dtype))

    def forward(
        self, prompt: Tensor, stop_at_layer: Optional[int] = None, return_type: str = "values"
    ) -> Union[Float[Tensor, "batch pos"], Float[Tensor, "batch"], Float[Tensor, "batch pos d_model"]]:
        """As ``HookedICTDTransformer.forward``; ``stop_at_layer=l`` returns the residual stream after
        ``l`` blocks."""
        check_return_type(return_type)
        return self._run(self.check_prompt(prompt), self.blocks, stop_at_layer, return_type)

    def _run(self, prompt: Tensor, blocks, stop_at_layer: Optional[int], return_type: str) -> Tensor:
        resid = self.hook_embed(self.embed(prompt))
        if self.cfg.pos_embed:
            resid = resid + self.hook_pos_embed(self.pos_embed(prompt))
        for block in list(blocks)[:stop_at_layer]:
            resid = block(resid)
        if stop_at_layer is not None:
            return resid
        values = self.unembed(self.ln_final(resid))
        return select_return(values, return_type)

    def fast_values(
        self, prompt: Float[Tensor, "batch pos d_prompt"], depth: Optional[int] = None, query_only: bool = False
    ) -> Union[Float[Tensor, "batch pos"], Float[Tensor, "batch"]]:
        """The objectives' entry: the same values as the hooked forward, through each module's ``fast``
        map (fused LayerNorm, no hook points, the last block at the query alone with ``query_only``)
        when no hook of any kind is registered, else the hooked forward (so every hook fires).
        ``depth`` runs a tied model's block that many times. The prompt is not validated (training
        builds it)."""
        depth = self.checked_depth(depth)
        prompt = prompt.to(self.unembed.W_U.dtype)
        if self.has_any_hook():
            values = self._values_at_depth(prompt, depth)
            return values[:, -1] if query_only else values
        return self.hook_free_values(prompt, depth, query_only)

    def hook_free_values(self, prompt: Tensor, depth: int, query_only: bool) -> Tensor:
        """``fast_values`` without the hook check (``compile_fast_path`` replaces it by its compiled form)."""
        resid = self.embed(prompt) + (self.pos_embed(prompt) if self.cfg.pos_embed else 0)
        blocks = self.blocks_to(depth)
        for i, block in enumerate(blocks):
            resid = block.fast(resid, query_only=query_only and i == len(blocks) - 1)
        values = self.unembed(self.ln_final.fast(resid))
        return values[:, -1] if query_only else values

    def values_at_depth(self, prompt: Float[Tensor, "batch pos d_prompt"], depth: int) -> Float[Tensor, "batch pos"]:
        """The blocks run to another depth: the last block repeats beyond ``n_layers`` (a tied model's
        only block), or the stack stops early; then the final LayerNorm and the read-out. The prompt is
        validated and converted to the model's dtype, as in ``forward``."""
        return self._values_at_depth(self.check_prompt(prompt), depth)

    def _values_at_depth(self, prompt: Tensor, depth: int) -> Tensor:
        return self._run(prompt, self.blocks_to(depth), None, "values")

    def check_prompt(self, prompt: Tensor) -> Tensor:
        return check_prompt(
            prompt, self.cfg.d_prompt, self.unembed.W_U.dtype, self.cfg.n_ctx if self.cfg.pos_embed else None
        )

    def readout_direction(self) -> Float[Tensor, "d_model"]:
        return self.unembed.W_U[:, 0]

    def frozen_entries(self) -> dict[str, Tensor]:
        return {}  # nothing is pinned

    def tied_parameters(self) -> list[list[str]]:
        if not self.cfg.tied:
            return []
        names = [n.removeprefix("blocks.0.") for n, _ in self.blocks[0].named_parameters(prefix="blocks.0")]
        return [[f"blocks.{l}.{n}" for l in range(self.cfg.n_layers)] for n in names]


def _share_parameters(source: nn.Module, target: nn.Module) -> None:
    """Make every parameter of ``target`` the same ``Parameter`` object as ``source``'s (tying)."""
    for name, param in source.named_parameters():
        module_name, _, attr = name.rpartition(".")
        setattr(target.get_submodule(module_name) if module_name else target, attr, param)
