"""The predecessor's linear in-context TD transformer (Wang et al., ICLR 2025; docs/theory.md §13).

Its prompt is built from this project's prompt ``[batch, n+1, d+3]``: context column ``k < n`` is
``[phi(S_k); gamma phi(S_{k+1}); R_{k+1}]`` and a query column is ``[phi(S); 0; 0]`` (``2d + 1`` rows).
A layer is ``Z <- Z + (1/n) P Z M act(Z^T Q Z)``, the prediction ``-Z[-1, -1]`` of the query column.

Here ``Z`` is held transposed, ``[batch, pos, d_model]``, as TransformerLens holds a residual stream. To
give the value of every state of the prompt (``model(prompt)`` is ``[batch, n+1]``, as for the other
architectures), the residual stream holds the ``n`` context columns and then ``n + 1`` query columns,
one per state ``S_0 .. S_n``: queries are never sources (``M`` is zero there) and the activation acts on
each score alone, so each query column evolves exactly as the single query of the predecessor's model
(the last one *is* its query). ``query_only`` (training) keeps the last query alone. Every intermediate
is a ``HookPoint`` named as HookedTransformer's: query ``q = Q z``, key ``k = z``, value ``v = P z``,
``attn_scores[j, i] = z_i^T Q z_j``, ``pattern = act(scores) M^T / n``, ``z = pattern @ v`` (= ``hook_result``).
"""

from __future__ import annotations

from typing import Optional, Union

import torch
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint
from transformer_lens.HookedRootModule import HookedRootModule

from ictd_interp.config.linear import LinearICTDConfig
from ictd_interp.models.base import check_return_type, select_return
from ictd_interp.models.tl_surface import Circuits, TransformerLensSurface
from ictd_interp.tasks.prompt import PromptLayout, check_prompt


def linear_prompt(
    prompt: Float[Tensor, "batch pos d_prompt"],
    gamma: float,
    query_only: bool = False,
    queries: Optional[Float[Tensor, "batch query d_feat"]] = None,
) -> Float[Tensor, "batch column d_model"]:
    """The predecessor's prompt (transposed) from this project's: ``n`` context columns
    ``[x_k; gamma x_{k+1}; r_k]``, then the query columns ``[x_j; 0; 0]`` of every state (``query_only``:
    of the prompt's query alone; ``queries``: of these features instead, e.g. every state of the MRP)."""
    lay = PromptLayout(prompt.shape[-1] - 3)
    x, r = prompt[..., lay.features], prompt[..., lay.reward : lay.reward + 1]
    context = torch.cat([x[:, :-1], gamma * x[:, 1:], r[:, :-1]], dim=-1)
    if queries is None:
        queries = x[:, -1:] if query_only else x
    return torch.cat(
        [
            context,
            torch.cat(
                [queries, torch.zeros_like(queries[..., :1]).expand(*queries.shape[:2], x.shape[-1] + 1)], dim=-1
            ),
        ],
        dim=1,
    )


def source_mixing(n: int, columns: int, trace_decay: float, dtype: torch.dtype) -> Float[Tensor, "column column"]:
    """``M`` over the residual stream's columns: ``M[i, j] = lambda^(i-j)`` for sources ``n > i >= j``
    (the identity when ``lambda = 0``), zero on every query column."""
    i = torch.arange(n, dtype=dtype)
    lower = (i[:, None] - i[None, :]).clamp(min=0)
    block = torch.where(i[:, None] >= i[None, :], torch.tensor(trace_decay, dtype=dtype) ** lower, 0.0)
    M = torch.zeros(columns, columns, dtype=dtype)
    M[:n, :n] = block
    return M


