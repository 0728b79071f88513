"""Interventions on the ICTD circuit: ablations (``ablation``), attention swaps (``attention``), value edits
(``value``), activation patching with TransformerLens's sweeps (``patching``), their shared types (``types``), and
the backups that turn θ*'s SARSA into expected SARSA or softmax Q-learning (``control_backups``).

Every builder returns TransformerLens-style ``(hook_name, fn)`` pairs, used through
the model's ``run_with_hooks`` or its ``hooks(...)`` context manager, so no hook outlives its call.
Imports the core (``ictd_interp``: models, reference, hook names, and ``ictd_interp.tasks`` for the action
columns), never ``analyses``.
"""

from ictd_interp.hooks.ablation import ablate_heads, ablate_target_path, mean_head, zero_activation, zero_head
from ictd_interp.hooks.attention import (
    pattern_hooks,
    replace_pattern,
    tabular_pattern,
    temperature,
    temperature_hooks,
    theta_star_pattern_hooks,
    uniform_pattern,
)
from ictd_interp.hooks.control_backups import backup_hooks, expected_sarsa_hooks, never_sources, soft_q_hooks
from ictd_interp.hooks.patching import activation_patching, query_prediction, tl_patching
from ictd_interp.hooks.value import flip_weight_hooks, read_td_errors, scale_update, scale_update_hooks

__all__ = [
    "ablate_heads",
    "ablate_target_path",
    "activation_patching",
    "backup_hooks",
    "expected_sarsa_hooks",
    "flip_weight_hooks",
    "mean_head",
    "never_sources",
    "pattern_hooks",
    "query_prediction",
    "read_td_errors",
    "replace_pattern",
    "scale_update",
    "scale_update_hooks",
    "soft_q_hooks",
    "tabular_pattern",
    "temperature",
    "temperature_hooks",
    "theta_star_pattern_hooks",
    "tl_patching",
    "uniform_pattern",
    "zero_activation",
    "zero_head",
]
