"""The prompt for backups over the next state's actions (expected SARSA, Q-learning: docs/theory.md §14).

SARSA's target needs ``q(S_{k+1}, A_{k+1})``, which the context holds at column ``k + 1``. Expected SARSA's and
Q-learning's need ``q(S_{k+1}, a')`` for *every* action ``a'``: one *action column* per ``(k + 1, a')`` carries
the pair's features ``x(S_{k+1}, a')`` with zero reward and values, placed after the context's sources and before
the query. Action columns are targets, never sources (as the query is), so each layer updates their values with
the same kernel as every other column, and a backup reads them (``ictd_interp.hooks.control_backups``).

Columns: sources ``0 .. n-1`` (the context's pairs ``(S_k, A_k)``), then ``n · a`` action columns in the order
``(k + 1, a')`` for ``k = 0 .. n-1``, ``a' = 0 .. a-1``, then the query ``(S_n, A_n)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ictd_interp.tasks.prompt import build_prompt
from ictd_interp.tasks.sampling import TaskBatch


@dataclass(frozen=True)
class ActionColumns:
    """A prompt with action columns: ``next_columns[b, k, a']`` is the column of ``(S_{k+1}, a')`` for source
    ``k``, ``next_states[b, k] = S_{k+1}``."""

    prompt: Float[Tensor, "batch pos d_model"]
    n_sources: int
    n_actions: int
    next_columns: Int[Tensor, "batch source action"]
    next_states: Int[Tensor, "batch source"]

    @property
    def action_slice(self) -> slice:
        return slice(self.n_sources, self.n_sources * (1 + self.n_actions))


def action_column_prompt(tasks: TaskBatch, n_actions: int) -> ActionColumns:
    """``tasks`` (a context on a state-action chain, pair index ``s * n_actions + a``) with its action columns."""
    batch, pos = tasks.states.shape
    n = pos - 1
    next_states = tasks.states[:, 1:] // n_actions  # S_{k+1} for sources k = 0 .. n-1
    pairs = next_states[..., None] * n_actions + torch.arange(n_actions)  # [batch, n, a]
    features = torch.gather(tasks.features, 1, pairs.flatten(1)[..., None].expand(-1, -1, tasks.features.shape[-1]))
    x = torch.cat([tasks.x[:, :n], features, tasks.x[:, n:]], dim=1)
    rewards = torch.cat([tasks.rewards, torch.zeros(batch, n * n_actions, dtype=tasks.rewards.dtype)], dim=1)
    columns = n + torch.arange(n * n_actions).view(1, n, n_actions).expand(batch, -1, -1)
    return ActionColumns(build_prompt(x, rewards), n, n_actions, columns, next_states)
