"""The model classes by architecture name: a leaf registry each class adds itself to (``register``).

It imports no model class, so loading (``ictd_interp.models.loading``) and training find the class a
checkpoint or config names without an import circle; importing ``ictd_interp.models`` registers every class.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol, runtime_checkable

from torch import Tensor

from ictd_interp.config.fields import check_choice
from ictd_interp.config.train import ARCHITECTURES, MODEL_CONFIGS, ModelConfig
from ictd_interp.tasks.prompt import PromptLayout


@runtime_checkable
class ICTDModel(Protocol):
    """What the function-space analyses (error vs depth and context, algorithm identification, kernel
    diagonality from patterns, probes, patching, depth extrapolation) need from a model; both model
    classes conform. ``cfg`` carries ``architecture``, ``n_layers``, ``n_heads``, ``gamma``,
    ``d_features``, ``tied`` and ``theta_star_config()``; hook names are HookedTransformer's."""

    cfg: Any
    layout: PromptLayout

    def __call__(self, prompt: Tensor, stop_at_layer: Optional[int] = None, return_type: str = "values") -> Tensor:
        ...

    def run_with_cache(self, *args: Any, **kwargs: Any) -> Any:
        ...

    def run_with_hooks(self, *args: Any, **kwargs: Any) -> Any:
        ...

    def fast_values(self, prompt: Tensor, depth: Optional[int] = None, query_only: bool = False) -> Tensor:
        ...

    def readout_direction(self) -> Tensor:
        ...

    def frozen_entries(self) -> dict[str, Tensor]:
        ...

    def tied_parameters(self) -> list[list[str]]:
        ...

    def parameters(self, recurse: bool = True) -> Any:
        ...

MODEL_CLASSES: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: ``cls`` builds the models of ``cls.ARCHITECTURE``."""
    check_choice("architecture", cls.ARCHITECTURE, ARCHITECTURES)
    MODEL_CLASSES[cls.ARCHITECTURE] = cls
    return cls


def model_class(architecture: str) -> type:
    check_choice("architecture", architecture, ARCHITECTURES)
    return MODEL_CLASSES[architecture]


def config_from_dict(architecture: str, data: dict[str, Any]) -> ModelConfig:
    check_choice("architecture", architecture, ARCHITECTURES)
    return MODEL_CONFIGS[architecture].from_dict(data)


def build_model(cfg: ModelConfig) -> ICTDModel:
    """A freshly initialised model of the config's architecture."""
    return model_class(cfg.architecture)(cfg)


def is_stylised(model: ICTDModel) -> bool:
    """Weight probes against θ* apply only to the stylised model."""
    return model.cfg.architecture == "stylised"
