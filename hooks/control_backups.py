"""Expected SARSA and softmax Q-learning as θ* with another backup (docs/theory.md §14), as hooks.

Derivation. In the TSM form each layer (1) attends — every column ``j`` gains ``Σ_i K(i, j) δ_i`` on its value
row, the sources ``i`` being the context's pairs — and (2) shifts: the target row of source ``k`` becomes
``γ v(k + 1)``, so the next layer's TD error is SARSA's ``R_{k+1} + γ q(S_{k+1}, A_{k+1}) − q(S_k, A_k)``.
With the action columns of ``tasks.action_columns`` in the prompt (targets, never sources), replace the shift's
output by a *backup over the next state's actions*:

    expected SARSA:  t_k = γ Σ_a' π(a' | S_{k+1}) v(col(S_{k+1}, a'))
    softmax Q:       t_k = γ Σ_a' softmax_a'(β v(col(S_{k+1}, ·))) v(col(S_{k+1}, a'))

read from the values after this layer's attention (``hook_resid_mid``), and the next layer's TD error is
expected SARSA's or soft Q-learning's, with every action column's value updated by the same kernel. The
softmax backup is an attention over the next state's action columns with scores ``β v``; for every column set
``max v − log(a) / β ≤ Σ softmax(β v) v ≤ max v`` (the entropy of the weights is at most ``log a``), so as
``β → ∞`` it is Q-learning's ``max`` with a per-backup error at most ``log(a) / β``
(tests/unit/test_control_constructions.py checks both bounds and the limit).

Three hooks per layer: the action columns are removed from the sources (``hook_attn_scores``), the values
after attention are read (``hook_resid_mid``), the shift is replaced (``tsm.hook_shifted``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ictd_interp.hooks.types import Hooks
from ictd_interp.models.hook_names import get_act_name
from ictd_interp.models.stylised.model import HookedICTDTransformer
from ictd_interp.reference.control_iterations import Weights, policy_weights, softmax_weights
from ictd_interp.tasks.action_columns import ActionColumns


def never_sources(model, columns: slice) -> Hooks:
    """Every layer's attention treats ``columns`` as targets only (their scores as sources are ``-inf``), as the
    query is: extra columns that read the context without changing it."""

    def mask(scores: Tensor, hook) -> Tensor:
        scores = scores.clone()
        scores[..., columns] = float("-inf")
        return scores

    return [(get_act_name("attn_scores", l, "attn"), mask) for l in range(model.cfg.n_layers)]


def backup_hooks(model: HookedICTDTransformer, columns: ActionColumns, weights: Weights) -> Hooks:
    """The three hooks per layer that give each source the backup ``γ Σ_a' w_a' v(col(S_{k+1}, a'))``."""
    if model.cfg.form != "tsm":
        raise ValueError(f"form: the backup replaces the TSM shift; got a {model.cfg.form!r}-form model")
    layout, gamma, n = model.layout, model.cfg.gamma, columns.n_sources
    seen: dict[int, Tensor] = {}

    def read_values(layer: int):
        def fn(resid: Tensor, hook) -> Tensor:
            seen[layer] = resid[..., layout.current]
            return resid

        return fn

    def backup(layer: int):
        def fn(shifted: Tensor, hook) -> Tensor:
            v_next = torch.gather(seen[layer], 1, columns.next_columns.flatten(1)).view_as(columns.next_columns)
            target = torch.zeros_like(seen[layer])
            target[:, :n] = gamma * (weights(v_next.to(torch.float64)).to(v_next.dtype) * v_next).sum(-1)
            out = torch.zeros_like(shifted)
            out[..., layout.target] = target
            return out

        return fn

    hooks = never_sources(model, columns.action_slice)
    for l in range(model.cfg.n_layers):
        hooks += [(get_act_name("resid_mid", l), read_values(l)), (get_act_name("shifted", l, "tsm"), backup(l))]
    return hooks


def expected_sarsa_hooks(model: HookedICTDTransformer, columns: ActionColumns, policy: Tensor) -> Hooks:
    """Expected SARSA under ``policy [s, a]`` (or ``[batch, s, a]``): weights ``π(· | S_{k+1})``."""
    pi = policy if policy.ndim == 3 else policy.expand(columns.next_states.shape[0], -1, -1)
    return backup_hooks(model, columns, policy_weights(pi, columns.next_states))


def soft_q_hooks(model: HookedICTDTransformer, columns: ActionColumns, beta: float) -> Hooks:
    """Softmax Q-learning: weights ``softmax(β v(col(S_{k+1}, ·)))``, Q-learning's max as ``β → ∞``."""
    if not beta > 0:
        raise ValueError(f"beta: the inverse temperature must be > 0, got {beta!r}")
    return backup_hooks(model, columns, softmax_weights(beta))
