"""Head and path ablations. Each builder returns ``[(hook_name, fn), ...]`` for
``model.run_with_hooks(prompt, fwd_hooks=...)`` or ``with model.hooks(fwd_hooks=...)``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

import torch
from torch import Tensor
from transformer_lens.hook_points import HookPoint

from ictd_interp.hooks.types import Hooks
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.hook_names import get_act_name


def zero_head(head: Optional[int] = None) -> Callable:
    """Zero a head's slice of ``hook_z``/``hook_result`` (``[batch, pos, head, d]``), or all heads."""

    def hook(act: Tensor, hook: HookPoint) -> Tensor:
        act = act.clone()
        act[:, :, slice(None) if head is None else head] = 0.0
        return act

    return hook


def mean_head(head: Optional[int] = None, mean: Optional[Tensor] = None) -> Callable:
    """Replace a head's activation by a mean: the given one (e.g. from a reference cache, shape
    ``[pos, head, d]``) or the batch mean of the current activation."""

    def hook(act: Tensor, hook: HookPoint) -> Tensor:
        ref = act.mean(0, keepdim=True) if mean is None else mean.to(act).unsqueeze(0)
        sel = slice(None) if head is None else head
        act = act.clone()
        act[:, :, sel] = ref[:, :, sel].expand_as(act[:, :, sel])
        return act

    return hook


def zero_activation(act: Tensor, hook: HookPoint) -> Tensor:
    return torch.zeros_like(act)


def ablate_heads(
    layers: Sequence[int], head: Optional[int] = None, mean: bool = False, hook_name: str = "hook_result"
) -> Hooks:
    """Zero- or mean-ablate ``head`` at ``attn.{hook_name}`` of each layer."""
    fn = mean_head(head) if mean else zero_head(head)
    return [(get_act_name(hook_name.removeprefix("hook_"), l, "attn"), fn) for l in layers]


def ablate_target_path(model: HookedICTDTransformer, layers: Optional[Sequence[int]] = None) -> Hooks:
    """Cut bootstrapping: the target row stops receiving ``gamma v(next)``, so under theta* each
    layer computes ``v <- v + K (R - v)``. Dual form: zero the target head (head 1); TSM form:
    zero the shift (``tsm.hook_shifted``) — the same meaning in both parametrisations."""
    layers = range(model.cfg.n_layers) if layers is None else layers
    if model.cfg.form == "dual":
        return [(get_act_name("result", l, "attn"), zero_head(1)) for l in layers]
    return [(get_act_name("shifted", l, "tsm"), zero_activation) for l in layers]
