"""The predecessor's constructions (Wang et al., ICLR 2025; docs/theory.md §13), as small pure functions.

Derivation (one layer of ``Z <- Z + (1/n) P Z M act(Z^T Q Z)``, identity activation, context column
``z_i = [phi_i; gamma phi'_i; y_i]`` with ``y_i = R_{i+1}`` at input, query ``[phi_q; 0; y_q]``, ``y_q = 0``):

* ``P = e_{2d+1} e_{2d+1}^T`` writes the last row only, so the feature blocks never change and the
  last row carries everything: ``y_j <- y_j + (1/n) sum_i (sum_k M[i, k] ... ) y_i (z_i^T Q z_j)``.
* TD(0): ``Q``'s top-left ``2d x 2d`` block ``[[-C^T, C^T], [0, 0]]`` gives ``z_i^T Q z_j =
  -(C phi_i)^T (phi_j - gamma phi'_j)`` (``phi'_q = 0`` at a query). With ``w_l`` defined by
  ``y_q = -w_l^T phi_q``, the query row gains ``-(1/n) sum_i y_i (C phi_i)^T phi_q``, so
  ``w_{l+1} = w_l + (1/n) C sum_i y_i phi_i``, and each context row gains ``-(w_{l+1} - w_l)^T
  (phi_i - gamma phi'_i)``: by induction ``y_i = R_{i+1} + gamma w_l^T phi'_i - w_l^T phi_i``, the TD
  error of transition ``i`` under ``w_l``. One layer is one batch TD(0) step with preconditioner ``C``;
  the prediction ``-Z[-1, -1]`` is ``w_l^T phi_q``.
* TD(lambda): the same ``P``, ``Q`` with ``M``'s lower triangle ``lambda^(i-k)``: source ``i``'s error is
  carried by ``sum_{k <= i} lambda^(i-k) phi_k``, the eligibility trace ``e_i``; ``w`` gains
  ``(1/n) C sum_i y_i e_i``.
* Residual gradient: ``Q = M2^T B M1`` with ``M1 = [[-I, I], [0, 0]]``, ``M2 = -M1``, ``B = diag(C^T, 0)``,
  i.e. top-left ``[[-C^T, C^T], [C^T, -C^T]]``: ``z_i^T Q z_q = -(C (phi_i - gamma phi'_i))^T phi_q``, so
  ``w`` gains ``(1/n) C sum_i y_i (phi_i - gamma phi'_i)``, the gradient of the mean squared TD error.
* Average-reward TD (``2d + 2`` rows, the last one starting at 0, ``gamma = 1`` in the prompt): two heads
  share the TD(0) ``Q``; head 1 reads the reward row through ``R`` (column ``j`` of ``Z R`` is the running
  mean ``rbar_j`` minus ``R_{j+1}``), head 2 the last row; ``W`` adds both to the last row. The last
  row becomes ``y_i = w^T (phi_i - phi'_i)`` and the query's ``+Z[-1, -1] = w_l^T phi_q`` with
  ``w_{l+1} = w_l + (1/n) C sum_i (R_{i+1} - rbar_i + w_l^T phi'_i - w_l^T phi_i) phi_i``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config.linear import LinearICTDConfig
from ictd_interp.models.linear.model import HookedLinearICTD
from ictd_interp.tasks.prompt import PromptLayout


@dataclass(frozen=True)
class LinearConstruction:
    """One layer's ``P`` and ``Q`` (``[2d+1, 2d+1]``) and the source mixing ``lambda`` it needs."""

    name: str
    P: Float[Tensor, "d_model d_model"]
    Q: Float[Tensor, "d_model d_model"]
    trace_decay: float = 0.0


def _preconditioner(d: int, C: Optional[Tensor]) -> Float[Tensor, "d d"]:
    C = torch.eye(d, dtype=torch.float64) if C is None else C.to(torch.float64)
    if C.shape != (d, d):
        raise ValueError(f"C: the preconditioner must be [d, d] = [{d}, {d}], got {tuple(C.shape)}")
    return C


def _last_row_writer(rows: int) -> Tensor:
    P = torch.zeros(rows, rows, dtype=torch.float64)
    P[-1, -1] = 1.0
    return P


def _td_block(d: int, C: Tensor, rows: int) -> Tensor:
    """``Q`` with top-left ``2d x 2d`` block ``[[-C^T, C^T], [0, 0]]``."""
    Q = torch.zeros(rows, rows, dtype=torch.float64)
    Q[:d, :d], Q[:d, d : 2 * d] = -C.T, C.T
    return Q


def td0(d: int, C: Optional[Tensor] = None) -> LinearConstruction:
    """Batch TD(0) with preconditioner ``C`` (identity by default)."""
    C = _preconditioner(d, C)
    return LinearConstruction("td0", _last_row_writer(2 * d + 1), _td_block(d, C, 2 * d + 1))


