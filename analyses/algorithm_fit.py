"""Which TD algorithm does layer ``l`` run? Fit softmax-weighted TD with free ``(alpha, beta, gamma)``.

Per layer, the observed update is ``dv = v_out - v_in`` of the current row on evaluation prompts.
The family is ``dv_j = alpha sum_k K_beta(S_{k-1}, S_j) (R_k - v_in(S_{k-1})) + alpha gamma sum_k
K_beta(S_{k-1}, S_j) v_in(S_k)`` with ``K_beta = softmax_k(beta <x_{k-1}, x_j>)``. For a fixed ``beta``
it is linear in ``(alpha, alpha gamma)``, so ``beta`` is searched (log grid, then golden section)
and the other two solved by least squares. theta* gives ``(1, 1, gamma)`` with all variance explained.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from einops import einsum
from torch import Tensor

from ictd_interp import HookedICTDTransformer
from ictd_interp.td import feature_scores
from ictd_interp.tasks import TaskBatch


def _regressors(beta: float, scores: Tensor, rewards: Tensor, v_in: Tensor) -> tuple[Tensor, Tensor]:
    kernel = torch.softmax(beta * scores, dim=1)  # [batch, source k-1, target j]
    own = einsum(rewards - v_in[:, :-1], kernel, "b k, b k j -> b j")
    boot = einsum(v_in[:, 1:], kernel, "b k, b k j -> b j")
    return own, boot


def _solve(beta: float, scores: Tensor, rewards: Tensor, v_in: Tensor, dv: Tensor) -> tuple[float, np.ndarray, bool]:
    own, boot = _regressors(beta, scores, rewards, v_in)
    boot_ok = bool(boot.abs().max() > 1e-12)  # v_in = 0 (first layer): gamma is not identifiable
    design = torch.stack([own.flatten(), boot.flatten()] if boot_ok else [own.flatten()], dim=1).numpy()
    coef, *_ = np.linalg.lstsq(design, dv.flatten().numpy(), rcond=None)
    residual = float(((design @ coef - dv.flatten().numpy()) ** 2).sum())
    return residual, coef, boot_ok


def _golden(f, lo: float, hi: float, iters: int = 30) -> float:
    ratio = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    for _ in range(iters):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        a, b = (a, d) if f(c) < f(d) else (c, b)
    return (a + b) / 2


@torch.no_grad()
def fit_layers(model: HookedICTDTransformer, tasks: TaskBatch) -> list[dict]:
    """Per layer: fitted ``alpha``, ``beta``, ``gamma`` (None when not identifiable) and the
    fraction of variance of the update explained."""
    device = next(model.parameters()).device
    _, cache = model.run_with_cache(tasks.prompt.to(device), names_filter=lambda n: "resid_p" in n)
    scores, rewards, cur = feature_scores(tasks.x), tasks.rewards, model.layout.current
    rows = []
    for layer in range(model.cfg.n_layers):
        v_in = cache["resid_pre", layer][..., cur].double().cpu()
        dv = cache["resid_post", layer][..., cur].double().cpu() - v_in
        loss = lambda log_beta, v_in=v_in, dv=dv: _solve(math.exp(log_beta), scores, rewards, v_in, dv)[0]  # noqa: E731
        grid = np.linspace(math.log(0.02), math.log(50.0), 30)
        start = grid[int(np.argmin([loss(g) for g in grid]))]
        log_beta = _golden(loss, start - 0.2, start + 0.2)
        residual, coef, boot_ok = _solve(math.exp(log_beta), scores, rewards, v_in, dv)
        total = float(((dv - dv.mean()) ** 2).sum())
        alpha = float(coef[0])
        rows.append({"layer": layer, "alpha": alpha, "beta": math.exp(log_beta),
                     "gamma": float(coef[1] / alpha) if boot_ok and alpha != 0 else None,
                     "fve": 1 - residual / total if total > 0 else float("nan")})
    return rows
