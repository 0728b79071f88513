"""Reference algorithms of the predecessor's constructions (docs/theory.md §13), written as the
textbook loops over transitions, independent of any transformer: linear batch TD(0) and TD(lambda)
with a preconditioner ``C``, residual gradient and average-reward TD.

Each takes one trajectory: features ``x [n+1, d]`` of ``S_0 .. S_n`` and rewards ``r [n]`` (``R_{k+1}``
of transition ``k``), a preconditioner per layer, and returns the weights ``w_l`` after each of the
``L`` updates ``[L, d]``, starting from ``w_0 = 0``. Transition ``k`` is ``(S_k, R_{k+1}, S_{k+1})``; the
value of a state is ``w^T phi``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor


def _run(x: Tensor, r: Tensor, Cs: Sequence[Tensor], update) -> Float[Tensor, "layer d"]:
    x, r = x.double(), r.double()
    if x.ndim != 2 or r.shape != (x.shape[0] - 1,):
        raise ValueError(f"x [n+1, d] and r [n] expected, got {tuple(x.shape)} and {tuple(r.shape)}")
    w, out = torch.zeros(x.shape[1], dtype=torch.float64), []
    n = r.shape[0]
    for C in Cs:
        u = update(w, x, r)
        w = w + C.double() @ u / n
        out.append(w)
    return torch.stack(out)


def batch_td(x: Tensor, r: Tensor, gamma: float, Cs: Sequence[Tensor], lam: float = 0.0) -> Float[Tensor, "layer d"]:
    """``u = sum_k delta_k e_k``, ``delta_k = R_{k+1} + gamma w^T phi_{k+1} - w^T phi_k``, eligibility
    trace ``e_k = lam e_{k-1} + phi_k``; ``w <- w + C u / n``."""

    def update(w, x, r):
        u, e = torch.zeros_like(w), torch.zeros_like(w)
        for k in range(r.shape[0]):
            delta = r[k] + gamma * w @ x[k + 1] - w @ x[k]
            e = lam * e + x[k]
            u = u + delta * e
        return u

    return _run(x, r, Cs, update)


def residual_gradient(x: Tensor, r: Tensor, gamma: float, Cs: Sequence[Tensor]) -> Float[Tensor, "layer d"]:
    """``u = sum_k delta_k (phi_k - gamma phi_{k+1})``: minus half the gradient of the summed squared TD error."""

    def update(w, x, r):
        u = torch.zeros_like(w)
        for k in range(r.shape[0]):
            delta = r[k] + gamma * w @ x[k + 1] - w @ x[k]
            u = u + delta * (x[k] - gamma * x[k + 1])
        return u

    return _run(x, r, Cs, update)


def average_reward_td(x: Tensor, r: Tensor, Cs: Sequence[Tensor]) -> Float[Tensor, "layer d"]:
    """Differential TD: ``delta_k = R_{k+1} - rbar_k + w^T phi_{k+1} - w^T phi_k`` with ``rbar_k`` the mean
    of ``R_1 .. R_{k+1}``; ``u = sum_k delta_k phi_k``."""

    def update(w, x, r):
        u, total = torch.zeros_like(w), 0.0
        for k in range(r.shape[0]):
            total += r[k]
            delta = r[k] - total / (k + 1) + w @ x[k + 1] - w @ x[k]
            u = u + delta * x[k]
        return u

    return _run(x, r, Cs, update)
