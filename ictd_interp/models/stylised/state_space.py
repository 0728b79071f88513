"""The exact state-space forward of a stylised layer (TSM form, paper mask, softmax attention).

Under the paper mask the score of source ``i`` for target ``j`` is ``g(S_j, S_i) = x(S_i)^T A_ff x(S_j)``
(features only; ``g(target, source)`` as in docs/theory.md §5) and the value written by source ``i`` is
``w . z_i`` with ``w = V[current, :]`` and ``z_i = (x(S_i), r(S_i), gamma v(S_{i+1}), v(S_i))``: it depends on
the transition ``(S_i, S_{i+1})`` alone. So, by induction over layers, every position's value is a function of its
state, and the context enters only through its transition counts ``N[s', s''] = #{i < n : S_i = s', S_{i+1} = s''}``
and ``c(s') = sum_s'' N[s', s'']``. Grouping the sources by state,

    dv(s) = sum_s' Ebar(s, s') y(s'),   Ebar(s, s') = exp(g(s, s')) / sum_u c(u) exp(g(s, u)),
    y(s') = c(s') (w_x . x(s') + w_R r(s') + w_cur v(s')) + gamma w_tar sum_s'' N[s', s''] v(s''),

the layer's whole update on the ``s`` state values: ``s^2`` work per task and layer whatever ``n`` is,
once the context is counted. The query column is a target like any other position in its state (its own
reward and target rows are never read: it is no source), so the prediction is ``v_L(S_n)``.

The dual-head form (its target row is a second learned state variable), the full mask (scores read the
value rows) and linear attention are not covered: ``state_space_unavailable`` says why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import torch
from einops import einsum
from jaxtyping import Float, Int
from torch import Tensor

from ictd_interp.config.stylised import ICTDConfig


def state_space_unavailable(cfg: ICTDConfig) -> Optional[str]:
    """Why a stylised layer is not a fixed linear map of the state values, so that neither this forward nor
    an exact read of its TD coefficients from the weights applies (None: both do)."""
    if cfg.form != "tsm":
        return "dual-head form: its target row is a second state variable written by a learned head"
    if cfg.attention != "softmax":
        return "linear attention: the kernel is no softmax"
    if cfg.mask != "paper":
        return "full mask: A reads the value rows (the kernel changes with the values) and V writes every row"
    return None


def transition_counts(
    states: Int[Tensor, "batch pos"], n_states: int, dtype=torch.float64
) -> Float[Tensor, "batch state next_state"]:
    """``N[s', s'']``: the context's transitions ``S_i -> S_{i+1}`` (sources ``i < n``) counted."""
    flat = states[:, :-1] * n_states + states[:, 1:]
    counts = torch.zeros(states.shape[0], n_states * n_states, dtype=dtype, device=states.device)
    counts.scatter_add_(1, flat, torch.ones_like(flat, dtype=dtype))
    return counts.view(-1, n_states, n_states)


def window_counts(
    states: Int[Tensor, "batch time"], n_states: int, context_len: int, n_windows: int
) -> Float[Tensor, "batch window state next_state"]:
    """Transition counts of every sliding window ``S_t .. S_{t+n}`` (``t < n_windows``): the first window's
    counted, each next one by removing transition ``t`` and adding transition ``t + n`` (exact: integers)."""
    flat = (states[:, :-1] * n_states + states[:, 1:]).long()  # [batch, time - 1]
    first = transition_counts(states[:, : context_len + 1], n_states).flatten(1)
    windows, rows = [first], torch.arange(states.shape[0], device=states.device)
    for t in range(1, n_windows):
        nxt = windows[-1].clone()
        nxt[rows, flat[:, t - 1]] -= 1.0
        nxt[rows, flat[:, t + context_len - 1]] += 1.0
        windows.append(nxt)
    return torch.stack(windows, 1).view(states.shape[0], n_windows, n_states, n_states)


def grouped_kernel(
    A_ff: Float[Tensor, "#task d_feat d_feat"],
    X: Float[Tensor, "task state d_feat"],
    counts: Float[Tensor, "task *window state"],
) -> Float[Tensor, "task *window state state"]:
    """``Ebar[s, s']`` of the module docstring (target ``s``, source state ``s'``): the largest score over the
    source states is subtracted first and states that are never sources get weight exactly 0 (their score is
    never exponentiated), so large inverse temperatures neither overflow nor turn ``inf * 0`` into NaN."""
    scores = einsum(X, A_ff, X, "t u d, t d e, t s e -> t s u")  # g(s, u) = x(u)^T A x(s)
    while scores.ndim < counts.ndim + 1:
        scores = scores.unsqueeze(1)
    is_source = (counts > 0).unsqueeze(-2)  # [task, *window, 1, source state]
    top = scores.masked_fill(~is_source, float("-inf")).amax(-1, keepdim=True)
    weights = torch.exp((scores - top).masked_fill(~is_source, float("-inf")))
    return weights / (weights * counts.unsqueeze(-2)).sum(-1, keepdim=True)


def layer_parts(
    A_ff: Float[Tensor, "#task d_feat d_feat"],
    w: Float[Tensor, "#task d_model"],
    X: Float[Tensor, "task state d_feat"],
    r: Float[Tensor, "task state"],
    N: Float[Tensor, "task *window state next_state"],
    gamma: float,
) -> tuple[Float[Tensor, "task *window state state"], Float[Tensor, "task *window state"], Tensor]:
    """One layer's pieces, ``v <- v + Ebar (y0 + F v)``: the grouped kernel ``Ebar`` (target, source state), the
    drive ``y0 = c (X w_x + w_R r)`` and ``F = diag(c) w_cur + gamma w_tar N`` (rows: the source states)."""
    d = X.shape[-1]
    c = N.sum(-1)  # [task, *window, state]
    drive = einsum(X, w[:, :d], "t s d, t d -> t s") + w[:, d, None] * r  # [task, state]
    while drive.ndim < c.ndim:
        drive = drive.unsqueeze(1)
    w_tar, w_cur = (w[:, k].reshape(-1, *[1] * c.ndim) for k in (d + 1, d + 2))  # broadcast over the rest
    F = torch.diag_embed(c) * w_cur + gamma * w_tar * N  # [task, *window, source state, next state]
    return grouped_kernel(A_ff, X, c), c * drive, F


def state_space_forward(
    A_ff: Float[Tensor, "#task unique d_feat d_feat"],
    w: Float[Tensor, "#task unique d_model"],
    X: Float[Tensor, "task state d_feat"],
    r: Float[Tensor, "task state"],
    N: Float[Tensor, "task window state next_state"],
    gamma: float,
    depth: int,
    on_layer: Optional[Callable[[int, Tensor], None]] = None,
) -> Float[Tensor, "task window state"]:
    """The state values after ``depth`` layers (layer ``l`` uses weights ``min(l, unique - 1)``: a tied
    model has one, a per-layer model repeats its last layer beyond its trained depth). ``A_ff`` and ``w``
    may have a task axis of size 1 (shared weights) or of one per task (per-task copies, whose gradients
    are then each task's own: ``ictd_interp.analyses.metrics.neu``). One batched matrix-vector product per layer;
    ``on_layer(layer, v)`` sees the values after each layer."""
    v = N.new_zeros(N.shape[:-1])
    maps = {}
    for layer in range(depth):
        u = min(layer, A_ff.shape[1] - 1)
        if u not in maps:
            kernel, y0, F = layer_parts(A_ff[:, u], w[:, u], X, r, N, gamma)
            maps[u] = kernel @ F, einsum(kernel, y0, "t w s u, t w u -> t w s")  # v <- v + G v + b
        G, b = maps[u]
        v = v + (G @ v.unsqueeze(-1)).squeeze(-1) + b
        if on_layer is not None:
            on_layer(layer, v)
    return v


def state_values_on_tasks(
    A_ff: Float[Tensor, "#task unique d_feat d_feat"],
    w: Float[Tensor, "#task unique d_model"],
    tasks,
    gamma: float,
    depth: int,
    on_layer: Optional[Callable[[int, Tensor], None]] = None,
) -> Float[Tensor, "task state"]:
    """``state_space_forward`` on a ``TaskBatch``'s own contexts (its trajectories' transition counts), float64 on
    the CPU: each task's state values after ``depth`` layers."""
    states = tasks.states.cpu()
    counts = transition_counts(states, tasks.mrp.n_states).unsqueeze(1)
    features, rewards = tasks.features.double().cpu(), tasks.mrp.r.double().cpu()
    return state_space_forward(A_ff, w, features, rewards, counts, gamma, depth, on_layer=on_layer)[:, 0]


def free_entries(model) -> tuple[Float[Tensor, "1 unique d_feat d_feat"], Float[Tensor, "1 unique d_model"]]:
    """The model's free entries (the feature block of ``A``, the current row of ``V``), differentiable, with a
    task axis of size 1."""
    d, current = model.cfg.d_features, model.layout.current
    attns = model.unique_attention()
    A = torch.stack([a.A[0, :d, :d] for a in attns]).unsqueeze(0)  # [1, unique, d, d]
    w = torch.stack([a.V[0, current] for a in attns]).unsqueeze(0)  # [1, unique, d_model]
    return A, w


def window_query_values(model, space, depth: int) -> Float[Tensor, "task window"]:
    """The query prediction of every training window (``StateSpaceWindows``) after ``depth`` layers, differentiable
    in the model's free entries: the positional fast path's query values, computed on the windows' transition
    counts (``TrainConfig.forward = "state-space"``)."""
    A, w = free_entries(model)
    v = state_space_forward(A, w, space.features, space.rewards, space.counts, model.cfg.gamma, depth)
    return torch.gather(v, 2, space.query_states.unsqueeze(-1)).squeeze(-1)


def moving_radius(
    kernel: Float[Tensor, "task state state"], F: Float[Tensor, "task state state"], source: Tensor
) -> Float[Tensor, "task"]:
    """The spectral radius of the part of a layer's map that moves, ``H = I + F Ebar`` on each task's source states
    (``source [task, state]``): ``v <- v + Ebar (y0 + F v)`` moves the values along ``Ebar``'s columns alone, by
    ``z <- H z + ...`` in the sources' coordinates, so iterating the layer converges iff this radius is below 1 and
    at its rate (a state that is never a source only adds eigenvalue 1 on a direction that never moves).
    ``max |eig|`` of the source block, batched (the other rows and columns zeroed: eigenvalue 0), the eigenvalues in
    float64 (``F Ebar`` in the inputs' dtype), differentiable; ``analyses.metrics.depth_limit`` reads its limits'
    radii here."""
    m = source.double()
    H = torch.eye(F.shape[-1], dtype=torch.float64, device=F.device) + (F @ kernel).double()
    H = H * m.unsqueeze(-1) * m.unsqueeze(-2)
    return torch.linalg.eigvals(H).abs().amax(-1).to(F.dtype)


def window_value_map_radius(model, space) -> Float[Tensor, "task"]:
    """``moving_radius`` of a tied model's layer on each task's first training window
    (``TrainConfig.spectral_penalty``)."""
    A, w = free_entries(model)
    if A.shape[1] != 1:
        raise ValueError(f"value map radius: one tied layer's map, the model has {A.shape[1]} unique layers")
    N = space.counts[:, 0]
    kernel, _, F = layer_parts(A[:, 0], w[:, 0], space.features, space.rewards, N, model.cfg.gamma)
    return moving_radius(kernel, F, N.sum(-1) > 0)


def model_weights(model) -> tuple[Float[Tensor, "1 unique d_feat d_feat"], Float[Tensor, "1 unique d_model"]]:
    """A stylised model's free entries (feature block of ``A``, current row of ``V``) as float64 leaves
    with a task axis of size 1."""
    reason = state_space_unavailable(model.cfg)
    if reason is not None:
        raise ValueError(f"state-space forward: not available for this model ({reason})")
    frozen = model.nonzero_frozen()  # the forward reads the free entries alone
    if frozen:
        raise ValueError(
            f"state-space forward: {frozen[0]} has nonzero entries that the paper mask freezes at 0 "
            "(training and checkpoint loading keep them 0); the positional forward reads them, this "
            "one would not: zero them (multiply by the block's mask_A / mask_V) or run the model"
        )
    return tuple(t.detach().double().cpu() for t in free_entries(model))


def positional_state_values(model, tasks, depth: int, every_layer: bool = False) -> Float[Tensor, "*layer batch pos"]:
    """``HookedICTDTransformer.state_space_values``: the values at every position of ``tasks`` after ``depth``
    layers (``every_layer``: after each, ``[layer, batch, pos]``), float64 on the CPU; the hooks attached to
    the model fire from them (``state_space_hooks``)."""
    from ictd_interp.models.stylised.state_space_hooks import state_space_hooks

    if not isinstance(depth, int) or depth < 0:
        raise ValueError(f"depth: layers to run must be an integer >= 0, got {depth!r}")
    _check_tasks(model.cfg.d_features, tasks)
    hooks = state_space_hooks(model, tasks, depth)
    A, w = model_weights(model)
    states = tasks.states.cpu()
    layers: list[Tensor] = []

    def gathered(layer: int, v: Tensor) -> None:  # per position after each layer: for hooks and every_layer only
        now = torch.gather(v[:, 0], 1, states)
        if hooks is not None:
            hooks.layer(layer, now)
        if every_layer:
            layers.append(now)

    if hooks is not None:
        hooks.start()
    on_layer = None if hooks is None and not every_layer else gathered
    v = state_values_on_tasks(A, w, tasks, model.cfg.gamma, depth, on_layer)
    if every_layer:
        return torch.stack(layers) if layers else torch.zeros(0, *states.shape, dtype=torch.float64)
    return torch.gather(v, 1, states)  # depth 0: v_0 = 0


def _check_tasks(d_features: int, tasks) -> None:
    """A ``TaskBatch``'s shapes as this forward reads them, each error naming the field."""
    batch, n_states = tasks.states.shape[0], tasks.mrp.n_states
    if tuple(tasks.features.shape) != (batch, n_states, d_features):
        raise ValueError(
            f"tasks.features: expected [batch, state, d_features] = {(batch, n_states, d_features)} "
            f"(one feature table per task, the model's d_features), got {tuple(tasks.features.shape)}"
        )
    if tuple(tasks.mrp.r.shape) != (batch, n_states):
        raise ValueError(
            f"tasks.mrp.r: expected [batch, state] = {(batch, n_states)} (one MRP per task), "
            f"got {tuple(tasks.mrp.r.shape)}"
        )
