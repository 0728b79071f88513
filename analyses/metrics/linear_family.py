"""Where a linear model sits in the predecessor's family (docs/theory.md §13): its weights' cosines with the
TD(0) construction (the quantity the predecessor's paper plots), the family member its weights identify
(step, preconditioner ``C``, effective discount, TD or residual-gradient direction), how much of the
weights and of the function that member explains, and whether its update converges when iterated.

The family, one layer: ``P = p e e^T`` (``e`` the last row) and ``Q``'s top-left ``2d x 2d`` block
``-[1; -rho] [1, -kappa] (x) C^T``, i.e. ``[[-C^T, kappa C^T], [rho C^T, -rho kappa C^T]]``: the update
``w <- w + (1/n) p C sum_i delta_i (phi_i - rho gamma phi'_i)`` with ``delta_i = R_{i+1} + kappa gamma
w^T phi'_i - w^T phi_i``. TD(0) is ``rho = 0, kappa = 1``; residual gradient ``rho = kappa = 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ictd_interp.analyses.metrics.intervals import Interval, proportion_interval
from ictd_interp.models.linear.model import HookedLinearICTD
from ictd_interp.models.linear.td import LinearConstruction, linear_model, td0
from ictd_interp.reference.metrics import cosine
from ictd_interp.tasks.sampling import TaskBatch

IN_FAMILY = 0.9  # a layer is in the family when the fit explains at least this share of both P and Q


@dataclass(kw_only=True)  # fields in summary.json's order
class FamilyReading:
    """One (unique) layer's closest family member (``closest_member``): cosines with TD(0)'s ``(P, Q)``, the
    member's step ``p tr(C)/d``, ``kappa`` (discount share), ``rg_share`` (``rho``: 0 TD(0), 1 residual gradient),
    how far its preconditioner is from a multiple of the identity, and the share of ``P`` and ``Q`` it explains."""

    layer: int = 0
    cos_P_td0: float
    cos_Q_td0: float
    step: float
    kappa: float
    effective_discount: float
    rg_share: float
    preconditioner_off_identity: float
    P_explained: float
    Q_explained: float
    in_family: bool


@dataclass(kw_only=True)
class FamilyIteration:
    """``convergence``: on how many evaluation contexts the (last) identified layer's update converges when
    iterated (``share``: Wilson 95%), on how many it is neutral, and the median spectral radius."""

    layer: int
    tasks: int
    converging: int
    neutral: int
    neutral_tolerance: float
    share: Interval
    median_radius: float


def closest_member(P: Tensor, Q: Tensor, d: int, gamma: float, symmetric: bool = True, layer: int = 0) -> FamilyReading:
    """The family member closest to one layer's ``(P, Q)`` (least squares on each block, ``C`` from
    ``Q``'s top-left block), with the share of each matrix it explains and the cosines with TD(0)'s. With the
    identity activation (``symmetric``) the layer is unchanged by ``(P, Q) -> (-P, -Q)``, and the cosines are
    taken on the sign that makes ``P``'s last entry non-negative (a reading of what the layer computes); with
    ReLU a flip changes the layer, so the weights are read as they are."""
    P, Q = P.double(), Q.double()
    reference, sign = td0(d), (1.0 if P[-1, -1] >= 0 or not symmetric else -1.0)
    B11, B12, B21 = Q[:d, :d], Q[:d, d : 2 * d], Q[d : 2 * d, :d]
    energy = float(B11.pow(2).sum())
    kappa = float(-(B12 * B11).sum() / energy) if energy > 0 else float("nan")
    rho = float(-(B21 * B11).sum() / energy) if energy > 0 else float("nan")
    p = float(P[-1, -1])
    member = member_weights(p, -B11.T, kappa, rho, d)
    C_eff = p * -B11.T
    step = float(torch.trace(C_eff) / d)
    off = (
        float((C_eff - step * torch.eye(d, dtype=C_eff.dtype)).norm() / C_eff.norm())
        if C_eff.norm() > 0
        else float("nan")
    )
    P_explained, Q_explained = _explained(P, member.P), _explained(Q, member.Q)
    return FamilyReading(
        layer=layer,
        cos_P_td0=cosine(sign * P, reference.P),
        cos_Q_td0=cosine(sign * Q, reference.Q),
        step=step,
        kappa=kappa,
        effective_discount=gamma * kappa,
        rg_share=rho,
        preconditioner_off_identity=off,
        P_explained=P_explained,
        Q_explained=Q_explained,
        in_family=P_explained >= IN_FAMILY and Q_explained >= IN_FAMILY,
    )


def member_weights(p: float, C: Tensor, kappa: float, rho: float, d: int) -> LinearConstruction:
    """One family member's ``(P, Q)``."""
    base = td0(d, C)
    Q = torch.zeros_like(base.Q)
    Q[:d, :d], Q[:d, d : 2 * d] = -C.T, kappa * C.T
    Q[d : 2 * d, :d], Q[d : 2 * d, d : 2 * d] = rho * C.T, -rho * kappa * C.T
    return LinearConstruction("family member", p * base.P, Q)


