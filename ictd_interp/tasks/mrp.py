"""Finite Markov reward processes (docs/theory.md §1): the tasks the transformer evaluates in context.

An :class:`MRP` may carry leading batch dimensions (``P [..., s, s]``) so that one object holds
the thousands of random tasks a training batch draws; every method is batched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ictd_interp.config.fields import check_gamma
from ictd_interp.tasks._types import ArrayLike, as_tensor, tensor_fields

STOCHASTIC_TOL = 1e-8


@dataclass(frozen=True)
class MRP:
    """A finite MRP, or a batch of them sharing ``gamma``.

    Args:
        P: row-stochastic transition matrix ``[..., s, s]``.
        r: reward received on leaving each state ``[..., s]`` (``R_{t+1} = r(S_t)``).
        mu0: initial state distribution ``[..., s]``.
        gamma: discount factor in ``[0, 1)``.
    """

    P: ArrayLike
    r: ArrayLike
    mu0: ArrayLike
    gamma: float

    def __post_init__(self) -> None:
        tensor_fields(self, "P", "r", "mu0")
        _validate(self)

    @classmethod
    def generated(cls, P: Tensor, r: Tensor, mu0: Tensor, gamma: float) -> "MRP":
        """An MRP from one of this package's generators, whose construction already guarantees what
        ``__post_init__`` checks (float64 tensors, row-stochastic ``P``, a distribution ``mu0``, finite
        entries): built without re-checking them (the checks were ~40 % of drawing a training batch's
        Boyan chains). ``gamma`` is still checked; it comes from the caller."""
        mrp = object.__new__(cls)
        for name, value in (("P", P), ("r", r), ("mu0", mu0), ("gamma", check_gamma(gamma))):
            object.__setattr__(mrp, name, value)
        return mrp

    @property
    def n_states(self) -> int:
        return self.P.shape[-1]

    @property
    def batch_shape(self) -> torch.Size:
        return self.P.shape[:-2]

    @property
    def v_pi(self) -> Float[Tensor, "... state"]:
        """True value ``(I - gamma P)^{-1} r``."""
        eye = torch.eye(self.n_states, dtype=self.P.dtype, device=self.P.device)
        return torch.linalg.solve(eye - self.gamma * self.P, self.r.unsqueeze(-1)).squeeze(-1)

    @property
    def mu_pi(self) -> Float[Tensor, "... state"]:
        """Stationary distribution: ``mu (I - P) = 0`` with one equation swapped for ``sum mu = 1``.

        It is unique iff the chain has exactly one closed communicating class (decided from the
        transition graph first, never from whether a solver happens to fail on this CPU)."""
        unique = self.has_unique_stationary
        if not bool(unique.all()):
            task = int((~unique).flatten().nonzero()[0, 0])
            P = self.P.reshape(-1, self.n_states, self.n_states)[task]
            where = f" (task {task} of the batch)" if self.batch_shape.numel() > 1 else ""
            raise ValueError(f"P: the stationary distribution is not unique{where}: {describe_classes(P)}")
        s = self.n_states
        system = (torch.eye(s, dtype=self.P.dtype) - self.P).transpose(-1, -2).clone()
        system[..., -1, :] = 1.0
        rhs = torch.zeros(*self.batch_shape, s, 1, dtype=self.P.dtype)
        rhs[..., -1, 0] = 1.0
        mu = torch.linalg.solve(system, rhs).squeeze(-1).clamp_min(0.0)  # round-off can dip below 0
        return mu / mu.sum(-1, keepdim=True)

    @property
    def has_unique_stationary(self) -> Bool[Tensor, "..."]:
        """Per task: exactly one closed communicating class (``v_pi`` is unique for any ``gamma < 1``)."""
        return closed_class_count(self.P) == 1

    def __getitem__(self, index) -> "MRP":
        """Select tasks of a batched MRP."""
        return MRP(self.P[index], self.r[index], self.mu0[index], self.gamma)

    def to(self, device: torch.device | str) -> "MRP":
        return MRP(self.P.to(device), self.r.to(device), self.mu0.to(device), self.gamma)


def reachability(P: Float[Tensor, "... s s"]) -> Bool[Tensor, "... s s"]:
    """``R[i, j]``: state ``j`` can be reached from ``i`` in zero or more steps (transitive closure of
    the graph with an edge wherever ``P > 0``, by repeated squaring: ``log2 s`` boolean products)."""
    s = P.shape[-1]
    reach = (P > 0) | torch.eye(s, dtype=torch.bool)
    for _ in range(max(1, (s - 1).bit_length())):
        reach = reach | (reach.double() @ reach.double() > 0)
    return reach


def closed_class_count(P: Float[Tensor, "... s s"]) -> Int[Tensor, "..."]:
    """The number of closed communicating classes per chain. A state is recurrent iff every state it
    reaches reaches it back; each closed class is counted once as the sum of ``1 / |class|`` over its
    members."""
    reach = reachability(P)
    mutual = reach & reach.transpose(-1, -2)
    recurrent = (reach <= mutual).all(-1)  # reach implies reached-back
    sizes = mutual.sum(-1).double()
    return torch.round((recurrent.double() / sizes).sum(-1)).long()


def communicating_classes(P: Float[Tensor, "s s"]) -> tuple[list[list[int]], list[int]]:
    """``(closed classes, transient states)`` of one chain: the closed communicating classes (each a
    sorted list of states, an absorbing state being a class of one) and the states that leave for good."""
    reach = reachability(P)
    mutual = reach & reach.T
    recurrent = (reach <= mutual).all(-1)
    classes = {tuple(mutual[i].nonzero().flatten().tolist()) for i in range(P.shape[-1]) if recurrent[i]}
    return sorted(list(c) for c in classes), (~recurrent).nonzero().flatten().tolist()


def describe_classes(P: Float[Tensor, "s s"], most: int = 6) -> str:
    """The chain's closed classes and absorbing states, in words, for error messages."""
    closed, transient = communicating_classes(P)
    absorbing = [c[0] for c in closed if len(c) == 1]
    shown = "; ".join(str(c) for c in closed[:most]) + (
        f"; ... ({len(closed) - most} more)" if len(closed) > most else ""
    )
    return (
        f"{len(closed)} closed communicating classes ({shown}), absorbing states {absorbing or 'none'}, "
        f"{len(transient)} transient states"
    )


