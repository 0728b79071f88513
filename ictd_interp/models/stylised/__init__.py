"""The stylised ICTD transformer: the hooked model (``model``), the masks training keeps (``masks``), θ*
(``theta_star``), the fast path (``fast_path``) and fused backward (``fused_backward``) that give the hooked forward's
numbers faster, stacks of models trained at once (``stack``) and the exact state-space forward (``state_space``, its
hooks in ``state_space_hooks``). Imports ``config``, ``tasks`` and the shared modules of ``models``."""
