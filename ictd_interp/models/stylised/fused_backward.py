"""A hand-written backward for the paper-mask fast path (``ICTDConfig.backward = "fused"``).

Autograd differentiates the fast path op by op: every use of a pattern ``p`` (``z = p v``) hands back a
full-size ``dL/dp = g v^T``, the uses are summed, and the softmax's backward reads that sum and ``p``
again. Written out, the pattern's gradient needs far less. For one pattern used by layers ``l`` (values
``v_l``, outputs ``z_l = p v_l``, upstream gradients ``g_l = dL/dz_l``):

    dL/dp[j, i]       = sum_l g_l[j] v_l[i]                              (G = sum_l g_l v_l^T)
    dL/dscore[j, i]   = p[j, i] (G[j, i] - sum_i' p[j, i'] G[j, i'])     (softmax)
                      = p[j, i] (G[j, i] - c[j]),   c[j] = sum_l g_l[j] z_l[j]

so the row sum the softmax's backward computes is ``c``, known from the forward's ``z_l`` at the cost of
a ``[batch, pos]`` product. With ``score[j, i] = x_i^T A x_j``, ``dL/dA = sum_j K[j] x_j^T`` where
``K[j] = sum_i dL/dscore[j, i] x_i``, and substituting the line above,

    K[j] = sum_l g_l[j] (p (v_l * X))[j] - c[j] (p X)[j]                 (v_l * X: each source row scaled)

(each row of ``dL/dscore`` sums to 0, so ``X`` may be taken less its mean over the sources, which keeps the
two terms from cancelling when the features share a large offset), so one product of ``p`` with the
``d (uses + 1)`` columns ``[v_1 * X, ..., X]`` gives every pattern's ``K``:
neither ``G`` nor ``dL/dscore`` is ever formed full-size (one pass over ``p`` instead of one per use and two
more for the softmax's backward: 1.1-1.3x the model step, docs/performance.md, "Speed targets"). Linear
attention (``p = score / n``, ``dL/dscore = G / n``): ``K[j] = sum_l g_l[j] (v_l^T X) / n``, no pattern read.

The values are ``v_h = fixed_h + w_t * target + w_c * current`` (sources only), so ``dL/dv_h = p^T g_h``
flows into ``fixed_h`` (whose weights are the feature and reward entries of ``w``), the target and
current rows, and ``w_t``, ``w_c``. Between layers: ``current' = current + z_0``; TSM:
``target' = gamma shift(current')``; dual: ``target' = target + shift(z_1)``; the adjoint of
``shift_row`` moves position ``k`` to ``k + 1``.

With a model axis (``fast_path.py``) every sum over the batch stays per model.

Double backward (the NEU objective differentiates a gradient): when the backward is asked for a graph
(``create_graph=True``), it differentiates the forward again with autograd on the saved inputs, so
second-order objectives get autograd's exact graph. Tested against autograd in float64 at 1e-12 for
every form, attention, tying, depth and ``query_only``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.models.stylised.fast_path import Tape, paper_mask_values
from ictd_interp.tasks.prompt import PromptLayout


def fused_values(
    cfg: ICTDConfig, A_feat: Tensor, w: Tensor, prompt: Tensor, depth: int, query_only: bool = False
) -> Tensor:
    """``paper_mask_values`` with the hand-written backward: same arguments, the same values up to rounding
    (the recording forward takes each matrix-vector product as ``vecdot``, autograd's as ``bmm``)."""
    return _FusedPaperMask.apply(A_feat, w, prompt, cfg, depth, query_only)


class _FusedPaperMask(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A_feat, w, prompt, cfg, depth, query_only):
        tape = Tape()
        out = paper_mask_values(cfg, A_feat, w, prompt, depth, query_only, tape)
        ctx.save_for_backward(A_feat, w, prompt)
        ctx.args, ctx.tape = (cfg, depth, query_only), tape
        return out

    @staticmethod
    def backward(ctx, g_out):
        A_feat, w, prompt = ctx.saved_tensors
        cfg, depth, query_only = ctx.args
        if torch.is_grad_enabled():  # create_graph: autograd's own graph, so it can be differentiated again
            with torch.enable_grad():
                out = paper_mask_values(cfg, A_feat, w, prompt, depth, query_only)
            return (*torch.autograd.grad(out, (A_feat, w), g_out, create_graph=True), None, None, None, None)
        uses, g_w = _value_path_backward(cfg, w, prompt, ctx.tape, g_out, depth, query_only)
        g_A = torch.zeros_like(A_feat)
        x = prompt[..., PromptLayout(cfg.d_features).features]
        for (u, h, alone), entries in uses.items():
            p = ctx.tape.last[h] if alone else ctx.tape.full[u][h]
            g_A[..., u, h, :, :] += _pattern_backward(cfg, p, entries, x[..., -1:, :] if alone else x, x[..., :-1, :])
        return g_A, g_w, None, None, None, None


@dataclass
class _Use:
    """One use of a pattern: its rows (all, or the query's), upstream gradient, values and output."""

    rows: slice
    g: Float[Tensor, "*model batch rows"]
    v: Float[Tensor, "*model batch source"]
    z: Float[Tensor, "*model batch rows"]


def _value_path_backward(
    cfg: ICTDConfig, w: Tensor, prompt: Tensor, tape: Tape, g_out: Tensor, depth: int, query_only: bool
) -> tuple[dict[tuple[int, int, bool], list[_Use]], Tensor]:
    """Walk the layers backward: ``dL/dw`` and, per pattern ``(unique layer, head, last alone)``, its uses."""
    lay = PromptLayout(cfg.d_features)
    T, C = lay.target, lay.current
    rows_shape, pos = prompt.shape[:-1], prompt.shape[-2]  # [*model, batch, pos]
    last_alone = query_only and not cfg.tied
    g_fixed = prompt.new_zeros(*w.shape[:-1], *rows_shape[-2:])  # [*model, unique, head, batch, pos]
    g_wt, g_wc = w.new_zeros(w.shape[:-1]), w.new_zeros(w.shape[:-1])
    g_cur, g_tgt = (prompt.new_zeros(rows_shape), prompt.new_zeros(rows_shape)) if query_only else (g_out, None)
    uses: dict[tuple[int, int, bool], list[_Use]] = {}
    for layer in reversed(range(depth)):
        u, final = (0 if cfg.tied else layer), query_only and layer == depth - 1
        cur, tgt, vs, zs = tape.layers[layer]
        if final:  # the query's value: current[:, -1] + z_0[:, 0]
            g_cur[..., -1] = g_out
            g_z = [g_out.unsqueeze(-1)]
        elif cfg.form == "tsm":  # target' = gamma shift(current'), current' = current + z_0
            g_cur = g_cur if g_tgt is None else g_cur + cfg.gamma * _shift_adjoint(g_tgt)
            g_z, g_tgt = [g_cur], None
        else:  # target' = target + shift(z_1), current' = current + z_0
            g_z = [g_cur, None if g_tgt is None else _shift_adjoint(g_tgt)]
        g_cur, g_tgt = g_cur.clone(), None if g_tgt is None else g_tgt.clone()
        for h, g in enumerate(g_z):
            if g is None:
                continue
            rows = slice(pos - 1, pos) if final and not last_alone else slice(0, g.shape[-1])
            p = tape.last[h] if final and last_alone else tape.full[u][h]
            g_v = (g.unsqueeze(-2) @ p[..., rows, :]).squeeze(-2)  # p^T g: [*model, batch, source]
            g_fixed[..., u, h, :, :-1] += g_v
            g_wt[..., u, h] += _sum_rows(g_v * tgt[..., :-1])
            g_wc[..., u, h] += _sum_rows(g_v * cur[..., :-1])
            if g_tgt is None:
                g_tgt = prompt.new_zeros(rows_shape)
            g_tgt[..., :-1] += w[..., u, h, T, None, None] * g_v
            g_cur[..., :-1] += w[..., u, h, C, None, None] * g_v
            uses.setdefault((u, h, final and last_alone), []).append(_Use(rows, g, vs[h], zs[h]))
    g_w = torch.zeros_like(w)
    g_w[..., :T] = torch.einsum("...bpm,...uhbp->...uhm", prompt[..., :T], g_fixed)
    g_w[..., T] += g_wt
    g_w[..., C] += g_wc
    return uses, g_w


def _sum_rows(x: Float[Tensor, "*model batch source"]) -> Float[Tensor, "*model"]:
    """The sum over the batch and sources, per model (the whole sum without a model axis)."""
    return x.sum() if x.ndim == 2 else x.sum((-2, -1))


def _pattern_backward(
    cfg: ICTDConfig,
    p: Float[Tensor, "*model batch rows source"],
    uses: list[_Use],
    queries: Float[Tensor, "*model batch rows d_feat"],
    sources: Float[Tensor, "*model batch source d_feat"],
) -> Float[Tensor, "*model d_feat d_feat"]:
    """``dL/dA`` of one pattern from its uses (module docstring): ``K = dL/dscore @ X`` without the full-size
    ``dL/dscore``, then ``K^T X``."""
    if cfg.attention == "softmax":
        # K[j] = sum_l g_l[j] (p (v_l * X))[j] - c[j] (p X)[j]: one product of p with every use's v_l * X and X.
        # A row of dL/dscore sums to 0, so X may lose its mean over the sources: the two terms then cancel less
        X = sources - sources.mean(-2, keepdim=True)
        Y = torch.cat([use.v.unsqueeze(-1) * X for use in uses] + [X], dim=-1)
        PY = (p @ Y).unflatten(-1, (len(uses) + 1, sources.shape[-1]))  # [*model, batch, rows, use + 1, d]
        c = p.new_zeros(p.shape[:-1])
        for use in uses:
            c[..., use.rows] += use.g * use.z
        K = PY[..., -1, :] * -c.unsqueeze(-1)
        for k, use in enumerate(uses):
            K[..., use.rows, :] += use.g.unsqueeze(-1) * PY[..., use.rows, k, :]
    else:  # dL/dscore = G / n: K[j] = sum_l g_l[j] (v_l^T X) / n, no pattern needed
        K = p.new_zeros(*p.shape[:-1], sources.shape[-1])
        for use in uses:
            K[..., use.rows, :] += use.g.unsqueeze(-1) * (use.v.unsqueeze(-2) @ sources / sources.shape[-2])
    return torch.einsum("...bjc,...bja->...ca", K, queries)


def _shift_adjoint(g: Float[Tensor, "*model batch pos"]) -> Float[Tensor, "*model batch pos"]:
    """The adjoint of ``shift_row``: position ``k + 1`` receives position ``k``; position 0, 0."""
    return torch.cat([torch.zeros_like(g[..., :1]), g[..., :-1]], dim=-1)
