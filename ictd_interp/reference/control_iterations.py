"""Reference iterations for control on a context with action columns (docs/theory.md §14).

Columns: the ``n`` sources (the context's pairs), then targets that are never sources (action columns, the
query). Every column ``j`` starts at ``q_0(j) = 0`` and, per iteration,

    delta_k  = R_{k+1} + gamma Σ_a' w_k(a') q_t(next_columns[k, a']) − q_t(k)      k = 0 .. n-1
    q_{t+1}(j) = q_t(j) + Σ_k softmax_k <x_k, x_j> delta_k                          every column j

with ``w_k`` the backup's weights over the next state's actions: the target policy's ``π(· | S_{k+1})``
(expected SARSA) or ``softmax(β q_t(next_columns[k, ·]))`` (softmax Q-learning). SARSA itself is
``reference.td.softmax_td`` on the pairs' features. ``batch_actor_critic``: the linear architecture's SARSA and
actor-critic blocks (``models.linear.control``), as the loop over transitions.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from einops import einsum
from jaxtyping import Float, Int
from torch import Tensor

Weights = Callable[[Tensor], Tensor]  # q at the next actions [batch, source, action] -> weights, same shape


def backup_td(
    x: Float[Tensor, "batch column d"],
    rewards: Float[Tensor, "batch source"],
    next_columns: Int[Tensor, "batch source action"],
    weights: Weights,
    gamma: float,
    n_iters: int,
) -> Float[Tensor, "batch iter column"]:
    """``q_0 .. q_{n_iters}`` on every column (module docstring)."""
    n = rewards.shape[1]
    kernel = torch.softmax(einsum(x[:, :n], x, "b k d, b j d -> b k j"), dim=1)  # over the sources k
    q = x.new_zeros(x.shape[:2])
    out = [q]
    for _ in range(n_iters):
        q_next = torch.gather(q, 1, next_columns.flatten(1)).view_as(next_columns).to(q.dtype)
        delta = rewards + gamma * (weights(q_next) * q_next).sum(-1) - q[:, :n]
        q = q + einsum(kernel, delta, "b k j, b k -> b j")
        out.append(q)
    return torch.stack(out, dim=1)


def policy_weights(policy: Float[Tensor, "batch state action"], next_states: Int[Tensor, "batch source"]) -> Weights:
    """Expected SARSA's weights: ``π(· | S_{k+1})`` for each source ``k``."""
    rows = torch.gather(policy, 1, next_states[..., None].expand(-1, -1, policy.shape[-1]))
    return lambda q_next: rows.to(q_next.dtype)


def softmax_weights(beta: float) -> Weights:
    """Softmax Q-learning's weights: ``softmax(β q)`` over the next state's actions."""
    return lambda q_next: torch.softmax(beta * q_next, dim=-1)


def batch_actor_critic(
    psi: Float[Tensor, "pos d"],
    score: Float[Tensor, "source d"],
    rewards: Float[Tensor, "source"],
    gamma: float,
    alpha: float,
    beta: float,
    n_iters: int,
) -> tuple[Float[Tensor, "iter d"], Float[Tensor, "iter d"]]:
    """Batch actor-critic on one context, as the textbook loop over its transitions: the pairs' features
    ``psi`` of ``(S_0, A_0) .. (S_n, A_n)``, the actor's score ``g_k = ∇ log π(A_k | S_k)`` of each source and the
    rewards ``R_{k+1}``. From ``w = θ = 0``, per iteration ``δ_k = R_{k+1} + γ w·ψ_{k+1} − w·ψ_k`` and
    ``w += α/n Σ_k δ_k ψ_k``, ``θ += β/n Σ_k δ_k g_k``; returns ``w`` and ``θ`` after each (SARSA: ``w`` alone)."""
    n = rewards.shape[0]
    w, theta = psi.new_zeros(psi.shape[1]), psi.new_zeros(psi.shape[1])
    ws, thetas = [], []
    for _ in range(n_iters):
        dw, dtheta = torch.zeros_like(w), torch.zeros_like(theta)
        for k in range(n):
            delta = rewards[k] + gamma * torch.dot(w, psi[k + 1]) - torch.dot(w, psi[k])
            dw += delta * psi[k]
            dtheta += delta * score[k]
        w, theta = w + alpha * dw / n, theta + beta * dtheta / n
        ws.append(w)
        thetas.append(theta)
    return torch.stack(ws), torch.stack(thetas)
