"""The model classes by architecture name, read from the architecture's record (its config class:
``model_module`` and ``original_architecture``) and imported on first use.

It imports no model class, so loading (``ictd_interp.models.loading``) and training find the class a
checkpoint or config names without an import circle, and a new architecture needs no line here.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Optional, Protocol, runtime_checkable

from torch import Tensor

from ictd_interp.config.fields import check_choice
from ictd_interp.config.train import ARCHITECTURES, MODEL_CONFIGS, ModelConfig
from ictd_interp.tasks.prompt import PromptLayout


@runtime_checkable
class HookedModel(Protocol):
    """What the function-space analyses (error vs depth and context, algorithm identification, kernel
    diagonality from patterns, probes, patching, depth extrapolation) need from a model; both model
    classes conform. ``cfg`` carries ``architecture``, ``n_layers``, ``n_heads``, ``gamma``,
    ``d_features``, ``tied`` and ``theta_star_config()``; hook names are HookedTransformer's."""

    cfg: Any
    layout: PromptLayout

    def __call__(self, prompt: Tensor, stop_at_layer: Optional[int] = None, return_type: str = "values") -> Tensor: ...

    def run_with_cache(self, *args: Any, **kwargs: Any) -> Any: ...

    def run_with_hooks(self, *args: Any, **kwargs: Any) -> Any: ...

    def fast_values(self, prompt: Tensor, depth: Optional[int] = None, query_only: bool = False) -> Tensor: ...

    def readout_direction(self) -> Tensor: ...

    def frozen_entries(self) -> dict[str, Tensor]: ...

    def nonzero_frozen(self, weights: Optional[dict[str, Tensor]] = None) -> list[str]: ...

    def tied_parameters(self) -> list[list[str]]: ...

    def parameters(self, recurse: bool = True) -> Any: ...


def model_class(architecture: str) -> type:
    """The class that builds ``architecture``'s models, from its record; the class must take that record."""
    check_choice("architecture", architecture, ARCHITECTURES)
    record = MODEL_CONFIGS[architecture]
    cls = getattr(import_module(record.model_module), record.original_architecture)
    if cls.CONFIG is not record:
        raise TypeError(
            f"{record.model_module}.{record.original_architecture} takes {cls.CONFIG.__name__}, "
            f"not {record.__name__} (the {architecture!r} record names it)"
        )
    return cls


def config_from_dict(architecture: str, data: dict[str, Any]) -> ModelConfig:
    check_choice("architecture", architecture, ARCHITECTURES)
    return MODEL_CONFIGS[architecture].from_dict(data)


def build_model(cfg: ModelConfig) -> HookedModel:
    """A freshly initialised model of the config's architecture."""
    return model_class(cfg.architecture)(cfg)


def holds_theta_star(model: HookedModel) -> bool:
    """θ* is a point of the model's weights (its record's ``holds_theta_star``). What follows and the analyses use:
    readings against θ*'s weights apply, the residual stream is the prompt with its stored value rows (probes of
    the stored value, a layer rebuilt at another depth), and the state-space forward applies where its form, mask
    and attention allow (``state_space_unavailable``). Other models are analysed in function space."""
    return model.cfg.holds_theta_star