class LinearAttention(Circuits, nn.Module):
    """One layer: ``P`` (the value map) and ``Q`` (the score map), ``[d_model, d_model]`` each."""

    def __init__(self, cfg: LinearICTDConfig):
        super().__init__()
        self.cfg = cfg
        self.P = nn.Parameter(torch.zeros(cfg.d_model, cfg.d_model, dtype=cfg.torch_dtype))
        self.Q = nn.Parameter(torch.zeros(cfg.d_model, cfg.d_model, dtype=cfg.torch_dtype))
        for name in ("q", "k", "v", "attn_scores", "pattern", "z", "result"):
            setattr(self, f"hook_{name}", HookPoint())

    def forward(self, resid: Float[Tensor, "batch pos d_model"], n: int) -> Float[Tensor, "batch pos d_model"]:
        q = self.hook_q((resid @ self.Q.T).unsqueeze(2))  # [batch, pos, head, d_head]: Q z_j
        k = self.hook_k(resid.unsqueeze(2).clone())
        v = self.hook_v((resid @ self.P.T).unsqueeze(2))  # P z_i
        scores = self.hook_attn_scores(q.transpose(1, 2) @ k.permute(0, 2, 3, 1))  # [batch, head, query, key]
        M = source_mixing(n, resid.shape[1], self.cfg.trace_decay, resid.dtype).to(resid.device)
        pattern = self.hook_pattern(activation(self.cfg, scores) @ M.T / n)
        z = self.hook_z((pattern @ v.transpose(1, 2)).transpose(1, 2))
        return self.hook_result(z.clone()).sum(dim=2)

    # TransformerLens weight names: score = z_q^T W_Q W_K^T z_k = z_q^T Q^T z_k; written = z W_V W_O = z P^T.
    @property
    def W_Q(self) -> Float[Tensor, "head d_model d_head"]:
        return self.Q.T.unsqueeze(0)

    @property
    def W_K(self) -> Float[Tensor, "head d_model d_head"]:
        return self._eye()

    @property
    def W_V(self) -> Float[Tensor, "head d_model d_head"]:
        return self.P.T.unsqueeze(0)

    @property
    def W_O(self) -> Float[Tensor, "head d_head d_model"]:
        return self._eye()

    @property
    def b_O(self) -> Float[Tensor, "d_model"]:
        return torch.zeros(self.cfg.d_model, dtype=self.P.dtype, device=self.P.device)

    def _eye(self) -> Tensor:
        return torch.eye(self.cfg.d_model, dtype=self.P.dtype, device=self.P.device).unsqueeze(0)


def activation(cfg: LinearICTDConfig, scores: Tensor) -> Tensor:
    return scores if cfg.activation == "identity" else torch.relu(scores)


class LinearBlock(nn.Module):
    def __init__(self, cfg: LinearICTDConfig):
        super().__init__()
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        self.attn = LinearAttention(cfg)
        self.hook_attn_out = HookPoint()  # [batch, pos, d_model]
        self.hook_resid_post = HookPoint()  # [batch, pos, d_model]

    def forward(self, resid: Float[Tensor, "batch pos d_model"], n: int) -> Float[Tensor, "batch pos d_model"]:
        resid = self.hook_resid_pre(resid.clone())
        return self.hook_resid_post(resid + self.hook_attn_out(self.attn(resid, n)))


