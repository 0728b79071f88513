"""ictd-interp: softmax transformers that run TD learning in context, made inspectable.

Names are imported on first use (PEP 562), so ``ictd-interp --help`` and config validation do not pay
for torch and TransformerLens.
"""

from importlib import import_module
from typing import no_type_check

_EXPORTS = {
    "CheckpointError": "checkpoint", "load_checkpoint": "checkpoint", "save_checkpoint": "checkpoint",
    "ICTDConfig": "config", "make_features": "features", "HookedICTDTransformer": "model",
    "MRP": "mrp", "boyan_chain": "mrp", "boyan_chains": "mrp",
    "PromptLayout": "prompt", "build_prompt": "prompt", "context_inputs": "prompt",
    "TaskBatch": "tasks", "sample_tasks": "tasks",
    "linear_td": "td", "softmax_td": "td", "tabular_td": "td", "td_errors": "td",
    "theta_star": "theta_star", "sample_trajectories": "trajectory", "list_pretrained": "registry",
}
__all__ = sorted(_EXPORTS)


@no_type_check  # a module hook: never wrapped by the tests' runtime type checker
def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ictd_interp' has no attribute {name!r}")
    value = getattr(import_module(f"ictd_interp.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
