"""The predecessor's own readings of a linear model (InContextTD, Wang et al., ICLR 2025), computed as its
code defines them, so that "their metric" means their number (docs/theory.md §13).

Weights (their ``compare_P`` / ``compare_Q``, per layer): ``P[-1, -1]``; the mean absolute value of P's
other ``(2d+1)² - 1`` entries; the traces of Q's top-left and top-right ``d × d`` blocks; and their
"mean of the others" of Q, which is ``(sum |Q| - tr Q[:d, d:2d] - tr Q[:d, :d]) / ((2d+1)² - 2d)``, the
two traces subtracted *signed* as their code does (not the absolute diagonals).

Function (their ``implicit_weight_sim``, ``compare_sensitivity`` and the logged value difference), each on one
context against their "hard" batch-TD transformer (the TD(0) construction, ``C = I``, at the model's depth,
with step ``alpha``), with ``mu`` the MRP's stationary distribution and ``v(s)`` the prediction with
``phi(s)`` as the query on that context:

* IWS = cos(w_tf, w_td): ``w_tf = argmin_w sum_s mu(s) (phi(s)^T w - v_tf(s))²``, ``w_td`` the TD model's
  gradient with respect to the query's features (its prediction is linear in them);
* SS = ``sum_s mu(s) cos(d v_tf / d phi(s), d v_td / d phi(s))``;
* VD = ``sum_s mu(s) (v_tf(s) - v_td(s))²``.

At one layer IWS and SS do not depend on ``alpha > 0`` (the TD gradient scales with it); deeper, the TD
prediction is a polynomial in ``alpha`` and all three do. Their trainer logs one
context per step; here each is the mean over the evaluation tasks with a 95% t interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.analyses.metrics.intervals import Interval, t_interval
from ictd_interp.analyses.metrics.linear_family import td0_model
from ictd_interp.models import HookedLinearICTD
from ictd_interp.tasks.sampling import TaskBatch


@dataclass(frozen=True)
class WeightReadings:
    """Their ``compare_P`` and ``compare_Q`` of one layer (module docstring)."""

    P_bottom_right: float
    P_mean_abs_others: float
    Q_upper_left_trace: float
    Q_upper_right_trace: float
    Q_mean_abs_others: float


def weight_readings(P: Float[Tensor, "row col"], Q: Float[Tensor, "row col"], d: int) -> WeightReadings:
    """Their ``compare_P`` and ``compare_Q`` of one layer, on the weights as stored."""
    P, Q = P.detach().double(), Q.detach().double()
    size = (2 * d + 1) ** 2
    upper_left, upper_right = float(torch.trace(Q[:d, :d])), float(torch.trace(Q[:d, d : 2 * d]))
    return WeightReadings(
        float(P[-1, -1]),
        float((P.abs().sum() - P[-1, -1].abs()) / (size - 1)),
        upper_left,
        upper_right,
        float((Q.abs().sum() - upper_right - upper_left) / (size - 2 * d)),
    )


def state_values(
    model: HookedLinearICTD, tasks: TaskBatch, query_grad: bool = False
) -> tuple[Float[Tensor, "batch state"], Float[Tensor, "batch state d_feat"] | None]:
    """``v(s)`` for every state of each task's MRP, with ``phi(s)`` as the query on the task's context (their
    ``fit_value_func``: ``HookedLinearICTD.query_values``), and with ``query_grad`` each value's gradient with
    respect to its query's features."""
    phi = tasks.features.to(model.blocks[0].attn.P.dtype).clone().requires_grad_(query_grad)
    values = model.query_values(tasks.prompt, phi)
    if not query_grad:
        return values.detach(), None
    (grad,) = torch.autograd.grad(values.sum(), phi)  # column s's value depends on its own query only
    return values.detach(), grad


@dataclass(frozen=True)
class FunctionReadings:
    """IWS, SS and VD over tasks (means with 95% t intervals) against the TD(0) construction with step ``alpha``."""

    alpha: float
    n_tasks: int
    IWS: Interval
    SS: Interval
    VD: Interval


def function_readings(
    model: HookedLinearICTD, tasks: TaskBatch, alpha: float = 1.0, per_task: bool = False
) -> FunctionReadings | dict[str, list[float]]:
    """IWS, SS and VD per task (module docstring), against the TD(0) construction with step ``alpha``;
    means with 95% t intervals over the tasks (``per_task``: the lists of per-task values instead)."""
    td = td0_model(model).to(model.blocks[0].attn.P.dtype)
    with torch.no_grad():
        for attn in td.unique_attention():
            attn.P.mul_(alpha)
    v_tf, g_tf = state_values(model, tasks, query_grad=True)
    v_td, g_td = state_values(td, tasks, query_grad=True)
    mu, phi = tasks.mrp.mu_pi.double(), tasks.features.double()
    v_tf, v_td, g_tf, g_td = v_tf.double(), v_td.double(), g_tf.double(), g_td.double()
    D = torch.diag_embed(mu)
    w_tf = torch.linalg.solve(phi.mT @ D @ phi, phi.mT @ D @ v_tf.unsqueeze(-1)).squeeze(-1)
    w_td = g_td[:, 0]  # the TD model is linear in its query: one gradient for every state
    scores = {"IWS": _cos(w_tf, w_td), "SS": (mu * _cos(g_tf, g_td)).sum(-1), "VD": (mu * (v_tf - v_td) ** 2).sum(-1)}
    if per_task:
        return {name: values.tolist() for name, values in scores.items()}
    return FunctionReadings(alpha, len(tasks), **{name: t_interval(values.tolist()) for name, values in scores.items()})


def _cos(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))


def random_layer_iws(model: HookedLinearICTD, tasks: TaskBatch, draws: int = 8, seed: int = 0) -> Interval:
    """The chance level of IWS: the same depth, ties and activation with Gaussian ``P`` and ``Q`` scaled to
    each layer's own Frobenius norms, ``draws`` times; the mean over draws and tasks with its t interval."""
    generator = torch.Generator().manual_seed(seed)
    scores = []
    for _ in range(draws):
        twin = type(model)(model.cfg).to(model.blocks[0].attn.P.dtype)
        with torch.no_grad():
            for mine, theirs in zip(twin.unique_attention(), model.unique_attention()):
                for name in ("P", "Q"):
                    W = torch.randn(getattr(theirs, name).shape, generator=generator, dtype=torch.float64)
                    getattr(mine, name).copy_(W * getattr(theirs, name).detach().double().norm() / W.norm())
        scores += function_readings(twin, tasks, per_task=True)["IWS"]
    return t_interval(scores)
