"""A layer-by-layer profile of a stylised model's value estimates against softmax TD run with the model's own kernels
and steps (docs/theory.md §8c).

The model's value estimate of every column after layer ``l`` is an activation: the value row (``layout.current``) of
``blocks.l.hook_resid_post``. Softmax TD with the learned kernel is the same forward with each layer's value row
replaced by TD's: no feature term, reward ``s``, next value ``s`` (the prompt's target row holds ``γ v(S')``) and
current value ``−s``, where ``s = −w_cur`` is the layer's own step; its iterates ``u_l`` start where the model's do
(all zero) and are computed exactly by the state-space forward (``models/stylised/state_space.py``). Both share the
kernel, so what the profile sees is what the layer computes with it: a discount off γ, a reward weight off the step,
a feature term. θ*'s layer is TD's (kernel ``I``), so its profile is 0 at every layer.

``td_profile`` gives ``e_l = RMS(v_l − u_l) / RMS(u_l)`` over the tasks' columns (pooled) for ``l = 1 … L``; both runs
go through every layer from 0, so ``e_l`` carries the departures of the layers before ``l``. Worked case: a first
layer whose reward weight is twice its step and whose other weights are TD's moves its values to exactly twice TD's,
``e_1 = 1``.
"""

from __future__ import annotations

from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.models.hook_names import get_act_name
from ictd_interp.models.stylised.model import HookedICTDTransformer
from ictd_interp.models.stylised.state_space import model_weights, state_space_unavailable, state_values_on_tasks
from ictd_interp.tasks.sampling import TaskBatch


def td_value_rows(w: Float[Tensor, "1 unique d_model"], d_features: int) -> Float[Tensor, "1 unique d_model"]:
    """Each layer's value row as softmax TD's with the layer's own step ``s = −w_cur``: ``(0, …, 0, s, s, −s)`` over
    (features, reward, target, current)."""
    step = -w[..., d_features + 2]
    td = torch.zeros_like(w)
    td[..., d_features], td[..., d_features + 1], td[..., d_features + 2] = step, step, -step
    return td


@torch.no_grad()
def td_iterates(model: HookedICTDTransformer, tasks: TaskBatch) -> Float[Tensor, "layer batch pos"]:
    """Softmax TD's value estimates at every column after each of the model's layers, with its kernels and steps."""
    A, w = model_weights(model)
    states, layers = tasks.states.cpu(), []
    collect = lambda layer, v: layers.append(torch.gather(v[:, 0], 1, states))  # noqa: E731
    state_values_on_tasks(
        A, td_value_rows(w, model.cfg.d_features), tasks, model.cfg.gamma, model.cfg.n_layers, collect
    )
    return torch.stack(layers)


@torch.no_grad()
def value_activations(model: HookedICTDTransformer, tasks: TaskBatch) -> Float[Tensor, "layer batch pos"]:
    """The value row of the residual stream after each layer, float64 on the CPU."""
    names = [get_act_name("resid_post", layer) for layer in range(model.cfg.n_layers)]
    _, cache = model.run_with_cache(tasks.prompt.to(model.device), names_filter=names)
    return torch.stack([cache[name][..., model.layout.current].double().cpu() for name in names])


def td_profile(model: HookedICTDTransformer, tasks: TaskBatch) -> Optional[list[float]]:
    """``e_l`` for every layer (module docstring), infinite where TD's iterates are 0 (a step of 0); None where the
    layer is no fixed linear map of the state values (``state_space_unavailable``: no TD iterate to compare with)."""
    if state_space_unavailable(model.cfg) is not None:
        return None
    v, u = value_activations(model, tasks), td_iterates(model, tasks)
    rms = lambda x: x.pow(2).mean((1, 2)).sqrt()  # noqa: E731
    scale = rms(u)  # 0 where TD's step is 0: nothing is TD there, whatever the model does
    return torch.where(scale > 0, rms(v - u) / scale, torch.full_like(scale, float("inf"))).tolist()
