"""The two model families by name: which config and which class a checkpoint or a training run builds."""

from __future__ import annotations

from typing import Any, Optional, Protocol, Union, runtime_checkable

from torch import Tensor

from ictd_interp.config import ARCHITECTURES, ICTDConfig, check_choice
from ictd_interp.model import HookedICTDTransformer
from ictd_interp.prompt import PromptLayout
from ictd_interp.standard import HookedStandardTransformer
from ictd_interp.standard_config import StandardConfig

ModelConfig = Union[ICTDConfig, StandardConfig]


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

_CLASSES = {"stylised": (ICTDConfig, HookedICTDTransformer), "standard": (StandardConfig, HookedStandardTransformer)}
assert tuple(_CLASSES) == ARCHITECTURES


def config_from_dict(architecture: str, data: dict[str, Any]) -> ModelConfig:
    check_choice("architecture", architecture, ARCHITECTURES)
    return _CLASSES[architecture][0].from_dict(data)


def build_model(cfg: ModelConfig) -> ICTDModel:
    """A freshly initialised model of the config's architecture."""
    return _CLASSES[cfg.architecture][1](cfg)


def is_stylised(model: ICTDModel) -> bool:
    """Weight probes against θ* apply only to the stylised model."""
    return isinstance(model, HookedICTDTransformer)