class HookedLinearICTD(TransformerLensSurface, HookedRootModule):
    """``model(prompt)`` returns the value of every state of the prompt ``[batch, n+1]`` (the query's is
    ``[:, -1]``, the predecessor's ``-Z[-1, -1]``); ``stop_at_layer=l`` returns the residual stream
    ``[batch, 2n+1, 2d+1]`` (context columns, then one query column per state) after ``l`` layers."""

    CONFIG = LinearICTDConfig

    ln_final = nn.Identity()

    def __init__(self, cfg: Union[LinearICTDConfig, dict]):
        super().__init__()
        self.cfg = self.own_config(cfg)
        self.layout = PromptLayout(self.cfg.d_features)  # the prompt it reads
        self.hook_embed = HookPoint()  # [batch, pos, d_model]: the predecessor's prompt Z (transposed)
        self.blocks = nn.ModuleList(LinearBlock(self.cfg) for _ in range(self.cfg.n_layers))
        if self.cfg.tied:
            for block in self.blocks[1:]:
                block.attn.P, block.attn.Q = self.blocks[0].attn.P, self.blocks[0].attn.Q
        self.init_weights()
        self.finish_init()

    def init_weights(self) -> None:
        """Seeded Xavier-normal ``P`` and ``Q`` with gain ``init_gain`` (``init_gain / n_layers`` per layer when
        untied), as the predecessor's code."""
        gen = torch.Generator().manual_seed(self.cfg.seed)
        gain = self.cfg.init_gain / (1 if self.cfg.tied else self.cfg.n_layers)
        std = gain * (2.0 / (2 * self.cfg.d_model)) ** 0.5  # Xavier normal: gain * sqrt(2 / (fan_in + fan_out))
        with torch.no_grad():
            for attn in self.unique_attention():
                for param in (attn.P, attn.Q):
                    param.copy_(std * torch.randn(param.shape, generator=gen, dtype=param.dtype))

    def unique_attention(self) -> list[LinearAttention]:
        return [self.blocks[0].attn] if self.cfg.tied else [b.attn for b in self.blocks]

    def forward(
        self, prompt: Tensor, stop_at_layer: Optional[int] = None, return_type: str = "values"
    ) -> Union[Float[Tensor, "batch pos"], Float[Tensor, "batch"], Float[Tensor, "batch column d_model"]]:
        """``return_type`` as the other architectures: every state's value, the query's, or their sum."""
        check_return_type(return_type)
        return self._run(self.check_prompt(prompt), self.blocks, stop_at_layer, return_type)

    def query_values(
        self, prompt: Float[Tensor, "batch pos d_prompt"], queries: Float[Tensor, "batch query d_feat"]
    ) -> Float[Tensor, "batch query"]:
        """The value of each query (features ``[batch, query, d]``) on the prompt's context, every hook firing (the
        predecessor's ``fit_value_func``: query columns never act as sources, so one forward answers them all);
        differentiable in ``queries``."""
        return self._run(
            self.check_prompt(prompt), self.blocks, None, "values", queries=queries.to(self.blocks[0].attn.P.dtype)
        )

    def _run(
        self,
        prompt: Tensor,
        blocks,
        stop_at_layer: Optional[int],
        return_type: str,
        query_only: bool = False,
        queries: Optional[Tensor] = None,
    ) -> Tensor:
        n = prompt.shape[1] - 1
        resid = self.hook_embed(linear_prompt(prompt, self.cfg.gamma, query_only, queries))
        for block in list(blocks)[:stop_at_layer]:
            resid = block(resid, n)
        if stop_at_layer is not None:
            return resid
        return select_return(-resid[:, n:, -1], return_type)

    def fast_values(
        self, prompt: Float[Tensor, "batch pos d_prompt"], depth: Optional[int] = None, query_only: bool = False
    ) -> Union[Float[Tensor, "batch pos"], Float[Tensor, "batch"]]:
        """The objectives' entry: the hooked layers (they are already small products), with the query
        column alone when ``query_only`` (the predecessor's own prompt). ``depth`` runs a tied layer
        that many times. The prompt is not validated (training builds it)."""
        depth = self.checked_depth(depth)
        values = self._run(prompt.to(self.blocks[0].attn.P.dtype), self.blocks_to(depth), None, "values", query_only)
        return values[:, -1] if query_only else values

    def values_at_depth(self, prompt: Float[Tensor, "batch pos d_prompt"], depth: int) -> Float[Tensor, "batch pos"]:
        """The layers run to another depth (the last one repeats beyond ``n_layers``)."""
        return self._run(self.check_prompt(prompt), self.blocks_to(depth), None, "values")

    def pattern_sign(self, layer: int) -> float:
        """The sign that makes a reading of layer ``layer``'s pattern a function of what it computes: with the
        identity activation ``(P, Q) -> (-P, -Q)`` flips the pattern and leaves the layer unchanged, so the
        pattern is read times ``sign(P[-1, -1])``; with ReLU a flip changes the layer (``+1``)."""
        if self.cfg.activation != "identity":
            return 1.0
        attn = self.unique_attention()[0 if self.cfg.tied else layer]
        return 1.0 if float(attn.P[-1, -1]) >= 0 else -1.0

    def residual_position_labels(self, n_prompt: int) -> list[str]:
        """The ``n`` context columns, then one query column per state ``S_0 .. S_n`` (module docstring)."""
        n = n_prompt - 1
        return (
            [f"context column {k} (S_{k} -> S_{k + 1})" for k in range(n)]
            + [f"query of S_{j}" for j in range(n)]
            + [f"query of S_{n} (the prediction)"]
        )

    def check_prompt(self, prompt: Tensor) -> Tensor:
        return check_prompt(prompt, self.cfg.d_features + 3, self.blocks[0].attn.P.dtype, None)

    def readout_direction(self) -> Float[Tensor, "d_model"]:
        """The prediction is minus the last row."""
        direction = torch.zeros(self.cfg.d_model, dtype=self.blocks[0].attn.P.dtype, device=self.device)
        direction[-1] = -1.0
        return direction

    def frozen_entries(self) -> dict[str, Tensor]:
        return {}  # nothing is pinned

    def tied_parameters(self) -> list[list[str]]:
        if not self.cfg.tied:
            return []
        return [[f"blocks.{l}.attn.{name}" for l in range(self.cfg.n_layers)] for name in ("P", "Q")]
