"""Training batches: ``B`` fresh tasks, one trajectory of length ``n + W`` each, and all ``W + 1``
sliding-window prompts built at once (docs/theory.md §6), so the windows share one forward pass.

Window ``t`` is the prompt of ``S_t .. S_{t+n}``; its query is ``S_{t+n}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ictd_interp.config.registry import FAMILIES
from ictd_interp.config.tasks import TaskDistribution
from ictd_interp.models.stylised.state_space import window_counts
from ictd_interp.tasks.mdp import MDP
from ictd_interp.tasks.prompt import PromptLayout
from ictd_interp.tasks.sampling import TaskBatch, sample_from


@dataclass
class StateSpaceWindows:
    """The windows as the state-space forward reads them (``TrainConfig.forward = "state-space"``): each window's
    transition counts, each task's features and state rewards, each window's query state."""

    counts: Float[Tensor, "task window state next_state"]
    features: Float[Tensor, "task state d_feat"]
    rewards: Float[Tensor, "task state"]
    query_states: Int[Tensor, "task window"]

    def select_tasks(self, index: slice) -> "StateSpaceWindows":
        return StateSpaceWindows(*(t[index] for t in (self.counts, self.features, self.rewards, self.query_states)))

    def to(self, device: torch.device | str, dtype: torch.dtype) -> "StateSpaceWindows":
        move = lambda t: t.to(device=device, dtype=dtype)  # noqa: E731
        return StateSpaceWindows(
            move(self.counts), move(self.features), move(self.rewards), self.query_states.to(device)
        )


@dataclass
class WindowBatch:
    """Prompts ``[tasks * (W+1), n+1, d+3]`` (task-major) and per-window query quantities (a stack's batch,
    ``stack``: each with a leading model axis). A batch for the state-space forward carries ``space`` instead of
    prompts (None)."""

    prompts: Optional[Float[Tensor, "*model batch pos d_model"]]
    query_reward: Float[Tensor, "*model task window"]  # r(S_{t+n}) = R_{t+n+1}
    # v_pi(S_{t+n}) or q*, the supervised target (None: not drawn)
    query_value: Optional[Float[Tensor, "*model task window"]]
    query_return: Float[Tensor, "*model task window"]  # truncated discounted return from S_{t+n}
    n_windows: int
    # control families: the features of (S, a) for the query's state S and every action a (None: not drawn)
    action_queries: Optional[Float[Tensor, "*model action task window d_feat"]] = None
    space: Optional[StateSpaceWindows] = None

    def select_tasks(self, index: slice) -> "WindowBatch":
        """The windows of a subset of the tasks."""
        w = self.n_windows
        prompts = (
            None if self.prompts is None else self.prompts.view(-1, w, *self.prompts.shape[1:])[index].flatten(0, 1)
        )
        value = None if self.query_value is None else self.query_value[index]
        actions = None if self.action_queries is None else self.action_queries[:, index]
        space = None if self.space is None else self.space.select_tasks(index)
        return WindowBatch(prompts, self.query_reward[index], value, self.query_return[index], w, actions, space)

    def to(self, device: torch.device | str, dtype: torch.dtype) -> "WindowBatch":
        move = lambda t: None if t is None else t.to(device=device, dtype=dtype)  # noqa: E731
        return WindowBatch(
            move(self.prompts),
            move(self.query_reward),
            move(self.query_value),
            move(self.query_return),
            self.n_windows,
            move(self.action_queries),
            None if self.space is None else self.space.to(device, dtype),
        )

    def by_model(self, n_models: int) -> "WindowBatch":
        """The batch of ``n_models`` runs' tasks, drawn together run after run, as a stack's batch (a leading model
        axis; views, no copy): what ``stack`` makes of the runs' batches drawn apart."""
        if self.space is not None:
            raise ValueError("batches: a stack runs the positional fast path; state-space batches are not stacked")
        split = lambda t: None if t is None else t.view(n_models, -1, *t.shape[1:])  # noqa: E731
        actions = None if self.action_queries is None else self.action_queries.unflatten(1, (n_models, -1))
        return WindowBatch(
            split(self.prompts),
            split(self.query_reward),
            split(self.query_value),
            split(self.query_return),
            self.n_windows,
            None if actions is None else actions.transpose(0, 1),
        )

    @classmethod
    def stack(cls, batches: list["WindowBatch"]) -> "WindowBatch":
        """One batch per model, stacked on a leading model axis (``prompts [model, batch, pos, d_model]``, the
        per-window quantities ``[model, task, window]``): a ``ModelStack``'s batch."""
        both = lambda name: [getattr(b, name) for b in batches]  # noqa: E731
        stacked = lambda name: None if both(name)[0] is None else torch.stack(both(name))  # noqa: E731
        if any(b.space is not None for b in batches):
            raise ValueError("batches: a stack runs the positional fast path; state-space batches are not stacked")
        if len({b.n_windows for b in batches}) != 1 or len({b.prompts.shape for b in batches}) != 1:
            raise ValueError("batches: a stack's batches must share their shape (tasks, windows, context)")
        return cls(
            stacked("prompts"),
            stacked("query_reward"),
            stacked("query_value"),
            stacked("query_return"),
            batches[0].n_windows,
            stacked("action_queries"),
        )

    def with_query(
        self, features: Float[Tensor, "*model alt task window d_feat"]
    ) -> Float[Tensor, "*model alt_batch pos d_model"]:
        """The prompts with each window's query features replaced by ``features`` (one copy of every prompt per
        ``alt`` index, stacked along the batch): the prompt the model would read had the behaviour taken another
        action at the query's state (the context's columns are unchanged; its last transition's bootstrap then
        reads the new query: docs/theory.md §6)."""
        lead = self.prompts.ndim - 3  # 1 for a stacked batch
        copies = features.shape[lead:-3].numel()
        prompts = self.prompts.repeat(*[1] * lead, copies, 1, 1)
        prompts[..., -1, PromptLayout(features.shape[-1]).features] = features.reshape(
            *features.shape[:lead], -1, features.shape[-1]
        ).to(prompts.dtype)
        return prompts


