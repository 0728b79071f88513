"""Value-update interventions and read-outs: the step size, the (+, +, -) weights, the TD errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor
from transformer_lens.hook_points import HookPoint

from ictd_interp.hooks.types import Hooks
from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.hook_names import ends_with, get_act_name

ENTRIES = ("reward", "target", "current")


def scale_update(alpha: float) -> Callable:
    """Hook for ``hook_attn_out``: multiply the layer's update by ``alpha`` (theta* then runs TD
    with step size ``alpha``)."""

    def hook(act: Tensor, hook: HookPoint) -> Tensor:
        return alpha * act

    return hook


def scale_update_hooks(alpha: float, layers: Sequence[int]) -> Hooks:
    return [(get_act_name("attn_out", l), scale_update(alpha)) for l in layers]


def flip_weight_hooks(
    model: HookedICTDTransformer, entry: str, layers: Optional[Sequence[int]] = None, head: int = 0
) -> Hooks:
    """Flip the sign of the current-value row's weight on one input row (``reward``, ``target`` or
    ``current``) through ``hook_v``: ``v_cur -= 2 V[cur, c] z_c``. The layer input ``z`` is read at
    ``hook_resid_pre`` in the same forward pass, so no weight is touched."""
    if entry not in ENTRIES:
        raise ValueError(f"entry: must be one of {ENTRIES}, got {entry!r}")
    lay = model.layout
    col = {"reward": lay.reward, "target": lay.target, "current": lay.current}[entry]
    hooks: Hooks = []
    for l in range(model.cfg.n_layers) if layers is None else layers:
        stash: dict[str, Tensor] = {}

        def keep(act: Tensor, hook: HookPoint, stash=stash) -> None:
            stash["z"] = act

        def flip(act: Tensor, hook: HookPoint, stash=stash, l=l) -> Tensor:
            weight = model.blocks[l].attn.V[head, lay.current, col]
            act = act.clone()
            act[:, :, head, lay.current] -= 2 * weight * stash["z"][..., col]
            return act

        hooks += [(get_act_name("resid_pre", l), keep), (get_act_name("v", l), flip)]
    return hooks


@torch.no_grad()
def read_td_errors(model: HookedICTDTransformer, prompt: Tensor, head: int = 0) -> Float[Tensor, "layer batch key_pos"]:
    """The per-transition TD errors each layer computes: the current-row component of the value
    vector of every source position (``V* z_i = delta_{i+1} e_cur`` under theta*)."""
    _, cache = model.run_with_cache(prompt, names_filter=ends_with("attn.hook_v"))
    return torch.stack([cache["v", l][:, :-1, head, model.layout.current] for l in range(model.cfg.n_layers)])
