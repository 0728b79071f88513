"""The hooked models, by architecture: each architecture's folder holds its model class, the pieces only it uses
(masks, fast paths, weight processing) and its hand-built weights; what several share sits here.

- ``stylised/``: the stylised ICTD transformer (``model``: ``HookedICTDTransformer``), the masks training keeps
  (``masks``), θ* (``theta_star``), its fast path (``fast_path``) and fused backward (``fused_backward``), stacks of
  stylised models trained at once (``stack``) and the exact state-space forward (``state_space``, with its hooks in
  ``state_space_hooks``).
- ``standard/``: the standard pre-LN transformer (``model``: ``HookedStandardTransformer``), TransformerLens's weight
  processing (``weights``) and θ*'s circuit in a standard block (``theta_star``).
- ``linear/``: the predecessor's linear transformer (``model``: ``HookedLinearICTD``) and its TD and control
  constructions (``td``, ``control``).
- shared: the base every class builds on (``base``), the TransformerLens surface (``tl_surface``, one
  ``from_pretrained``), hook names (``hook_names``), the guard on TransformerLens's patching functions
  (``patching_guard``), attention over query chunks (``chunked_attention``), the registry (``registry``: a model
  class from its config record, imported on first use) and checkpoints (``loading``).

The shared modules import no architecture, and ``standard`` reads ``stylised`` (θ*'s circuit is the stylised
model's) while nothing reads ``standard`` or ``linear``. Imports ``config``, ``io`` and ``tasks``.
"""

from ictd_interp.models.linear.model import HookedLinearICTD
from ictd_interp.models.loading import Checkpoint, load_checkpoint
from ictd_interp.models.registry import HookedModel, build_model, holds_theta_star
from ictd_interp.models.standard.model import HookedStandardTransformer
from ictd_interp.models.stylised.model import HookedICTDTransformer
from ictd_interp.models.stylised.theta_star import theta_star

__all__ = [
    "Checkpoint",
    "HookedICTDTransformer",
    "HookedLinearICTD",
    "HookedStandardTransformer",
    "HookedModel",
    "build_model",
    "holds_theta_star",
    "load_checkpoint",
    "theta_star",
]