def prompt_rows(tasks: TaskBatch) -> Float[Tensor, "task time d_model"]:
    """Every trajectory position's prompt row ``(x(S_j), r(S_j), 0, 0)`` (the ``build_prompt`` layout of a
    context position), read by one gather from a table of each state's row."""
    features, n_tasks = tasks.features, len(tasks)
    table = torch.cat(
        [
            features.expand(n_tasks, -1, -1),
            tasks.mrp.r.expand(n_tasks, -1).unsqueeze(-1),
            features.new_zeros(n_tasks, features.shape[-2], 2),
        ],
        dim=-1,
    )  # [task, state, d+3]
    return torch.gather(table, 1, tasks.states.unsqueeze(-1).expand(-1, -1, table.shape[-1]))


def sliding_windows(
    rows: Float[Tensor, "task time d_model"], n: int, dtype: Optional[torch.dtype] = None
) -> Float[Tensor, "batch pos d_model"]:
    """Every window of ``n + 1`` consecutive prompt rows, as prompts (the query's reward set to 0), written
    by one copy into one buffer: a window is a contiguous block of ``rows``, so building each window's
    prompt separately would copy every row ``n + 1`` times. ``dtype``: the buffer's (the entries are
    copied values, so writing them into a float32 buffer rounds them exactly as converting a float64
    prompt would)."""
    n_tasks, length, width = rows.shape
    prompts = rows.new_empty(n_tasks, length - n, n + 1, width, dtype=dtype or rows.dtype)
    prompts.copy_(rows.unfold(1, n + 1, 1).transpose(-1, -2))  # [task, window, n+1, d+3]
    prompts[:, :, n, PromptLayout(width - 3).reward] = 0.0
    return prompts.flatten(0, 1)


def discounted_returns(rewards: Float[Tensor, "task time"], gamma: float, horizon: int) -> Float[Tensor, "task window"]:
    """``sum_{h < H} gamma^h R_{t+1+h}`` for every start ``t`` that has ``H`` rewards after it."""
    discounts = gamma ** torch.arange(horizon, dtype=rewards.dtype, device=rewards.device)
    return rewards.unfold(1, horizon, 1) @ discounts


