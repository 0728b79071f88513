"""Forwards and backwards that give the hooked forward's numbers faster, chosen once per model: the stylised
model's fast path and fused backward, stacks of stylised models trained at once, attention over query chunks
and the exact state-space forward with its hooks. Imports ``config``, ``tasks`` and the rest of ``models``."""
