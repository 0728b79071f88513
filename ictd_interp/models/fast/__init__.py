"""Forwards and backwards that give the hooked forward's numbers faster, chosen once per model: the stylised
model's fast path (``ictd_fast_path``) and fused backward (``ictd_fused_backward``), stacks of stylised models
trained at once (``ictd_stack``), attention over query chunks (``chunked_attention``) and the exact state-space
forward (``state_space``) with its hooks (``state_space_hooks``). Imports ``config``, ``tasks`` and the rest of
``models``."""