def window_batch(
    dist: TaskDistribution,
    n_tasks: int,
    n_windows: int,
    *,
    generator: torch.Generator,
    mc_horizon: int = 0,
    dtype: Optional[torch.dtype] = None,
    with_values: bool = True,
    values: str = "v_pi",
    action_queries: bool = False,
    state_space: bool = False,
) -> WindowBatch:
    """Draw a training batch from ``dist`` (windows of ``dist.context_len`` transitions); ``mc_horizon > 0``
    extends the trajectories for Monte-Carlo returns; ``dtype`` builds the prompts in that dtype (the
    per-window quantities stay float64 until ``to``); ``with_values=False`` skips the query's true value (a linear
    solve per task, ~12 % of a batch; the draws are the same either way), ``values`` names it: ``v_pi`` (of the
    trajectory's chain) or, for a control family, ``q_star``; ``action_queries`` adds each action's query
    features (control families)."""
    tasks = sample_from(dist, n_tasks, generator=generator, length=dist.context_len + n_windows - 1 + mc_horizon)
    return windows_from_tasks(
        tasks, dist, n_windows, mc_horizon, dtype, with_values, values, action_queries, state_space=state_space
    )


def windows_from_tasks(
    tasks: TaskBatch,
    dist: TaskDistribution,
    n_windows: int,
    mc_horizon: int,
    dtype: Optional[torch.dtype],
    with_values: bool,
    values: str = "v_pi",
    action_queries: bool = False,
    reward_order: Optional[Tensor] = None,
    state_space: bool = False,
) -> WindowBatch:
    """``window_batch`` on tasks already drawn (row-wise: the windows of a subset of the tasks are that
    subset's windows). ``reward_order [task, n + n_windows]``: each trajectory's rewards permuted in time by it
    before the windows are cut (a null: a reward then says nothing about its state; ``TrainConfig.shuffle_rewards``).
    ``state_space``: the windows as transition counts (``StateSpaceWindows``), no prompts."""
    n, gamma = dist.context_len, dist.gamma
    query_states = tasks.states[:, n : n + n_windows]
    if (values == "q_star" or action_queries) and dist.n_actions is None:
        controls = [f.name for f in FAMILIES.values() if f.control]
        raise ValueError(
            f"family: {dist.family!r} is no control family ({', '.join(controls)}): its windows have no action values"
        )
    reward_of = lambda s: torch.gather(tasks.mrp.r, 1, s)  # noqa: E731
    returns = (
        discounted_returns(reward_of(tasks.states[:, n:-1]), gamma, mc_horizon)[:, :n_windows]
        if mc_horizon > 0
        else torch.zeros_like(query_states, dtype=torch.float64)
    )
    rows = prompt_rows(TaskBatch(tasks.mrp, tasks.features, tasks.states[:, : n + n_windows]))
    if reward_order is not None:
        reward = PromptLayout(dist.d_features).reward
        rows[..., reward] = torch.gather(rows[..., reward], 1, reward_order)
    space = None
    if state_space:
        counts = window_counts(tasks.states[:, : n + n_windows], tasks.mrp.n_states, n, n_windows)
        r = tasks.mrp.r.expand(len(tasks), -1)
        space = StateSpaceWindows(counts, tasks.features.expand(len(tasks), -1, -1), r, query_states)
    return WindowBatch(
        prompts=None if state_space else sliding_windows(rows, n, dtype),
        query_reward=rows[:, n:, PromptLayout(dist.d_features).reward],
        query_value=torch.gather(_true_values(tasks, dist, values), 1, query_states) if with_values else None,
        query_return=returns,
        n_windows=n_windows,
        action_queries=_action_queries(tasks, dist.n_actions, query_states) if action_queries else None,
        space=space,
    )


def _true_values(tasks: TaskBatch, dist: TaskDistribution, values: str) -> Float[Tensor, "task pair"]:
    """Every state's (or state-action pair's) true value: ``v_pi`` of the chain, or ``q*`` of the control task's
    MDP (recovered from its pair chain, then value iteration: ``MDP.q_star``)."""
    if values == "v_pi":
        return tasks.mrp.v_pi
    if values != "q_star":
        raise ValueError(f"values: must be 'v_pi' or 'q_star', got {values!r}")
    return MDP.from_pair_mrp(tasks.mrp, dist.n_actions).q_star().flatten(-2)


def _action_queries(tasks: TaskBatch, n_actions: int, query_pairs: Tensor) -> Float[Tensor, "action task window d"]:
    """The features of ``(S, a)`` for every action ``a``, ``S`` the state of each window's query pair."""
    actions = torch.arange(n_actions, device=query_pairs.device)[:, None, None]
    pairs = (query_pairs // n_actions)[None] * n_actions + actions  # [action, task, window]
    return tasks.features.expand(len(tasks), -1, -1)[torch.arange(len(tasks), device=pairs.device)[:, None], pairs]
