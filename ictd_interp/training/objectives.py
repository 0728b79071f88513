"""Pretraining objectives of docs/theory.md §6: small objects naming a loss ``(model, batch) -> scalar``
and the data it needs.

Windows come task-major: the query prediction of window ``t`` of task ``b`` is ``v[b, t]``, and
window ``t + 1`` of the same trajectory provides the bootstrap ``v[b, t + 1]``.

A ``ModelStack`` (``models/stylised/stack.py``) with a stacked batch (``WindowBatch.stack``) runs every loss with a
leading model axis: the loss is then a vector, each model's own loss, whose sum has each model's own gradient.
Without the axis every operation is the single model's, bit for bit.
"""

from __future__ import annotations

from typing import Optional, Union

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config import registry
from ictd_interp.models.registry import HookedModel
from ictd_interp.models.stylised.stack import ModelStack
from ictd_interp.models.stylised.state_space import window_query_values
from ictd_interp.training.batches import WindowBatch

Trainable = Union[HookedModel, ModelStack]  # one model, or a stack of models with its stacked batch


def query_values(
    model: Trainable, batch: WindowBatch, depth: Optional[int] = None
) -> Float[Tensor, "*model task window"]:
    """One forward pass for every window; the query prediction of each. Objectives choose the model's
    exact fast path explicitly (``fast_values``: the hooked forward whenever a hook is registered);
    ``depth`` runs a tied model's layer that many times instead of ``n_layers``. A state-space batch (``space``) runs
    the exact state-space forward instead (``TrainConfig.forward``)."""
    if batch.space is not None:
        return window_query_values(model, batch.space, model.checked_depth(depth))
    values = model.fast_values(batch.prompts, depth=depth, query_only=True)
    return values.view(*values.shape[:-1], -1, batch.n_windows)


def per_model_mean(x: Float[Tensor, "*model task window"]) -> Float[Tensor, "*model"]:
    """The mean over the tasks and windows: a scalar for one model, each model's for a stack."""
    return x.mean((-2, -1))


def td_errors_of_windows(v: Tensor, batch: WindowBatch, gamma: float, bootstrap_grad: bool) -> Tensor:
    """``delta_t = r(S_{t+n}) + gamma v^_{t+1} - v^_t`` for the ``W`` windows that have a successor."""
    nxt = v[..., 1:] if bootstrap_grad else v[..., 1:].detach()
    return batch.query_reward[..., :-1] + gamma * nxt - v[..., :-1]


def td_loss(model: Trainable, batch: WindowBatch, depth: Optional[int] = None) -> Tensor:
    """Semi-gradient TD: the bootstrap target is held fixed (stop-gradient)."""
    delta = td_errors_of_windows(query_values(model, batch, depth), batch, model.cfg.gamma, bootstrap_grad=False)
    return per_model_mean(delta.pow(2))


def neu_loss(model: Trainable, batch: WindowBatch, depth: Optional[int] = None) -> Tensor:
    """``||u||^2`` with ``u = mean_t delta_t grad v^_t``, differentiated fully (second order).

    ``u`` is the vector-Jacobian product ``J^T delta / N`` taken with ``create_graph=True``, so the
    loss stays differentiable through both ``delta`` and the Jacobian ``J = d v^ / d theta``."""
    return expected_update(model, batch, create_graph=True, depth=depth).pow(2).sum(-1)


def mc_loss(model: Trainable, batch: WindowBatch, depth: Optional[int] = None) -> Tensor:
    """Regression on the truncated discounted return from the query state."""
    return per_model_mean((batch.query_return - query_values(model, batch, depth)).pow(2))


def supervised_loss(model: Trainable, batch: WindowBatch, depth: Optional[int] = None) -> Tensor:
    """Oracle baseline: regression on the true value of the query (``v_pi``, or ``q*`` for ``supervised-q-star``:
    the batch carries the one its objective asked for)."""
    if batch.query_value is None:
        raise ValueError(
            "batch: drawn without true values (window_batch(..., with_values=False)); the supervised "
            "objectives regress on them"
        )
    return per_model_mean((batch.query_value - query_values(model, batch, depth)).pow(2))


def greedy_bootstrap(
    model: Trainable, batch: WindowBatch, depth: Optional[int] = None
) -> Float[Tensor, "*model task window"]:
    """``max_a q^(S, a)`` at each window's query state ``S``: the model's value of the query ``(S, a)`` for every
    action ``a``, each read from the window's prompt with the query's features replaced (the prompt of a
    behaviour that took ``a`` at ``S``), without gradient (a bootstrap target)."""
    if batch.action_queries is None:
        raise ValueError(
            "batch: drawn without action queries (window_batch(..., action_queries=True)); the "
            "q-learning objective bootstraps on every action of the next state"
        )
    with torch.no_grad():  # every action's prompts in one forward
        values = model.fast_values(batch.with_query(batch.action_queries), depth=depth, query_only=True)
    return values.unflatten(-1, (batch.action_queries.shape[-4], -1, batch.n_windows)).amax(-3)


def q_learning_loss(model: Trainable, batch: WindowBatch, depth: Optional[int] = None) -> Tensor:
    """Semi-gradient Q-learning on the state-action chain: ``R + γ max_a' q^(S', a') − q^(S, A)``, the bootstrap
    held fixed (``greedy_bootstrap`` of the next window, whose query state is ``S'``)."""
    v = query_values(model, batch, depth)
    bootstrap = greedy_bootstrap(model, batch, depth)[..., 1:]
    delta = batch.query_reward[..., :-1] + model.cfg.gamma * bootstrap - v[..., :-1]
    return per_model_mean(delta.pow(2))


def objective(name: str) -> registry.Objective:
    """The registered objective ``name``, read from the registry at each call (one registered after this module
    was imported is found; calling it looks its loss up by its ``module:function`` name)."""
    return registry.OBJECTIVES[name]


def expected_update(
    model: Trainable, batch: WindowBatch, create_graph: bool = False, depth: Optional[int] = None
) -> Tensor:
    """``u(theta) = mean_t delta_t grad v^_t`` over the batch, flattened over the parameters (per model for a
    stack: ``[model, parameter]``); gradients are needed to define it, so it is computed with autograd on even
    under no_grad."""
    with torch.enable_grad():
        v = query_values(model, batch, depth)
        delta = td_errors_of_windows(v, batch, model.cfg.gamma, bootstrap_grad=True)
        params = [p for p in model.parameters() if p.requires_grad]
        per_model = delta.shape[-2:].numel()
        u = torch.autograd.grad(v[..., :-1], params, grad_outputs=delta / per_model, create_graph=create_graph)
    return torch.cat([g.flatten(delta.ndim - 2) for g in u], dim=-1)


def neu_unbiased(model: HookedModel, batch: WindowBatch) -> float:
    """Unbiased estimate of ``||E u||^2``: the inner product of ``u`` on two independent halves of
    the tasks (the plain ``||u||^2`` is biased upward by the batch variance)."""
    half = batch.query_reward.shape[0] // 2
    halves = [batch.select_tasks(slice(0, half)), batch.select_tasks(slice(half, 2 * half))]
    u0, u1 = (expected_update(model, h) for h in halves)
    return float(u0 @ u1)
