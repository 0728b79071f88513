"""What every model class shares beside the TransformerLens surface: its own config copy, the ``__init__`` tail,
the depth guard, the blocks run to a depth, the hook check that decides the fast path, and ``forward``'s return
types (the SAELens ``SAE`` template: the base owns the shared steps, each class what differs)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config.fields import check_choice
from ictd_interp.io.threads import toolkit_threads
from ictd_interp.models.chunked_attention import hooked

RETURN_TYPES = (
    "values",
    "query",
    "query_sum",
)  # what ``forward`` returns: every position's value, the query's, their sum


def check_tasks(model: Any, tasks: Any, what: str = "tasks") -> None:
    """``tasks`` is a ``TaskBatch`` whose discount is the model's (a model built for one γ shifts its target row by
    that γ: on tasks of another it computes values for neither), else a one-line error naming the mismatch."""
    if not hasattr(tasks, "mrp") or not hasattr(tasks, "states"):
        kind = f"a tensor of shape {tuple(tasks.shape)}" if isinstance(tasks, Tensor) else type(tasks).__name__
        raise ValueError(
            f"{what}: expected a TaskBatch (ictd_interp.sample_tasks / sample_from), got {kind}; a "
            "prompt tensor goes to the model itself: model(prompt)"
        )
    gamma = getattr(model.cfg, "gamma", None)
    if gamma is not None and abs(float(tasks.mrp.gamma) - float(gamma)) > 1e-12:
        raise ValueError(
            f"{what}: sampled with gamma = {tasks.mrp.gamma:g}, but the model was built for gamma = "
            f"{gamma:g} (its temporal shift writes gamma * v(next)); sample tasks with the model's gamma "
            "or build the model with the tasks'"
        )


def check_return_type(return_type: str) -> None:
    check_choice("return_type", return_type, RETURN_TYPES)


def select_return(values: Float[Tensor, "batch pos"], return_type: str) -> Tensor:
    """``forward``'s output for ``return_type`` from the value row."""
    if return_type == "values":
        return values
    return values[:, -1] if return_type == "query" else values[:, -1].sum()


class ModelBase:
    """Mixin for every model class: needs ``cfg``, ``blocks`` and ``hook_free_values``."""

    CONFIG: type  # the config class each model class takes (its architecture's record)

    def own_config(self, cfg: Any) -> Any:
        """The model's own copy of its config (a config object, or the dict ``to_dict`` wrote): moving the model
        keeps it in sync, never the caller's."""
        return replace(cfg) if isinstance(cfg, self.CONFIG) else self.CONFIG.from_dict(cfg)

    def finish_init(self) -> None:
        """The tail every model's ``__init__`` ends with: TransformerLens's hook registry, then eval mode
        (TransformerLens's patching requires it; nothing here behaves differently in training mode); the toolkit's
        one-thread default applied once per process (``ictd_interp.io.threads``)."""
        toolkit_threads()
        self.setup()
        self.eval()

    def process_weights_(self, fold_ln: bool, center_writing_weights: bool, fold_value_biases: bool) -> None:
        """TransformerLens's weight processing in place (``from_pretrained``'s flags); a model without LayerNorm
        has nothing to process, and this default leaves it as it is (one with LayerNorm must override it)."""
        if self.cfg.normalization_type is not None:
            raise NotImplementedError(
                f"{type(self).__name__}: has LayerNorm ({self.cfg.normalization_type}) but "
                "no process_weights_ of its own; fold_ln and the other flags need one"
            )

    def checked_depth(self, depth: Optional[int]) -> int:
        """``depth`` (default ``n_layers``); another depth only for a tied model, whose one layer repeats."""
        depth = self.cfg.n_layers if depth is None else depth
        if depth != self.cfg.n_layers and not self.cfg.tied:
            raise ValueError(f"depth: only a tied model runs at another depth than n_layers={self.cfg.n_layers}")
        return depth

    def blocks_to(self, depth: int) -> list:
        """The blocks run to ``depth``: the last one repeats beyond ``n_layers`` (a tied model's only block)."""
        return [self.blocks[min(i, self.cfg.n_layers - 1)] for i in range(depth)]

    def nonzero_frozen(self, weights: Optional[dict[str, Tensor]] = None) -> list[str]:
        """The state-dict names whose entries the training mask freezes at 0 (``frozen_entries``) hold
        something else in ``weights`` (default: the model's own)."""
        weights = self.state_dict() if weights is None else weights
        return [
            name
            for name, frozen in self.frozen_entries().items()
            if (weights[name][frozen.to(weights[name].device)] != 0).any()
        ]

    def state_space_values(self, tasks, depth: Optional[int] = None, every_layer: bool = False) -> Tensor:
        """Refused: only the stylised model (``HookedICTDTransformer``, TSM form, paper mask, softmax) has an
        exact state-space forward, where a score depends on the two positions' states alone."""
        raise ValueError(
            f"{type(self).__name__} has no state-space forward: only the stylised HookedICTDTransformer "
            "(TSM form, paper mask, softmax attention) has one, where a score depends on the two "
            "positions' states alone; run the model on tasks.prompt"
        )

    def compile_fast_path(self, **options) -> None:
        """``torch.compile`` the hook-free training path (``hook_free_values``) of this model, once and
        explicitly (``TrainConfig.compile``): hooks still divert ``fast_values`` to the hooked forward,
        which is never compiled. Each depth compiles once; the rounding differs from eager's."""
        self.hook_free_values = torch.compile(self.hook_free_values, dynamic=False, **options)

    def has_any_hook(self) -> bool:
        """Any forward, pre-forward or backward hook on any submodule, or a global module hook
        (TransformerLens, nnsight, pyvene and plain torch hooks all land in one of these)."""
        from torch.nn.modules import module as torch_module

        if torch_module._global_forward_hooks or torch_module._global_forward_pre_hooks:
            return True
        return hooked(*self.modules())
