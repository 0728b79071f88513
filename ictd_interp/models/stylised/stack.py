"""``M`` stylised models of one shape stepped together: their free weights on a leading model axis.

A study trains many models of one shape (different seeds, data, rates or step counts). At small batches a training step
costs mostly its operations' overhead, not their arithmetic, so ``M`` models cost little more than one when
every operation carries them all. ``ModelStack`` holds each model's attention weights stacked ``[model, unique,
head, d_model, d_model]`` and runs the paper-mask fast path (``fast_path.py``, and its hand-written backward) on
them at once: ``fast_values(prompts [model, batch, pos, d_model])`` is each model's own ``fast_values`` up to
rounding (float64: 1e-12, tested), and the objectives (``training/objectives.py``) return one loss per model.
Adam, AdamW and SGD update each entry alone, so one optimiser on the stacked weights makes each model's own
update.

It is a training object, not a hooked model: ``model(i)`` writes model ``i``'s weights back into its own
``HookedICTDTransformer`` and returns it, where every hook, ``run_with_cache`` and analysis works as on any
model. What it applies to (``fast_path_refusal``, ``check_stackable``): stylised models with the paper mask (the fast
path's exactness), not compiled, no hooks. ``training/stacked.py`` trains a stack into one run folder per model.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor, nn

from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.models.stylised.fast_path import paper_mask_values, reduced_weights
from ictd_interp.models.stylised.fused_backward import fused_values
from ictd_interp.models.stylised.model import HookedICTDTransformer


def fast_path_refusal(cfg) -> Optional[str]:
    """Why a model of this config cannot join a stack, or None: a stack runs the stylised model's paper-mask fast
    path (exact only there). The one rule: ``check_stackable`` applies it to models, ``training.stacked`` to runs."""
    if not isinstance(cfg, ICTDConfig) or cfg.mask != "paper":
        return "a stack runs the stylised model's paper-mask fast path"
    return None


def check_stackable(models: list[HookedICTDTransformer]) -> None:
    """Refuse, naming why, models a stack cannot step together."""
    if not models:
        raise ValueError("models: a stack needs at least one model")
    first = models[0]
    for i, model in enumerate(models):
        if not isinstance(model, HookedICTDTransformer):
            raise ValueError(
                f"models[{i}]: {type(model).__name__} cannot be stacked; only the stylised model "
                "(HookedICTDTransformer) has the fast path a stack runs"
            )
        if (refusal := fast_path_refusal(model.cfg)) is not None:
            raise ValueError(f"models[{i}]: mask {model.cfg.mask!r}; {refusal}")
        if replace(model.cfg, seed=first.cfg.seed) != first.cfg:
            raise ValueError(
                f"models[{i}]: its config differs from models[0]'s beyond the seed; a stack's models "
                "share one shape and one configuration"
            )
        if model.has_any_hook():
            raise ValueError(
                f"models[{i}]: has hooks registered; remove them before stacking (hooks belong on stack.model(i))"
            )
        if "hook_free_values" in vars(model):
            raise ValueError(f"models[{i}]: compiled (compile_fast_path); a stack runs the eager fast path")


class ModelStack(nn.Module):
    """``M`` models' attention weights, stacked: parameters ``A``, ``V`` ``[model, unique, head, d_model,
    d_model]``, frozen entries held at 0 by gradient masks as in each model."""

    def __init__(self, models: list[HookedICTDTransformer]):
        super().__init__()
        check_stackable(models)
        self.models, self.cfg = list(models), models[0].cfg
        attns = [m.unique_attention() for m in models]
        self.A = nn.Parameter(torch.stack([torch.stack([a.A.detach() for a in at]) for at in attns]).clone())
        self.V = nn.Parameter(torch.stack([torch.stack([a.V.detach() for a in at]) for at in attns]).clone())
        self.register_buffer("mask_A", torch.stack([a.mask_A for a in attns[0]]), persistent=False)
        self.register_buffer("mask_V", torch.stack([a.mask_V for a in attns[0]]), persistent=False)
        self.A.register_hook(lambda grad: grad * self.mask_A)
        self.V.register_hook(lambda grad: grad * self.mask_V)

    def __len__(self) -> int:
        return len(self.models)

    def fast_values(
        self, prompt: Float[Tensor, "model batch pos d_model"], depth: Optional[int] = None, query_only: bool = False
    ) -> Float[Tensor, "model batch pos"] | Float[Tensor, "model batch"]:
        """Each model's ``fast_values`` of its own prompts (the paper-mask fast path, differentiated as
        ``cfg.backward`` says)."""
        if prompt.ndim != 4 or prompt.shape[0] != len(self):
            raise ValueError(f"prompt: expected [model={len(self)}, batch, pos, d_model], got {tuple(prompt.shape)}")
        depth = self.models[0].checked_depth(depth)
        values = fused_values if self.cfg.backward == "fused" else paper_mask_values
        return values(self.cfg, *reduced_weights(self.cfg, self.A, self.V), prompt.to(self.A.dtype), depth, query_only)

    @torch.no_grad()
    def model(self, i: int) -> HookedICTDTransformer:
        """Model ``i`` with the stack's current weights (written into its own module, which is returned)."""
        for u, attn in enumerate(self.models[i].unique_attention()):
            attn.A.copy_(self.A[i, u])
            attn.V.copy_(self.V[i, u])
        return self.models[i]

    def parameter_slices(self, i: int) -> list[tuple[str, int]]:
        """For each of model ``i``'s parameters, in ``parameters()`` order: the stacked parameter (``"A"`` or
        ``"V"``) and unique layer that holds it (how an optimiser's state moves between a model and the stack)."""
        where = {}
        for u, attn in enumerate(self.models[i].unique_attention()):
            where[id(attn.A)], where[id(attn.V)] = ("A", u), ("V", u)
        return [where[id(p)] for p in self.models[i].parameters()]
