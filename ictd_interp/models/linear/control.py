"""Control in the predecessor's linear architecture (docs/theory.md §14a): batch semi-gradient SARSA and a batch
actor-critic, each one single-head linear-attention block, as Liang & Lai (2026) show they can be. Both are the
TD(0) construction of ``linear_construction.py`` on a state-action prompt; derived here.

**SARSA.** On the pair chain of a behaviour policy (``control_tasks``: the context's columns are the pairs
``(S_k, A_k)`` with features ψ), TD(0)'s block is batch semi-gradient SARSA:

    w_{l+1} = w_l + (1/n) C Σ_k δ_k ψ_k,   δ_k = R_{k+1} + γ w_l^T ψ_{k+1} − w_l^T ψ_k,

and the query ``(s, a)`` reads ``q_l(s, a) = w_l^T ψ(s, a)`` (``sarsa``).

**Actor-critic.** Give every pair three blocks, ``φ(s, a) = [ψ(s, a); g(s, a); 0]``, with ``g`` the score of the
softmax policy linear in ψ at the policy π_0 the actor starts from,

    g(s, a) = ∇_θ log π_θ(a | s) at θ_0 = ψ(s, a) − Σ_b π_0(b | s) ψ(s, b)          (``score_features``),

and ask the actor at a query column ``[0; 0; ψ(s, a)]`` (``actor_queries``). TD(0) with ``w = [w_ψ; w_g; θ]`` and

    C = [[α I, 0, 0], [0, 0, 0], [0, β I, 0]]        (C φ_k = [α ψ_k; 0; β g_k])

never moves ``w_g`` (so ``w^T φ_k = w_ψ^T ψ_k`` and ``δ_k`` is the critic's SARSA error; the context's third block
is 0) and updates

    w_ψ <- w_ψ + (α/n) Σ_k δ_k ψ_k      (the critic: batch SARSA),
    θ   <- θ   + (β/n) Σ_k δ_k g_k      (the actor: a policy-gradient step, the critic's TD error for the advantage).

A critic query ``φ(s, a)`` reads ``q_l(s, a) = w_ψ^T ψ(s, a)``; an actor query reads the preference change
``h_l(s, a) = θ_l^T ψ(s, a)``: from the uniform policy (θ_0 = 0) the improved policy is ``softmax(h)``, from
``π_0 = softmax(θ_0^T ψ)`` it is ``softmax(θ_0^T ψ + h)`` (θ_0 is not carried). The step estimates the return's
gradient only when the behaviour policy is π_0 (no importance weights), and a SARSA error is no advantage
(``E[δ | S, A] → 0`` as the critic fits). One layer is exactly one batch actor-critic step; in deeper blocks the
critic keeps evaluating the behaviour policy and the actor's score stays at π_0 (the block is linear in its
prompt). Tested against loops written from these equations
(``reference.control_iterations.batch_actor_critic``) layer by
layer at 1e-10 in float64; docs/theory.md §14a gives the identity that makes the actor the critic's advantage.
"""

from __future__ import annotations

from typing import Optional

import torch
from einops import einsum, rearrange
from jaxtyping import Float
from torch import Tensor

from ictd_interp.models.linear.td import LinearConstruction, td0


def sarsa(d: int, C: Optional[Tensor] = None) -> LinearConstruction:
    """Batch semi-gradient SARSA on ``d`` state-action features: TD(0)'s block on the pair chain."""
    base = td0(d, C)
    return LinearConstruction("sarsa", base.P, base.Q)


def actor_critic_preconditioner(d: int, alpha: float, beta: float) -> Float[Tensor, "three_d three_d"]:
    """``C = [[α I, 0, 0], [0, 0, 0], [0, β I, 0]]`` on the blocks ``[ψ; g; query slot]``."""
    C = torch.zeros(3 * d, 3 * d, dtype=torch.float64)
    C[:d, :d] = alpha * torch.eye(d, dtype=torch.float64)
    C[2 * d :, d : 2 * d] = beta * torch.eye(d, dtype=torch.float64)
    return C


def actor_critic(d: int, alpha: float = 1.0, beta: float = 1.0) -> LinearConstruction:
    """One step of batch actor-critic (critic step ``alpha``, actor step ``beta``) on ``d`` pair features;
    the model's prompt features are ``actor_critic_features`` (``3 d`` wide)."""
    base = td0(3 * d, actor_critic_preconditioner(d, alpha, beta))
    return LinearConstruction("actor_critic", base.P, base.Q)


def score_features(
    psi: Float[Tensor, "*fbatch pair d"], policy: Float[Tensor, "*pbatch state action"]
) -> Float[Tensor, "... pair d"]:
    """``g(s, a) = ψ(s, a) − Σ_b π_0(b | s) ψ(s, b)`` (pair index ``s * n_actions + a``)."""
    by_state = rearrange(psi, "... (s a) d -> ... s a d", a=policy.shape[-1])
    mean = einsum(policy.to(psi.dtype), by_state, "... s b, ... s b d -> ... s d")
    return rearrange(by_state - mean.unsqueeze(-2), "... s a d -> ... (s a) d")


def actor_critic_features(
    psi: Float[Tensor, "*fbatch pair d"], policy: Float[Tensor, "*pbatch state action"]
) -> Float[Tensor, "... pair three_d"]:
    """The pairs' prompt features ``[ψ; g; 0]`` (contexts and critic queries; per task when ``policy`` is)."""
    g = score_features(psi, policy)
    psi = psi.expand_as(g)
    return torch.cat([psi, g, torch.zeros_like(psi)], dim=-1)


def actor_queries(psi: Float[Tensor, "*batch pair d"]) -> Float[Tensor, "*batch pair three_d"]:
    """The actor's query columns ``[0; 0; ψ(s, a)]``: the model reads ``h(s, a) = θ^T ψ(s, a)`` there."""
    return torch.cat([torch.zeros_like(psi), torch.zeros_like(psi), psi], dim=-1)
