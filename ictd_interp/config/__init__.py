"""Validated, torch-free configuration dataclasses: the lowest layer, importing nothing else of ours.

``ICTDConfig`` (the stylised model, in ``stylised``), ``StandardConfig`` (the standard transformer, ``standard``),
``LinearICTDConfig`` (the predecessor's linear model, ``linear``), ``TaskDistribution`` (``tasks``: which MRPs,
features, context length and γ) and ``TrainConfig`` (``train``: a model config and a task distribution nested with
the optimisation settings, and its ``PRESETS``); what can be named, families and objectives, is listed in
``registry``. Each has ``to_dict``/``from_dict``; every choice and shared check is written once in ``fields``.
"""

from ictd_interp.config.fields import FEATURE_KINDS, FORMS
from ictd_interp.config.linear import LinearICTDConfig
from ictd_interp.config.standard import StandardConfig
from ictd_interp.config.stylised import ICTDConfig
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.config.train import ARCHITECTURES, MODEL_CONFIGS, PRESETS, ModelConfig, TrainConfig

__all__ = [
    "ARCHITECTURES",
    "FEATURE_KINDS",
    "FORMS",
    "MODEL_CONFIGS",
    "PRESETS",
    "ICTDConfig",
    "LinearICTDConfig",
    "ModelConfig",
    "StandardConfig",
    "TaskDistribution",
    "TrainConfig",
]
