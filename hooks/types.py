"""What every hook builder shares: the ``(hook_name, fn)`` pairs type and TransformerLens's hook names."""

from collections.abc import Callable

try:  # TransformerLens 4
    from transformer_lens.utilities import get_act_name
except ImportError:  # TransformerLens 3.x
    from transformer_lens.utils import get_act_name

Hooks = list[tuple[str, Callable]]

__all__ = ["Hooks", "get_act_name"]
