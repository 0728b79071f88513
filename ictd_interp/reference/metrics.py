"""Small pure metrics that training logs and the ``analyses`` package builds on (docs/theory.md §5, §7).

They live in the core so that a training run can report them without importing ``analyses``.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from einops import einsum
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.models.stylised.masks import attention_mask, value_mask
from ictd_interp.models.stylised.theta_star import SIGNATURE_SIGNS, layer_star
from ictd_interp.tasks.prompt import PromptLayout


def cosine(a: Tensor, b: Tensor) -> float:
    """Cosine of two flattened tensors (0 when either is zero); invariant to positive rescaling."""
    a, b = a.detach().flatten().double(), b.detach().flatten().double()
    denom = a.norm() * b.norm()
    return float(a @ b / denom) if denom > 0 else 0.0


def identifiable_inputs(cfg: ICTDConfig, layer: int) -> Bool[Tensor, "d_model"]:
    """Input rows that can be nonzero at ``layer``. The prompt's value rows are 0, so an untied
    layer 0 never sees them: weights that multiply them get no gradient and are not judged."""
    mask = torch.ones(cfg.d_model, dtype=torch.bool)
    if layer == 0 and not cfg.tied:
        layout = PromptLayout(cfg.d_features)
        mask[[layout.target, layout.current]] = False
    return mask


def relative_distance(a: Tensor, b: Tensor) -> float:
    """``||a - b|| / ||b||`` of two flattened tensors: the size part that a cosine leaves out."""
    a, b = a.detach().flatten().double(), b.detach().flatten().double()
    return float((a - b).norm() / b.norm()) if b.norm() > 0 else float("nan")


def _compare_weights(model, cfg: ICTDConfig, measure) -> dict[str, list[float]]:
    star = layer_star(cfg)
    free_a, free_v = attention_mask(cfg).bool(), value_mask(cfg).bool()
    out: dict[str, list[float]] = {"A": [], "V": []}
    for layer, block in enumerate(model.blocks):  # the weights read on the CPU, where θ* and the masks are built
        ident_v = free_v & identifiable_inputs(cfg, layer)
        out["A"].append(measure(block.attn.A.detach().cpu()[free_a], star["A"][free_a]))
        out["V"].append(measure(block.attn.V.detach().cpu()[ident_v], star["V"][ident_v]))
    return out


def weight_cosines(model, cfg: ICTDConfig) -> dict[str, list[float]]:
    """Per layer, ``cos(vec A, vec A*)`` and ``cos(vec V, vec V*)`` over trainable, identifiable entries."""
    return _compare_weights(model, cfg, cosine)


def weight_distances(model, cfg: ICTDConfig) -> dict[str, list[float]]:
    """Per layer, ``||A - A*|| / ||A*||`` and ``||V - V*|| / ||V*||`` over the same entries (size, not direction)."""
    return _compare_weights(model, cfg, relative_distance)


def value_signature(model, cfg: ICTDConfig) -> list[dict]:
    """Per layer, the current-value row of ``V`` on (reward, target, current), normalised by its
    largest identifiable magnitude; unidentifiable entries are ``None`` and not scored."""
    layout = PromptLayout(cfg.d_features)
    cols = [layout.reward, layout.target, layout.current]
    rows = []
    for layer, block in enumerate(model.blocks):
        raw = block.attn.V.detach()[0, layout.current, cols].double().cpu()
        ident = identifiable_inputs(cfg, layer)[cols]
        scale = raw[ident].abs().max().clamp_min(1e-30)
        entries = [float(v / scale) if ok else None for v, ok in zip(raw, ident)]
        match = all(e is None or e * s > 0 for e, s in zip(entries, SIGNATURE_SIGNS))
        rows.append(
            {
                "layer": layer,
                "raw": raw.tolist(),
                "normalised": entries,
                "identifiable": ident.tolist(),
                "matches": match,
            }
        )
    return rows


VALUE_INPUTS = ("reward", "v(S')", "v(S)")  # what ``signature_on_values`` weighs


def signature_on_values(signature: list[Optional[float]], gamma: float) -> list[Optional[float]]:
    """A layer's normalised value-row weights on (reward, target row, current row) as weights on (reward, v(S'),
    v(S)): the target row holds γ v(S'), so its weight times γ, renormalised by the largest magnitude. θ*'s is
    (1, γ, −1), and the effective discount is the v(S') weight over |the v(S) weight|. The one conversion the
    report's words and its signature figure both print."""
    scaled = [None if v is None else v * (gamma if k == 1 else 1.0) for k, v in enumerate(signature)]
    top = max((abs(v) for v in scaled if v is not None), default=0.0)
    return [None if v is None or top == 0 else v / top for v in scaled]


def grouped_kernel(
    pattern: Float[Tensor, "batch query_pos key_pos"], states: Int[Tensor, "batch pos"], n_states: int
) -> Float[Tensor, "batch query_pos state"]:
    """``M^_n`` by position: mass each target position puts on sources in each state ``s'``."""
    n = pattern.shape[-1] - 1
    onehot = F.one_hot(states[:, :n], n_states).to(pattern.dtype)
    return einsum(pattern[..., :n], onehot, "batch query key, batch key state -> batch query state")


def kernel_diagonality(
    pattern: Float[Tensor, "batch query_pos key_pos"], states: Int[Tensor, "batch pos"], n_states: int
) -> Float[Tensor, "batch"]:
    """Mean over visited states ``s`` of ``M^_n(s, s)``: how much a target attends to its own state.

    Every visited state counts once (positions in the same state share one kernel column)."""
    grouped = grouped_kernel(pattern, states, n_states)
    self_mass = torch.gather(grouped, 2, states.unsqueeze(-1)).squeeze(-1)
    per_state = torch.zeros(states.shape[0], n_states, dtype=pattern.dtype, device=pattern.device)
    return visited_mean(per_state.scatter_(1, states, self_mass), states)


def visited_mean(per_state: Float[Tensor, "batch state"], states: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch"]:
    """The mean of ``per_state`` over the states visited at any position of each task (each state once)."""
    visited = torch.zeros_like(per_state).scatter_(1, states, 1.0)
    return (per_state * visited).sum(-1) / visited.sum(-1)


def query_rows(pattern: Float[Tensor, "... query_pos key_pos"], positions: int) -> Float[Tensor, "... pos pos"]:
    """The pattern's rows of the prompt's ``positions`` over its first ``positions`` columns: the whole
    pattern, except for the linear model, whose residual stream holds its ``n`` context columns before one
    query column per state (docs/theory.md §13)."""
    return pattern[..., -positions:, :positions]


def layer_diagonality(
    pattern: Float[Tensor, "batch head query_pos key_pos"], states: Int[Tensor, "batch pos"], n_states: int
) -> Float[Tensor, "head"]:
    """One layer's kernel diagonality averaged over the tasks, per head (``query_rows`` of its pattern)."""
    return torch.tensor(
        [
            kernel_diagonality(query_rows(pattern[:, h], states.shape[1]).double().cpu(), states, n_states)
            .mean()
            .item()
            for h in range(pattern.shape[1])
        ],
        dtype=torch.float64,
    )


def population_kernel(
    features: Float[Tensor, "batch state d_feat"],
    A_ff: Float[Tensor, "d_feat d_feat"],
    mu_pi: Float[Tensor, "batch state"],
) -> Float[Tensor, "batch state state"]:
    """``M_pi(s, s') = mu(s') exp(g(s, s')) / sum_u mu(u) exp(g(s, u))`` with ``g(s, s') = x(s')^T A x(s)``."""
    g = einsum(features, A_ff.to(features.dtype), features, "batch t i, i j, batch s j -> batch s t")
    return torch.softmax(g + mu_pi.log().unsqueeze(1), dim=-1)


def assumption_margin(
    features: Float[Tensor, "batch state d_feat"],
    A_ff: Float[Tensor, "d_feat d_feat"],
    mu_pi: Float[Tensor, "batch state"],
    gamma: float,
) -> Float[Tensor, "batch"]:
    """Margin ``C = min_s M_pi(s, s) - (1 + gamma)/2`` of Assumption 5.1 (holds when ``0 < C < (1-gamma)/2``)."""
    kernel = population_kernel(features, A_ff, mu_pi)
    return torch.diagonal(kernel, dim1=-2, dim2=-1).amin(-1) - (1 + gamma) / 2
