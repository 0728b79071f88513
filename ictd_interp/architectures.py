"""The two model families by name: which config and which class a checkpoint or a training run builds."""

from __future__ import annotations

from typing import Any, Union

from ictd_interp.config import ARCHITECTURES, ICTDConfig, check_choice
from ictd_interp.model import HookedICTDTransformer
from ictd_interp.standard import HookedStandardTransformer
from ictd_interp.standard_config import StandardConfig

ModelConfig = Union[ICTDConfig, StandardConfig]
ICTDModel = Union[HookedICTDTransformer, HookedStandardTransformer]
"""Any ICTD model: both classes share the call surface the function-space analyses use (``cfg`` with
``n_layers``/``n_heads``/``gamma``/``d_features``, ``layout``, ``forward(prompt, stop_at_layer,
return_type)``, ``fast_values``, ``run_with_cache`` with HookedTransformer's hook names,
``readout_direction``, ``frozen_entries``, ``tied_parameters``)."""

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