def td_lambda(d: int, lam: float, C: Optional[Tensor] = None) -> LinearConstruction:
    """Batch TD(lambda): TD(0)'s ``P`` and ``Q``, run with ``M``'s lower triangle ``lambda^(i-j)``."""
    base = td0(d, C)
    return LinearConstruction("td_lambda", base.P, base.Q, trace_decay=lam)


def residual_gradient(d: int, C: Optional[Tensor] = None) -> LinearConstruction:
    """Residual gradient: ``Q = M2^T B M1``."""
    C = _preconditioner(d, C)
    eye, zero = torch.eye(d, dtype=torch.float64), torch.zeros(d, d, dtype=torch.float64)
    M1 = torch.cat([torch.cat([-eye, eye], 1), torch.cat([zero, zero], 1)], 0)
    B = torch.block_diag(C.T, zero)
    Q = torch.zeros(2 * d + 1, 2 * d + 1, dtype=torch.float64)
    Q[: 2 * d, : 2 * d] = (-M1).T @ B @ M1
    return LinearConstruction("residual_gradient", _last_row_writer(2 * d + 1), Q)


def linear_model(layers: Sequence[LinearConstruction], gamma: float, dtype: str = "float64") -> HookedLinearICTD:
    """A ``HookedLinearICTD`` holding one construction per layer (tied when all layers are the same object)."""
    first = layers[0]
    if any(c.trace_decay != first.trace_decay for c in layers):
        raise ValueError("layers: every layer must use the same trace_decay (M is the architecture's)")
    tied = all(c is first for c in layers)
    d = (first.P.shape[0] - 1) // 2
    model = HookedLinearICTD(
        LinearICTDConfig(
            d_features=d, n_layers=len(layers), gamma=gamma, tied=tied, trace_decay=first.trace_decay, dtype=dtype
        )
    )
    with torch.no_grad():
        for attn, c in zip(model.unique_attention(), layers):
            attn.P.copy_(c.P)
            attn.Q.copy_(c.Q)
    return model


@dataclass(frozen=True)
class AverageRewardTD:
    """The two-head average-reward TD layer's weights (``2d + 2`` rows)."""

    P1: Tensor
    P2: Tensor
    Q: Tensor
    W: Tensor  # [2d+2, 2 (2d+2)]: both heads' outputs into the last row


def average_reward_td(d: int, C: Optional[Tensor] = None) -> AverageRewardTD:
    C = _preconditioner(d, C)
    rows = 2 * d + 2
    P1, P2 = torch.zeros(rows, rows, dtype=torch.float64), _last_row_writer(rows)
    P1[2 * d, 2 * d] = 1.0  # head 1 reads the reward row
    W = torch.zeros(rows, 2 * rows, dtype=torch.float64)
    W[-1, 2 * d], W[-1, -1] = 1.0, 1.0
    return AverageRewardTD(P1, P2, _td_block(d, C, rows), W)


def average_reward_prompt(prompt: Float[Tensor, "batch pos d_prompt"]) -> Float[Tensor, "batch row column"]:
    """``Z [batch, 2d+2, n+1]`` (the predecessor's orientation): ``[phi_k; phi_{k+1}; R_{k+1}; 0]`` per context
    column (no discount), ``[phi_q; 0; 0; 0]`` at the query."""
    lay = PromptLayout(prompt.shape[-1] - 3)
    x, r = prompt[..., lay.features].double(), prompt[..., lay.reward].double()
    Z = torch.zeros(x.shape[0], 2 * x.shape[-1] + 2, x.shape[1], dtype=torch.float64)
    d = x.shape[-1]
    Z[:, :d, :] = x.transpose(1, 2)
    Z[:, d : 2 * d, :-1] = x[:, 1:].transpose(1, 2)
    Z[:, 2 * d, :-1] = r[:, :-1]
    return Z


def average_reward_layer(Z: Float[Tensor, "batch row column"], w: AverageRewardTD) -> Float[Tensor, "batch row column"]:
    """``Z + (1/n) W [P1 Z R M Z^T Q Z; P2 Z M Z^T Q Z]`` with ``R = triu(1) diag(1/k) - I`` and
    ``M = diag(1.., 0)``."""
    n = Z.shape[-1] - 1
    M = torch.eye(n + 1, dtype=Z.dtype)
    M[-1, -1] = 0.0
    R = torch.triu(torch.ones(n + 1, n + 1, dtype=Z.dtype)) @ torch.diag(1.0 / torch.arange(1, n + 2, dtype=Z.dtype))
    R = R - torch.eye(n + 1, dtype=Z.dtype)
    scores = Z.transpose(1, 2) @ w.Q @ Z
    heads = torch.cat([w.P1 @ Z @ R @ M @ scores, w.P2 @ Z @ M @ scores], dim=1)
    return Z + w.W @ heads / n
