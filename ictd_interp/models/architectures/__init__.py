"""The three hooked architectures and what they share: the stylised ICTD transformer (``ictd``, its training
masks in ``ictd_masks``), the standard pre-LN transformer (``standard``, TransformerLens's weight processing in
``standard_weights``), the predecessor's linear transformer (``linear``), the base class (``base``), the
TransformerLens surface (``tl_surface``), hook names (``hook_names``) and the patching guard (``patching_guard``).
Imports ``config``, ``io``, ``tasks`` and the rest of ``models`` (the fast paths, the constructions)."""
