"""Reference algorithms of docs/theory.md §2: softmax-weighted TD and its linear and tabular limits.

All three iterate the same synchronous update on the trajectory's positions,

    v_{t+1}(S_j) = v_t(S_j) + alpha * sum_k delta_k^(t) K(S_{k-1}, S_j),
    delta_k^(t)  = R_k + gamma v_t(S_k) - v_t(S_{k-1}),

and differ only in the kernel ``K [source k-1, target j]``, which does not depend on ``v`` and is
computed once.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from einops import einsum
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ictd_interp.config.fields import check_gamma

Kernel = Float[Tensor, "batch key_pos query_pos"]
# Public functions take ``x [batch, n+1, d]`` and ``rewards [batch, n]`` as plain tensors and validate
# them, so that bad input gets a ValueError naming it rather than a type-checker trace.


def feature_scores(x: Float[Tensor, "batch pos d_feat"]) -> Float[Tensor, "batch key_pos query_pos"]:
    """``g(S_j, S_i) = <x(S_i), x(S_j)>`` for sources ``i < n`` and every target ``j``."""
    return einsum(x[:, :-1], x, "batch key d, batch query d -> batch key query")


def softmax_kernel(x: Float[Tensor, "batch pos d_feat"]) -> Kernel:
    """Softmax over sources; ``torch.softmax`` subtracts the max, so scores of 1e3 do not overflow."""
    return torch.softmax(feature_scores(x), dim=1)


def linear_kernel(x: Float[Tensor, "batch pos d_feat"]) -> Kernel:
    """Identity in place of ``exp`` and ``1/n`` in place of the normaliser: batch linear TD(0)."""
    return feature_scores(x) / (x.shape[1] - 1)


def hardmax_kernel(x: Float[Tensor, "batch pos d_feat"], rel_tol: float = 1e-9) -> Kernel:
    """The ``beta -> inf`` limit of the softmax kernel of features ``beta * x``: uniform over the
    sources of maximal score. For one-hot features these are the sources in the target's own state,
    and a target whose state never appears as a source sees all scores equal (plain mean over k)."""
    scores = feature_scores(x)
    top = scores.amax(dim=1, keepdim=True)
    hits = (scores >= top - rel_tol * top.abs().clamp_min(1.0)).to(x.dtype)
    return hits / hits.sum(dim=1, keepdim=True)


def same_state(states: Int[Tensor, "batch pos"]) -> Bool[Tensor, "batch key_pos query_pos"]:
    """Whether source ``i < n`` is in target ``j``'s state: the one definition of "same state"."""
    return states[:, :-1, None] == states[:, None, :]


def same_state_kernel(states: Int[Tensor, "batch pos"]) -> Kernel:
    """The tabular kernel by state identity: even weight on the sources ``i < n`` in the target's own
    state (the ``beta -> inf`` limit for one-hot features, whatever the features are); a target whose
    state no source visits spreads evenly over all sources."""
    same = same_state(states).double()
    same = torch.where(same.sum(1, keepdim=True) > 0, same, torch.ones_like(same))
    return same / same.sum(1, keepdim=True)


def td_errors(
    values: Float[Tensor, "batch pos"], rewards: Float[Tensor, "batch key_pos"], gamma: float
) -> Float[Tensor, "batch key_pos"]:
    """``delta_k = R_k + gamma v(S_k) - v(S_{k-1})`` for the ``n`` transitions of the context."""
    return rewards + gamma * values[:, 1:] - values[:, :-1]


def _iterate(
    kernel_fn: Callable[[Tensor], Tensor],
    x: Tensor,  # [batch, n+1, d], validated below
    rewards: Tensor,
    gamma: float,
    n_iters: int,
    alpha: float,
) -> Float[Tensor, "batch iter pos"]:
    _check_inputs(x, rewards, gamma, n_iters)
    kernel = kernel_fn(x)
    values = [torch.zeros(x.shape[:2], dtype=x.dtype, device=x.device)]
    for _ in range(n_iters):
        delta = td_errors(values[-1], rewards, gamma)
        values.append(values[-1] + alpha * einsum(delta, kernel, "batch key, batch key query -> batch query"))
    return torch.stack(values, dim=1)


def _check_inputs(x: Tensor, rewards: Tensor, gamma: float, n_iters: int) -> None:
    if x.ndim != 3 or x.shape[1] < 2:
        raise ValueError(f"x: expected [batch, n+1, d] with n >= 1, got shape {tuple(x.shape)}")
    if tuple(rewards.shape) != (x.shape[0], x.shape[1] - 1):
        raise ValueError(
            f"rewards: expected shape {(x.shape[0], x.shape[1] - 1)} for x {tuple(x.shape)}, got {tuple(rewards.shape)}"
        )
    check_gamma(gamma)
    if n_iters < 0:
        raise ValueError(f"n_iters: must be >= 0, got {n_iters}")


def softmax_td(
    x: Tensor, rewards: Tensor, gamma: float, n_iters: int, alpha: float = 1.0
) -> Float[Tensor, "batch iter pos"]:
    """Softmax-weighted TD: every iterate ``v_0 = 0, v_1, ..., v_{n_iters}`` on ``S_0..S_n``."""
    return _iterate(softmax_kernel, x, rewards, gamma, n_iters, alpha)


def linear_td(
    x: Tensor, rewards: Tensor, gamma: float, n_iters: int, alpha: float = 1.0
) -> Float[Tensor, "batch iter pos"]:
    """Batch linear TD(0) in function space: ``w += (alpha/n) sum_k delta_k x(S_{k-1})``, ``v = <w, x>``."""
    return _iterate(linear_kernel, x, rewards, gamma, n_iters, alpha)


def tabular_td(
    x: Tensor, rewards: Tensor, gamma: float, n_iters: int, alpha: float = 1.0
) -> Float[Tensor, "batch iter pos"]:
    """Certainty-equivalence tabular TD: each position moves by the mean TD error of the
    transitions leaving its own state (one-hot features), the ``beta -> inf`` limit of softmax TD."""
    return _iterate(hardmax_kernel, x, rewards, gamma, n_iters, alpha)