def _explained(W: Tensor, fit: Tensor) -> float:
    total = float(W.pow(2).sum())
    return 1.0 - float((W - fit).pow(2).sum()) / total if total > 0 else float("nan")


def identify(model: HookedLinearICTD) -> list[FamilyReading]:
    """``closest_member`` for every layer (one row for tied weights, said so by ``layer``)."""
    cfg = model.cfg
    return [
        closest_member(a.P.detach(), a.Q.detach(), cfg.d_features, cfg.gamma, cfg.activation == "identity", l)
        for l, a in enumerate(model.unique_attention())
    ]


def identified_model(model: HookedLinearICTD) -> HookedLinearICTD:
    """The family members the layers identify, as a model (same depth, ties and source mixing)."""
    cfg, d = model.cfg, model.cfg.d_features
    layers = []
    for a in model.unique_attention():
        P, Q = a.P.detach().double(), a.Q.detach().double()
        row = closest_member(P, Q, d, cfg.gamma)
        member = member_weights(float(P[-1, -1]), -Q[:d, :d].T, row.kappa, row.rg_share, d)
        layers.append(LinearConstruction(member.name, member.P, member.Q, cfg.trace_decay))
    return linear_model(layers * cfg.n_layers if cfg.tied else layers, gamma=cfg.gamma)


def td0_model(model: HookedLinearICTD) -> HookedLinearICTD:
    """The TD(0) construction (``C = I``) at the model's depth: the predecessor's yardstick."""
    return linear_model([td0(model.cfg.d_features)] * model.cfg.n_layers, gamma=model.cfg.gamma)


def iteration_radius(
    row: FamilyReading, P: Tensor, Q: Tensor, tasks: TaskBatch, gamma: float, movement: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """Per task, the spectral radius of the identified layer's map on ``w``: ``G = I - (p/n) C A`` with
    ``A = sum_i (phi_i - rho gamma phi'_i)(phi_i - kappa gamma phi'_i)^T``; the update converges when
    iterated on that context exactly when it is below 1. ``movement``: also ``||G - I||_2``, the most one
    application moves ``w`` relative to its size (how much the layer acts at all)."""
    d = tasks.x.shape[-1]
    x = tasks.x.double()
    phi, nxt = x[:, :-1], x[:, 1:]
    n = phi.shape[1]
    C = float(P[-1, -1]) * -Q.double()[:d, :d].T
    A = (phi - row.rg_share * gamma * nxt).transpose(1, 2) @ (phi - row.kappa * gamma * nxt)
    G = torch.eye(d, dtype=torch.float64) - C @ A / n
    radius = torch.linalg.eigvals(G).abs().amax(-1)
    return (radius, torch.linalg.matrix_norm(C @ A / n, ord=2)) if movement else radius


# A layer whose map moves w by at most 1% of its size per application barely acts (a near-untrained one:
# ||G - I|| ~ 1e-3, its radius 1 +- 1e-3, on either side by chance): it is reported as neutral, not as
# converging or diverging. (A slow but real contraction, TD(0) at radius 0.995, moves w far more.)
NEUTRAL_MOVEMENT = 1e-2


def convergence(model: HookedLinearICTD, rows: list[FamilyReading], tasks: TaskBatch) -> FamilyIteration:
    """Share of tasks on which the (last) identified layer's update converges when iterated (radius below
    1 on a task where the layer acts), with its Wilson interval; the tasks where it is neutral (its map moves
    ``w`` by at most ``NEUTRAL_MOVEMENT`` of its size: ``||G - I||_2 <= NEUTRAL_MOVEMENT``); the median radius."""
    attn = model.unique_attention()[-1]
    radius, moves = iteration_radius(rows[-1], attn.P.detach(), attn.Q.detach(), tasks, model.cfg.gamma, movement=True)
    neutral = moves <= NEUTRAL_MOVEMENT
    converging = int(((radius < 1) & ~neutral).sum())
    return FamilyIteration(
        layer=rows[-1].layer,
        tasks=len(radius),
        converging=converging,
        neutral=int(neutral.sum()),
        neutral_tolerance=NEUTRAL_MOVEMENT,
        share=proportion_interval(converging, len(radius)),
        median_radius=float(radius.median()),
    )
