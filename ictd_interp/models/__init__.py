"""The hooked models: the stylised ICTD transformer (``ictd``), the standard pre-LN transformer
(``standard``), the predecessor's linear transformer (``linear``), the hand-built weights θ* (``construction``)
and the predecessor's constructions (``linear_construction``), the masks training keeps, the
TransformerLens surface they share (``tl_surface``, one ``from_pretrained``), the base every class builds on
(``model_base``: config copy, ``__init__`` tail, depth guard, return types), the guard on TransformerLens's
patching functions (``patching_guard``), θ*'s circuit in a standard block (``standard_construction``), attention
over query chunks (``chunked``), the state-space forward (``state_space``), weight processing, the
architecture registry (``architectures``: a model class from its config record, imported on first use) and
checkpoint loading (``loading``). Imports ``config``, ``io`` and ``tasks``.

``load_checkpoint`` and ``build_model`` find a model class from its architecture's record (``architectures``).
"""

from ictd_interp.models.architectures import ICTDModel, build_model, holds_theta_star
from ictd_interp.models.construction import theta_star
from ictd_interp.models.ictd import HookedICTDTransformer
from ictd_interp.models.loading import Checkpoint, load_checkpoint
from ictd_interp.models.linear import HookedLinearICTD
from ictd_interp.models.standard import HookedStandardTransformer

__all__ = [
    "Checkpoint",
    "HookedICTDTransformer",
    "HookedLinearICTD",
    "HookedStandardTransformer",
    "ICTDModel",
    "build_model",
    "holds_theta_star",
    "load_checkpoint",
    "theta_star",
]