def _validate(mrp: MRP) -> None:
    P, r, mu0 = mrp.P, mrp.r, mrp.mu0
    if P.ndim < 2 or P.shape[-1] != P.shape[-2]:
        raise ValueError(f"P: must be square [..., s, s], got shape {tuple(P.shape)}")
    s, batch = P.shape[-1], tuple(P.shape[:-2])
    for name, t in (("r", r), ("mu0", mu0)):
        if tuple(t.shape) != batch + (s,):
            raise ValueError(f"{name}: expected shape {batch + (s,)} to match P, got {tuple(t.shape)}")
    for name, t in (("P", P), ("r", r), ("mu0", mu0)):
        if not torch.isfinite(t).all():
            raise ValueError(f"{name}: contains NaN or infinite entries")
    if (P < 0).any():
        raise ValueError("P: has negative entries (rows must be probability distributions)")
    worst = (P.sum(-1) - 1).abs().max().item()
    if worst > STOCHASTIC_TOL:
        raise ValueError(f"P: rows must sum to 1 (row-stochastic), worst deviation {worst:.3g}")
    if (mu0 < 0).any() or (mu0.sum(-1) - 1).abs().max().item() > STOCHASTIC_TOL:
        raise ValueError("mu0: must be a probability distribution (non-negative, summing to 1)")
    object.__setattr__(mrp, "gamma", check_gamma(mrp.gamma))


def _affine(u: Tensor, low: float, high: float) -> Tensor:
    """``low + (high - low) u``, in place on ``u``."""
    return u.mul_(high - low).add_(low)


def resolve_generator(seed: Optional[int], generator: Optional[torch.Generator]) -> torch.Generator:
    """One seeded source of randomness: an explicit generator wins, else a fresh one from ``seed``."""
    if generator is not None:
        return generator
    gen = torch.Generator()
    gen.manual_seed(int(seed) if seed is not None else torch.seed())
    return gen


