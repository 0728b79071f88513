"""Hook and parameter names, written once: TransformerLens's ``get_act_name`` (its home moved between
TL 3 and TL 4), attention parameters by layer, and ``names_filter`` predicates for ``run_with_cache``."""

from __future__ import annotations

from collections.abc import Callable

try:  # TransformerLens 4
    from transformer_lens.utilities import get_act_name
except ImportError:  # TransformerLens 3.x
    from transformer_lens.utils import get_act_name


def attn_param(layer: int, name: str) -> str:
    """The state-dict name of attention parameter ``name`` (``"A"``, ``"V"``, ``"W_Q"`` ...) of ``layer``."""
    return f"blocks.{layer}.attn.{name}"


def ends_with(*suffixes: str) -> Callable[[str], bool]:
    """A ``names_filter`` caching every hook whose name ends with one of ``suffixes`` (``"hook_pattern"``)."""
    return lambda name: name.endswith(suffixes)


__all__ = ["attn_param", "ends_with", "get_act_name"]
