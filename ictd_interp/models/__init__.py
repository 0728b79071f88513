"""The hooked models, by role (the folder layout is the pipeline):

- ``architectures/``: the three model classes — the stylised ICTD transformer (``ictd``, with the masks
  training keeps, ``ictd_masks``), the standard pre-LN transformer (``standard``, with TransformerLens's weight
  processing, ``standard_weights``) and the predecessor's linear transformer (``linear``) — and what they share:
  the base every class builds on (``base``), the TransformerLens surface (``tl_surface``, one
  ``from_pretrained``), hook names (``hook_names``) and the guard on TransformerLens's patching functions
  (``patching_guard``).
- ``fast/``: forwards and backwards that give the hooked forward's numbers faster, decided once — the stylised
  model's fast path (``ictd_fast_path``) and fused backward (``ictd_fused_backward``), stacks of stylised models
  trained at once (``ictd_stack``), attention over query chunks (``chunked_attention``) and the exact
  state-space forward (``state_space``, with its hooks in ``state_space_hooks``).
- ``constructions/``: hand-built weights, each with its derivation — θ* (``theta_star``), θ*'s circuit in a
  standard block (``standard_theta_star``), the predecessor's linear TD and control constructions
  (``linear_td``, ``linear_control``).
- ``registry`` (a model class from its config record, imported on first use) and ``loading`` (checkpoints).

Imports ``config``, ``io`` and ``tasks``.
"""

from ictd_interp.models.architectures.ictd import HookedICTDTransformer
from ictd_interp.models.architectures.linear import HookedLinearICTD
from ictd_interp.models.architectures.standard import HookedStandardTransformer
from ictd_interp.models.constructions.theta_star import theta_star
from ictd_interp.models.loading import Checkpoint, load_checkpoint
from ictd_interp.models.registry import ICTDModel, build_model, holds_theta_star

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
