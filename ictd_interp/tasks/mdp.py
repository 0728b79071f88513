"""Finite Markov decision processes for in-context control (docs/theory.md §14), batched like ``MRP``.

An MDP and a policy ``π(a | s)`` define a Markov reward process on state-action pairs,

    P_π[(s, a), (s', a')] = P(s' | s, a) π(a' | s'),    r_π(s, a) = r(s, a),    μ_π(s, a) = μ0(s) π(a | s),

whose trajectory is ``(S_0, A_0), R_1, (S_1, A_1), R_2, ...`` and whose value is the action value ``q_π``
(``pair_mrp``). So SARSA on the context is TD on that chain with state-action features, and every MRP tool
(trajectories, prompts, θ*, the state-space forward) applies to it unchanged. ``q_star`` is computed by value
iteration to a stated tolerance; ``policy_return`` is a policy's exact discounted return from ``μ0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ictd_interp.config.fields import check_gamma
from ictd_interp.tasks._types import ArrayLike, as_tensor, tensor_fields
from ictd_interp.tasks.mrp import MRP, STOCHASTIC_TOL, resolve_generator

Q_STAR_TOL = 1e-12


@dataclass(frozen=True)
class MDP:
    """A finite MDP, or a batch of them sharing ``gamma``.

    Args:
        P: transition probabilities ``[..., s, a, s']``, a distribution over ``s'`` for every ``(s, a)``.
        r: reward on taking action ``a`` in state ``s``, ``[..., s, a]`` (``R_{t+1} = r(S_t, A_t)``).
        mu0: initial state distribution ``[..., s]``.
        gamma: discount factor in ``[0, 1)``.
    """

    P: ArrayLike
    r: ArrayLike
    mu0: ArrayLike
    gamma: float

    def __post_init__(self) -> None:
        tensor_fields(self, "P", "r", "mu0")
        object.__setattr__(self, "gamma", check_gamma(self.gamma))
        P, r, mu0 = self.P, self.r, self.mu0
        if P.ndim < 3 or P.shape[-1] != P.shape[-3]:
            raise ValueError(f"P: expected [..., s, a, s] with the same s twice, got shape {tuple(P.shape)}")
        if tuple(r.shape) != tuple(P.shape[:-1]):
            raise ValueError(f"r: expected shape {tuple(P.shape[:-1])} (..., states, actions), got {tuple(r.shape)}")
        if tuple(mu0.shape) != tuple(P.shape[:-2]):
            raise ValueError(f"mu0: expected shape {tuple(P.shape[:-2])}, got {tuple(mu0.shape)}")
        for name, t in (("P", P), ("r", r), ("mu0", mu0)):
            if not bool(torch.isfinite(t).all()):
                raise ValueError(f"{name}: has non-finite entries")
        if bool((P < 0).any()) or bool(((P.sum(-1) - 1).abs() > STOCHASTIC_TOL).any()):
            raise ValueError("P: every P[s, a, :] must be a probability distribution over next states")
        if bool((mu0 < 0).any()) or bool(((mu0.sum(-1) - 1).abs() > STOCHASTIC_TOL).any()):
            raise ValueError("mu0: must be a probability distribution over states")

    @property
    def n_states(self) -> int:
        return self.P.shape[-1]

    @property
    def n_actions(self) -> int:
        return self.P.shape[-2]

    def check_policy(self, policy: ArrayLike, name: str = "policy") -> Float[Tensor, "... state action"]:
        """``policy [..., s, a]`` (or ``[s, a]`` for the whole batch) as a float64 tensor, checked stochastic."""
        pi = as_tensor(policy, name)
        if tuple(pi.shape[-2:]) != (self.n_states, self.n_actions):
            raise ValueError(
                f"{name}: expected [..., {self.n_states}, {self.n_actions}] (states, actions), got "
                f"shape {tuple(pi.shape)}"
            )
        if bool((pi < 0).any()) or bool(((pi.sum(-1) - 1).abs() > STOCHASTIC_TOL).any()):
            raise ValueError(f"{name}: every row pi[s, :] must be a probability distribution over actions")
        return pi.expand(*self.P.shape[:-3], self.n_states, self.n_actions)

    def pair_mrp(self, policy: ArrayLike) -> MRP:
        """The MRP on state-action pairs (index ``s * n_actions + a``) that ``policy`` makes of this MDP."""
        pi = self.check_policy(policy)
        s, a = self.n_states, self.n_actions
        P = (self.P[..., :, :, :, None] * pi[..., None, None, :, :]).reshape(*self.P.shape[:-3], s * a, s * a)
        return MRP(
            P,
            self.r.reshape(*self.r.shape[:-2], s * a),
            (self.mu0[..., :, None] * pi).reshape(*self.mu0.shape[:-1], s * a),
            self.gamma,
        )

    @classmethod
    def from_pair_mrp(cls, mrp: MRP, n_actions: int) -> "MDP":
        """The MDP a pair MRP (``pair_mrp``) was made of: ``P(s' | s, a) = Σ_a' P_pair[(s, a), (s', a')]``,
        ``r(s, a)`` and ``mu0(s) = Σ_a mu0_pair(s, a)``; exact for any policy (its rows sum to 1)."""
        pairs = mrp.n_states
        if pairs % n_actions:
            raise ValueError(f"n_actions: {pairs} state-action pairs do not split into {n_actions} actions per state")
        s, batch = pairs // n_actions, mrp.P.shape[:-2]
        return cls(
            mrp.P.reshape(*batch, s, n_actions, s, n_actions).sum(-1),
            mrp.r.reshape(*batch, s, n_actions),
            mrp.mu0.reshape(*batch, s, n_actions).sum(-1),
            mrp.gamma,
        )

    def state_mrp(self, policy: ArrayLike) -> MRP:
        """The MRP on states that ``policy`` makes of this MDP: ``P_π[s, s'] = Σ_a π(a|s) P(s'|s, a)``,
        ``r_π(s) = Σ_a π(a|s) r(s, a)`` (its value is ``v_π``)."""
        pi = self.check_policy(policy)
        return MRP(torch.einsum("...sa,...sat->...st", pi, self.P), (pi * self.r).sum(-1), self.mu0, self.gamma)

    def batched(self, n_tasks: int) -> "MDP":
        """``n_tasks`` copies of a single MDP (one context each, e.g. a Gymnasium environment's)."""
        if self.P.ndim != 3:
            raise ValueError(f"mdp: batched() takes a single MDP (P [s, a, s]), got shape {tuple(self.P.shape)}")
        return MDP(
            self.P.expand(n_tasks, -1, -1, -1), self.r.expand(n_tasks, -1, -1), self.mu0.expand(n_tasks, -1), self.gamma
        )

    def q_values(self, policy: ArrayLike) -> Float[Tensor, "... state action"]:
        """``q_π``: the pair MRP's value, by a linear solve."""
        return self.pair_mrp(policy).v_pi.reshape(*self.r.shape)

    def q_star(self, tol: float = Q_STAR_TOL, max_iter: int = 100_000) -> Float[Tensor, "... state action"]:
        """``q*`` by value iteration ``q ← r + γ P max_a' q``, stopped when a sweep moves it by less than
        ``tol (1 − γ) / γ`` — then ``‖q − q*‖∞ < tol`` in exact arithmetic — or by less than 8 ulp of ``‖q‖∞``,
        where float64 stops moving first (γ near 1 makes ``tol (1 − γ) / γ`` smaller than an ulp: the result is then
        ``q*`` to about ``ulp(q) / (1 − γ)``, e.g. 3.5e-12 at γ = 0.999 and ``|q| ≈ 24``)."""
        q = torch.zeros_like(self.r)
        stop = tol * (1 - self.gamma) / max(self.gamma, 1e-300)
        for _ in range(max_iter):
            new = self.r + self.gamma * torch.einsum("...sat,...t->...sa", self.P, q.amax(-1))
            moved, scale = float((new - q).abs().max()), float(new.abs().max())
            if moved < max(stop, 8 * torch.finfo(new.dtype).eps * scale):
                return new
            q = new
        raise RuntimeError(f"q_star: value iteration did not reach {tol} in {max_iter} sweeps")

    def policy_return(self, policy: ArrayLike) -> Float[Tensor, "..."]:
        """The exact discounted return ``Σ_s μ0(s) Σ_a π(a|s) q_π(s, a)`` of ``policy`` from ``μ0``."""
        pi = self.check_policy(policy)
        return (self.mu0[..., :, None] * pi * self.q_values(pi)).sum((-1, -2))


def greedy_policy(q: Float[Tensor, "... state action"]) -> Float[Tensor, "... state action"]:
    """The deterministic policy that takes ``argmax_a q(s, a)`` (the first on ties)."""
    return torch.nn.functional.one_hot(q.argmax(-1), q.shape[-1]).to(q.dtype)


def uniform_policy(n_states: int, n_actions: int) -> Float[Tensor, "state action"]:
    return torch.full((n_states, n_actions), 1.0 / n_actions, dtype=torch.float64)


def random_mdps(
    batch: int,
    n_states: int,
    n_actions: int,
    gamma: float = 0.9,
    *,
    seed: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
) -> MDP:
    """Random tabular MDPs: ``P(· | s, a)`` a normalised vector of uniforms (every next state possible),
    ``r(s, a)`` uniform on ``[-1, 1]``, ``μ0`` uniform."""
    gen = resolve_generator(seed, generator)
    P = torch.rand(batch, n_states, n_actions, n_states, generator=gen, dtype=torch.float64)
    r = 2 * torch.rand(batch, n_states, n_actions, generator=gen, dtype=torch.float64) - 1
    mu0 = torch.full((batch, n_states), 1.0 / n_states, dtype=torch.float64)
    return MDP(P / P.sum(-1, keepdim=True), r, mu0, gamma)


def two_action_chains(
    batch: int,
    n_states: int,
    gamma: float = 0.9,
    *,
    seed: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
) -> MDP:
    """Boyan-like chains with two actions: from state ``i``, action 0 steps to ``i + 1`` and action 1 to
    ``i + 2`` (clipped at the last state), each with probability ``1 − ε`` (else it stays), ``ε`` uniform on
    ``[0, 0.2]`` per task; rewards uniform on ``[-3, -1]`` for action 0 and ``[-4, -1]`` for action 1 (the long
    step may cost more); the last state restarts from ``μ0`` (uniform) whatever the action."""
    gen = resolve_generator(seed, generator)
    s = n_states
    eps = 0.2 * torch.rand(batch, 1, 1, generator=gen, dtype=torch.float64)
    P = torch.zeros(batch, s, 2, s, dtype=torch.float64)
    for i in range(s - 1):
        for a, step in ((0, 1), (1, 2)):
            P[:, i, a, min(i + step, s - 1)] += 1 - eps[:, 0, 0]
            P[:, i, a, i] += eps[:, 0, 0]
    P[:, s - 1] = 1.0 / s
    low = torch.tensor([-3.0, -4.0], dtype=torch.float64)
    r = low + (-1.0 - low) * torch.rand(batch, s, 2, generator=gen, dtype=torch.float64)
    return MDP(P, r, torch.full((batch, s), 1.0 / s, dtype=torch.float64), gamma)


def pair_features(state_features: Float[Tensor, "... state d"], n_actions: int) -> Float[Tensor, "... pair da"]:
    """State-action features ``φ(s, a) = e_a ⊗ φ(s)`` (``d · n_actions`` wide, pair index ``s * n_actions + a``):
    pairs of different actions are orthogonal, pairs of one action compare as their states do."""
    *batch, s, d = state_features.shape
    eye = torch.eye(n_actions, dtype=state_features.dtype)
    return torch.einsum("...sd,ab->...sabd", state_features, eye).reshape(*batch, s * n_actions, n_actions * d)


def split_pairs(pairs: Int[Tensor, "..."], n_actions: int) -> tuple[Int[Tensor, "..."], Int[Tensor, "..."]]:
    """Pair indices back to ``(states, actions)``."""
    return pairs // n_actions, pairs % n_actions
