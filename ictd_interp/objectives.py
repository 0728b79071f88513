"""Pretraining objectives of SPEC §6. Each maps (model, batch) to a scalar loss.

Windows come task-major: the query prediction of window ``t`` of task ``b`` is ``v[b, t]``, and
window ``t + 1`` of the same trajectory provides the bootstrap ``v[b, t + 1]``.
"""

from __future__ import annotations

from typing import Callable

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.data import WindowBatch
from ictd_interp.model import HookedICTDTransformer

OBJECTIVES = ("td", "neu", "mc", "supervised")


def query_values(model: HookedICTDTransformer, batch: WindowBatch) -> Float[Tensor, "task window"]:
    """One forward pass for every window; the query prediction of each."""
    return model(batch.prompts)[:, -1].view(-1, batch.n_windows)


def td_errors_of_windows(v: Tensor, batch: WindowBatch, gamma: float, bootstrap_grad: bool) -> Tensor:
    """``delta_t = r(S_{t+n}) + gamma v^_{t+1} - v^_t`` for the ``W`` windows that have a successor."""
    nxt = v[:, 1:] if bootstrap_grad else v[:, 1:].detach()
    return batch.query_reward[:, :-1] + gamma * nxt - v[:, :-1]


def td_loss(model: HookedICTDTransformer, batch: WindowBatch) -> Tensor:
    """Semi-gradient TD: the bootstrap target is held fixed (stop-gradient)."""
    delta = td_errors_of_windows(query_values(model, batch), batch, model.cfg.gamma, bootstrap_grad=False)
    return delta.pow(2).mean()


def neu_loss(model: HookedICTDTransformer, batch: WindowBatch) -> Tensor:
    """``||u||^2`` with ``u = mean_t delta_t grad v^_t``, differentiated fully (second order).

    ``u`` is the vector-Jacobian product ``J^T delta / N`` taken with ``create_graph=True``, so the
    loss stays differentiable through both ``delta`` and the Jacobian ``J = d v^ / d theta``."""
    v = query_values(model, batch)
    delta = td_errors_of_windows(v, batch, model.cfg.gamma, bootstrap_grad=True)
    params = [p for p in model.parameters() if p.requires_grad]
    u = torch.autograd.grad(v[:, :-1], params, grad_outputs=delta / delta.numel(), create_graph=True)
    return sum(g.pow(2).sum() for g in u)


def mc_loss(model: HookedICTDTransformer, batch: WindowBatch) -> Tensor:
    """Regression on the truncated discounted return from the query state."""
    return (batch.query_return - query_values(model, batch)).pow(2).mean()


def supervised_loss(model: HookedICTDTransformer, batch: WindowBatch) -> Tensor:
    """Oracle baseline: regression on the true ``v_pi`` of the query state."""
    return (batch.query_value - query_values(model, batch)).pow(2).mean()


LOSSES: dict[str, Callable[[HookedICTDTransformer, WindowBatch], Tensor]] = {
    "td": td_loss, "neu": neu_loss, "mc": mc_loss, "supervised": supervised_loss,
}
