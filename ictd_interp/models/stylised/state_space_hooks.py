"""The hooks of the state-space forward (``HookedICTDTransformer.state_space_values``): every per-position
activation of the positional hooked forward, rebuilt from the state values after each layer and fired
through its ``HookPoint``, for reading.

Under the paper mask in the TSM form, ``V`` writes the current row only and the shift the target row only.
With ``v_l`` the state values after layer ``l`` (``v_0 = 0``), ``S_k`` the state at position ``k`` and
``e_cur``, ``e_tar`` the two value rows:

    hook_prompt = hook_embed = the prompt,  resid_pre_l = resid_post_{l-1} (resid_pre_0 = the prompt)
    hook_q = A resid_pre,  hook_k = resid_pre,  hook_v = V resid_pre        (one head: [batch, pos, 1, d_model])
    hook_z = hook_result = attn_out,  attn_out_l[k] = (v_l - v_{l-1})(S_k) e_cur,  resid_mid = resid_pre + attn_out
    tsm.hook_shifted_l[k] = gamma v_l(S_{k+1}) e_tar,  mlp.hook_post_l[k] = gamma (v_l - v_{l-1})(S_{k+1})
    hook_mlp_out_l = mlp.hook_post_l e_tar,  resid_post_l = resid_mid_l + hook_mlp_out_l

with ``v(S_{n+1}) = 0`` (the query has no successor). They are float64 on the CPU like the values (a float32
model's hooks see this float64 computation, within rounding of its own forward). Once any hook is attached the
residual-stream tensors are built layer by layer (each a transient ``[batch, pos, d_model]``; ``q`` and ``v``
only where hooked); nothing is built without a hook. Agreement with ``run_with_cache`` is to rounding: 1e-12
absolute at values of order 1, relative where they are large.

Refused, naming the hook: the scores and the pattern (``n x n``, never formed), backward hooks, a hook that
edits what it sees (a positional edit cannot be taken back into the state space: intervene through the
positional forward), and any hook on a module that is not a hook point or a global module hook (this forward
never calls those modules, so it could not honour them).
"""

from __future__ import annotations

from typing import Optional

import torch
from jaxtyping import Float, Int
from torch import Tensor
from transformer_lens.hook_points import HookPoint

from ictd_interp.models.chunked_attention import hooked
from ictd_interp.tasks.prompt import shift_to_predecessor

NOT_FORMED = ("attn.hook_attn_scores", "attn.hook_pattern")  # per pair of positions: never formed here


class StateSpaceHooks:
    """Fires ``model``'s hooked points from the state values of each layer (module docstring)."""

    def __init__(
        self,
        model,
        points: dict[str, HookPoint],
        prompt: Float[Tensor, "batch pos d_model"],
        states: Int[Tensor, "batch pos"],
    ):
        self.model, self.points, self.states, self.layout = model, points, states.cpu(), model.layout
        self.prompt = prompt.double().cpu()
        self.before = torch.zeros(states.shape, dtype=torch.float64)  # v_{l-1}(S_k)
        self.resid = self.prompt

    def check(self, depth: int) -> None:
        """Refuse, naming them, the hooks this forward cannot honour."""
        refused = [n for n in self.points if n.endswith(NOT_FORMED)]
        if refused:
            raise ValueError(
                f"state_space_values: {refused} hold a score per pair of positions, which the "
                "state-space forward never forms; use the positional forward (model(prompt))"
            )
        backward = [n for n, p in self.points.items() if p._backward_hooks or p._backward_pre_hooks]
        if backward:
            raise ValueError(
                f"state_space_values: backward hooks on {backward}; the state-space values are not "
                "differentiated through the hook points"
            )
        if depth != self.model.cfg.n_layers:
            raise ValueError(
                f"depth: hooks fire only at the model's own depth {self.model.cfg.n_layers} (its "
                f"blocks' hook points), got {depth}"
            )

    def fire(self, name: str, activation: Tensor) -> None:
        """Run ``name``'s hooks on a copy of ``activation``; refused if a hook changed it."""
        point = self.points.get(name)
        if point is None:
            return
        out = point(activation.clone())
        if (
            out.shape != activation.shape
            or out.dtype != activation.dtype
            or not torch.allclose(out, activation, rtol=0.0, atol=0.0, equal_nan=True)
        ):
            raise ValueError(
                f"state_space_values: a hook on {name} edited its activation; the state-space forward "
                "only reads hooks (intervene through the positional forward)"
            )

    def start(self) -> None:
        self.fire("hook_prompt", self.prompt)
        self.fire("hook_embed", self.prompt)

    def layer(self, layer: int, now: Float[Tensor, "batch pos"]) -> None:
        """After layer ``layer``: its activations from the values ``now = v_l(S_k)`` at every position."""
        change = now - self.before
        block, p, gamma = f"blocks.{layer}.", self.layout, self.model.cfg.gamma
        attn = self.model.blocks[layer].attn
        self.fire(block + "hook_resid_pre", self.resid)
        for name, W in (("hook_q", attn.A), ("hook_k", None), ("hook_v", attn.V)):  # the positional order
            if block + "attn." + name in self.points:  # the key is the residual itself
                seen = self.resid.unsqueeze(2) if W is None else attn._project(self.resid, W.detach().double().cpu())
                self.fire(block + "attn." + name, seen)
        attn_out = self._on_row(change, p.current)
        self.fire(block + "attn.hook_z", attn_out.unsqueeze(2))
        self.fire(block + "attn.hook_result", attn_out.unsqueeze(2))
        self.fire(block + "hook_attn_out", attn_out)
        mid = self.resid + attn_out
        self.fire(block + "hook_resid_mid", mid)
        self.fire(block + "tsm.hook_shifted", self._on_row(gamma * shift_to_predecessor(now), p.target))
        write = gamma * shift_to_predecessor(change)
        self.fire(block + "mlp.hook_post", write.unsqueeze(-1))
        mlp_out = self._on_row(write, p.target)
        self.fire(block + "hook_mlp_out", mlp_out)
        self.resid = mid + mlp_out
        self.fire(block + "hook_resid_post", self.resid)
        self.before = now

    def _on_row(self, values: Float[Tensor, "batch pos"], row: int) -> Float[Tensor, "batch pos d_model"]:
        out = torch.zeros_like(self.prompt)
        out[..., row] = values
        return out


def _global_hooks() -> bool:
    from torch.nn.modules import module as torch_module

    return bool(
        torch_module._global_forward_hooks
        or torch_module._global_forward_pre_hooks
        or torch_module._global_backward_hooks
        or torch_module._global_backward_pre_hooks
    )


def state_space_hooks(model, tasks, depth: int) -> Optional[StateSpaceHooks]:
    """The hooks a state-space run of ``tasks`` fires, or None when none is attached (nothing is built)."""
    points = {name: point for name, point in model.hook_dict.items() if hooked(point)}
    others = [
        name or "the model itself"
        for name, module in model.named_modules()
        if not isinstance(module, HookPoint) and hooked(module)
    ]
    if others or _global_hooks():
        where = ", ".join(others) if others else "a global module hook"
        raise ValueError(
            f"state_space_values: hooks on {where}, which this forward never calls; only hook points "
            "fire here (use the positional forward, model(prompt))"
        )
    if not points:
        return None
    hooks = StateSpaceHooks(model, points, tasks.prompt, tasks.states)
    hooks.check(depth)
    return hooks
