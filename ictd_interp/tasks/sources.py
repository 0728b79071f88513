"""MRP families beyond Boyan chains, for out-of-distribution probing (random, loop, Gymnasium).

Each returns an :class:`MRP` (batched when ``batch`` is given) so everything downstream — tasks,
prompts, models, analyses — works unchanged.
"""

from __future__ import annotations

import difflib
from typing import Optional, Union

import numpy as np
import torch

from ictd_interp.tasks.mdp import MDP
from ictd_interp.tasks.mrp import MRP, resolve_generator


def _finish(weights: torch.Tensor, gamma: float, gen: torch.Generator) -> MRP:
    """Normalise rows, draw ``r ~ U(-1, 1)`` and ``mu0 ~ U(0.01, 0.99)`` (normalised), as for Boyan chains."""
    batch, s = weights.shape[0], weights.shape[-1]
    P = weights / weights.sum(-1, keepdim=True)
    r = 2 * torch.rand(batch, s, generator=gen, dtype=torch.float64) - 1
    mu0 = 0.01 + 0.98 * torch.rand(batch, s, generator=gen, dtype=torch.float64)
    return MRP(P, r, mu0 / mu0.sum(-1, keepdim=True), gamma)


def _ring(batch: int, s: int) -> torch.Tensor:
    ring = torch.zeros(batch, s, s, dtype=torch.float64)
    ring[:, torch.arange(s), (torch.arange(s) + 1) % s] = 1.0
    return ring


def random_mrps(
    batch: int,
    n_states: int,
    gamma: float = 0.9,
    *,
    density: float = 1.0,
    seed: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
) -> MRP:
    """Random ergodic MRPs: ``U(0, 1)`` weights on a random support of the given density, plus a ring
    ``i -> i+1`` and a self-loop at state 0 so every chain is irreducible and aperiodic."""
    if not 0.0 < density <= 1.0:
        raise ValueError(f"density: must be in (0, 1], got {density}")
    gen = resolve_generator(seed, generator)
    weights = torch.rand(batch, n_states, n_states, generator=gen, dtype=torch.float64)
    support = torch.rand(batch, n_states, n_states, generator=gen, dtype=torch.float64) < density
    weights = weights * support + 0.5 * _ring(batch, n_states)
    weights[:, 0, 0] += 0.5
    return _finish(weights, gamma, gen)


def loop_mrps(
    batch: int,
    n_states: int,
    gamma: float = 0.9,
    *,
    n_edges: int = 2,
    seed: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
) -> MRP:
    """The predecessor's "loop" family: a ring ``i -> i+1`` plus ``n_edges`` random extra edges per
    state, all with ``U(0.01, 0.99)`` weights."""
    gen = resolve_generator(seed, generator)
    ring = _ring(batch, n_states) * (0.01 + 0.98 * torch.rand(batch, n_states, 1, generator=gen, dtype=torch.float64))
    targets = torch.randint(0, n_states, (batch, n_states, n_edges), generator=gen)
    extra = torch.zeros(batch, n_states, n_states, dtype=torch.float64)
    extra.scatter_add_(
        2, targets, 0.01 + 0.98 * torch.rand(batch, n_states, n_edges, generator=gen, dtype=torch.float64)
    )
    return _finish(ring + extra, gamma, gen)


def mdp_from_gymnasium(env_id_or_env, gamma: float = 0.9, terminal: str = "absorbing") -> MDP:
    """The MDP of a Gymnasium toy-text environment (``env.unwrapped.P``): ``r(s, a) = Σ p · reward`` is the
    expected reward of taking ``a`` in ``s``. Transitions flagged ``terminated`` are handled by ``terminal``:

    * ``"absorbing"``: the episode ends; their destination becomes an absorbing state with reward 0 (every
      action), so values are the usual episodic ones (terminal value 0).
    * ``"restart"``: the episode restarts; their probability mass goes to the initial distribution, which makes
      the chain ergodic under any policy that reaches a terminal (needed for ``mu_pi`` and the Assumption 5.1
      margin).
    """
    env = _make(env_id_or_env)
    table, s, a = env.P, int(env.observation_space.n), int(env.action_space.n)
    mu0 = np.asarray(getattr(env, "initial_state_distrib", np.full(s, 1.0 / s)), dtype=float)
    if terminal not in ("absorbing", "restart"):
        raise ValueError(f"terminal: must be 'absorbing' or 'restart', got {terminal!r}")
    P, r, ends = np.zeros((s, a, s)), np.zeros((s, a)), set()
    for state in range(s):
        for action in range(a):
            for prob, nxt, reward, done in table[state][action]:
                r[state, action] += prob * reward
                if done and terminal == "restart":
                    P[state, action] += prob * mu0
                else:
                    P[state, action, int(nxt)] += prob
                    ends.update([int(nxt)] if done else [])
    for end in ends:
        P[end], r[end] = np.eye(s)[end], 0.0
    return MDP(P, r, mu0, gamma)


def from_gymnasium(
    env_id_or_env, policy: Union[str, np.ndarray] = "uniform", gamma: float = 0.9, terminal: str = "absorbing"
) -> MRP:
    """The MRP a fixed policy induces on a Gymnasium toy-text environment: ``mdp_from_gymnasium``'s MDP under
    ``policy`` (``"uniform"`` or a row-stochastic array ``pi [n_states, n_actions]``), ``r(s)`` the expected reward
    on leaving ``s``."""
    mdp = mdp_from_gymnasium(env_id_or_env, gamma, terminal)
    return mdp.state_mrp(_policy(policy, mdp.n_states, mdp.n_actions))


def _make(env_id_or_env):
    try:
        import gymnasium
    except ImportError:
        raise ImportError("from_gymnasium needs Gymnasium: pip install 'ictd-interp[gym]'") from None
    if isinstance(env_id_or_env, str) and env_id_or_env not in gymnasium.envs.registry:
        close = difflib.get_close_matches(env_id_or_env, list(gymnasium.envs.registry), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"gym:{env_id_or_env}: no such Gymnasium environment{hint} (toy-text environments with a "
            "transition table work, e.g. FrozenLake-v1, CliffWalking-v1)"
        )
    env = gymnasium.make(env_id_or_env) if isinstance(env_id_or_env, str) else env_id_or_env
    env = env.unwrapped
    if not hasattr(env, "P"):
        raise ValueError(f"{env}: has no transition table env.unwrapped.P (only toy-text environments do)")
    return env


def _policy(policy, s: int, a: int) -> np.ndarray:
    if isinstance(policy, str):
        if policy != "uniform":
            raise ValueError(f"policy: must be 'uniform' or an array [n_states, n_actions], got {policy!r}")
        return np.full((s, a), 1.0 / a)
    pi = np.asarray(policy, dtype=float)
    if pi.shape != (s, a) or (pi < 0).any() or not np.allclose(pi.sum(-1), 1.0):
        raise ValueError(f"policy: expected a row-stochastic array of shape {(s, a)}, got shape {pi.shape}")
    return pi