def boyan_chains(
    batch: int,
    n_states: int,
    gamma: float = 0.9,
    generator: Optional[torch.Generator] = None,
    *,
    seed: Optional[int] = None,
    representable: bool = False,
    features: Optional[Float[Tensor, "batch state d_feat"]] = None,
) -> MRP:
    """``batch`` randomized Boyan chains (docs/theory.md §1), drawn in one vectorised pass.

    Rows ``i < s-2`` step one or two states ahead, row ``s-2`` steps to ``s-1``, and the last row
    restarts at random, which makes every chain ergodic. ``representable=True`` replaces the random
    reward by ``r = (I - gamma P) X w`` so that ``v_pi = X w`` lies in the span of ``features``.
    """
    if n_states < 2:
        raise ValueError(f"n_states: a Boyan chain needs at least 2 states, got {n_states}")
    gen = resolve_generator(seed, generator)
    mrp = boyan_from_uniforms(*boyan_uniforms(gen, batch, n_states), gamma)
    if representable:  # the reward comes from the caller's features: check the MRP as any other
        return MRP(mrp.P, _representable_reward(mrp.P, gamma, features, gen), mrp.mu0, gamma)
    return mrp


BoyanUniforms = tuple[Tensor, Tensor, Tensor, Tensor]


def boyan_uniforms(generator: torch.Generator, batch: int, n_states: int) -> BoyanUniforms:
    """The ``U(0, 1)`` draws of ``batch`` Boyan chains, in the order drawn: forward probabilities
    ``[batch, s-2]``, the last row's weights, ``mu0``'s weights and the rewards (``[batch, s]`` each)."""
    draw = lambda *shape: torch.rand(*shape, generator=generator, dtype=torch.float64)  # noqa: E731
    return draw(batch, n_states - 2), draw(batch, n_states), draw(batch, n_states), draw(batch, n_states)


def boyan_from_uniforms(p: Tensor, last: Tensor, mu0: Tensor, r: Tensor, gamma: float) -> MRP:
    """Boyan chains from their draws (``boyan_uniforms``; consumed in place): row-wise, so chains built
    from concatenated draws are those built from each part. ``p ~ U(0.01, 0.99)``, the last row and
    ``mu0`` ``U(0.01, 0.99)`` weights normalised, ``r ~ U(-1, 1)``."""
    batch, s = last.shape
    P = torch.zeros(batch, s, s, dtype=torch.float64, device=last.device)
    p = _affine(p, 0.01, 0.99)
    P.diagonal(1, -2, -1)[:, : s - 2] = p  # P[i, i+1] = p_i, P[i, i+2] = 1 - p_i for i < s - 2
    P.diagonal(2, -2, -1).copy_(1 - p)
    P[:, s - 2, s - 1] = 1.0
    last = _affine(last, 0.01, 0.99)
    P[:, s - 1] = last / last.sum(-1, keepdim=True)
    mu0 = _affine(mu0, 0.01, 0.99)
    return MRP.generated(P, _affine(r, -1.0, 1.0), mu0 / mu0.sum(-1, keepdim=True), gamma)


def _representable_reward(P: Tensor, gamma: float, features: Optional[Tensor], gen: torch.Generator) -> Tensor:
    if features is None:
        raise ValueError("features: representable=True needs the feature matrix X to build v = X w")
    X = as_tensor(features, "features").expand(P.shape[0], -1, -1)
    if X.shape[1] != P.shape[-1]:
        raise ValueError(f"features: expected {P.shape[-1]} rows (one per state), got {X.shape[1]}")
    w = torch.randn(P.shape[0], X.shape[-1], 1, generator=gen, dtype=torch.float64)
    v = (X @ w).squeeze(-1)
    return v - gamma * (P @ v.unsqueeze(-1)).squeeze(-1)


def boyan_chain(
    n_states: int,
    gamma: float = 0.9,
    *,
    seed: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
    representable: bool = False,
    features: Optional[Float[Tensor, "state d_feat"]] = None,
) -> MRP:
    """One randomized Boyan chain; the same draw as ``boyan_chains(1, ...)[0]``."""
    feats = None if features is None else as_tensor(features, "features").unsqueeze(0)
    gen = resolve_generator(seed, generator)
    return boyan_chains(1, n_states, gamma, gen, representable=representable, features=feats)[0]
