"""Activation patching for continuous prompts (TransformerLens's helpers assume tokens).

For each hook name, one batched forward: the corrupted prompt repeated once per patched position,
copy ``p`` receiving the clean activation at position ``p`` only. Returns a tidy table.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import Any, Optional

import pandas as pd
import torch
from torch import Tensor
from transformer_lens.hook_points import HookPoint

from ictd_interp.models.hook_names import get_act_name
from ictd_interp.models.patching_guard import token_patching_allowed
from ictd_interp.models.registry import HookedModel


def query_prediction(values: Tensor) -> Tensor:
    """Default metric: the query's predicted value, one number per prompt."""
    return values[:, -1]


def _position_axis(name: str) -> int:
    """Patterns and scores index positions by query (axis 2); everything else by axis 1."""
    return 2 if name.endswith(("hook_pattern", "hook_attn_scores")) else 1


def _patch_hook(clean: Tensor, positions: Sequence[int], axis: int, rows: Optional[Sequence[int]]) -> Callable:
    def hook(act: Tensor, hook: HookPoint) -> Tensor:
        batch = clean.shape[0]
        act = act.clone().view(len(positions), batch, *act.shape[1:])
        for k, p in enumerate(positions):
            index = [k, slice(None)] + [slice(None)] * (axis - 1) + [p]
            if rows is None:
                act[tuple(index)] = clean.select(axis, p)
            else:
                act[tuple(index) + (..., list(rows))] = clean.select(axis, p)[..., list(rows)]
        return act.view(-1, *act.shape[2:])

    return hook


@torch.no_grad()
def activation_patching(
    model: HookedModel,
    clean: Tensor,
    corrupted: Tensor,
    hook_names: Optional[Sequence[str]] = None,
    positions: Optional[Sequence[int]] = None,
    rows: Optional[Sequence[int]] = None,
    metric: Callable[[Tensor], Tensor] = query_prediction,
) -> pd.DataFrame:
    """Patch clean activations into the corrupted run, hook by hook and position by position.

    ``rows`` restricts the patch to some residual coordinates (e.g. the reward row). ``positions``
    (default: every position of each hook's own activation: the residual stream's columns, which for the
    linear model are ``2n + 1``, not the prompt's ``n + 1``). Columns of the table: ``hook``, ``layer`` (-1
    for ``hook_prompt``), ``position``, ``role`` (what that residual column holds, where the hook is on the
    residual stream's positions), ``value`` (metric mean over the batch), ``recovered``
    (``(value - corrupted) / (clean - corrupted)``).
    """
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean/corrupted: shapes differ {tuple(clean.shape)} vs {tuple(corrupted.shape)}")
    _, clean_cache = model.run_with_cache(clean)
    clean_metric, corrupt_metric = metric(model(clean)).mean().item(), metric(model(corrupted)).mean().item()
    if clean_metric == corrupt_metric:
        warnings.warn(
            f"activation_patching: clean and corrupted give the same metric ({clean_metric:.6g}), so 'recovered' "
            "is undefined (NaN) in every row; choose a corruption that changes the metric",
            stacklevel=2,
        )
    names = list(model.hook_dict) if hook_names is None else list(hook_names)
    chosen, records = positions, []
    for name in names:
        axis = _position_axis(name)
        size = clean_cache[name].shape[axis]
        positions = list(range(size)) if chosen is None else list(chosen)
        labels = _labels(model, clean.shape[1], size)
        hook = _patch_hook(clean_cache[name], positions, axis, rows)
        repeated = corrupted.repeat(len(positions), 1, 1)
        values = model.run_with_hooks(repeated, fwd_hooks=[(name, hook)])
        per_position = metric(values).view(len(positions), -1).mean(-1)
        layer = model.hook_dict[name].layer() if name.startswith("blocks.") else -1
        for p, v in zip(positions, per_position.tolist()):
            gap = clean_metric - corrupt_metric
            records.append(
                {
                    "hook": name,
                    "layer": layer,
                    "position": p,
                    "role": labels[p] if labels else "",
                    "value": v,
                    "recovered": (v - corrupt_metric) / gap if gap != 0 else float("nan"),
                }
            )
    return pd.DataFrame.from_records(records)


def _labels(model: HookedModel, n_prompt: int, size: int) -> Optional[list[str]]:
    labels = model.residual_position_labels(n_prompt)
    return labels if len(labels) == size else None  # a hook on other positions (the prompt itself)


# TransformerLens's stacked sweeps (3.9 and 4.x): each is its parts, in order, stacked on a leading patch-type axis;
# an attention pattern's sweep indexes (layer, head, dest_pos), moved to (layer, pos, head) as TransformerLens does
EVERY = {
    "get_act_patch_block_every": ("get_act_patch_resid_pre", "get_act_patch_attn_out", "get_act_patch_mlp_out"),
    "get_act_patch_attn_head_all_pos_every": tuple(
        f"get_act_patch_attn_head_{part}_all_pos" for part in ("out", "q", "k", "v", "pattern")
    ),
    "get_act_patch_attn_head_by_pos_every": tuple(
        f"get_act_patch_attn_head_{part}_by_pos" for part in ("out", "q", "k", "v", "pattern")
    ),
}


def _every(
    name: str,
    model: HookedModel,
    corrupted: Tensor,
    clean_cache,
    metric: Callable[[Tensor], Tensor],
    results_dtype: Optional[torch.dtype],
    **kwargs,
) -> Tensor:
    """A stacked sweep run part by part through ``tl_patching``: ``[patch_type, *axes]``."""
    from transformer_lens import patching

    if kwargs:
        raise ValueError(
            f"{', '.join(sorted(kwargs))}: {name} is run part by part here; pass reduce/baseline to "
            f"its parts ({', '.join(EVERY[name])}) instead"
        )
    for part in EVERY[name]:
        _check_hook(getattr(patching, part), name, model)
    parts = [
        tl_patching(getattr(patching, part), model, corrupted, clean_cache, metric, results_dtype)
        for part in EVERY[name]
    ]
    if name.endswith("by_pos_every"):
        parts[-1] = parts[-1].permute(0, 2, 1)  # pattern: [layer, head, dest_pos] -> [layer, pos, head]
    return torch.stack(parts)


def _check_hook(patch_fn: Callable, name: str, model: HookedModel) -> None:
    """A sweep over an activation the model does not have (the linear model has no MLP, so no ``mlp_out`` or
    ``resid_mid``) is refused naming the sweep and the missing hook, before it runs."""
    activation = getattr(patch_fn, "keywords", {}).get("activation_name")
    hook = activation and get_act_name(activation, 0)
    if hook and hook not in model.hook_dict:
        raise ValueError(
            f"{name}: {type(model).__name__} has no hook {hook} (no {activation} activation)"
            + (f", which its part {_sweep_name(patch_fn)} patches" if name in EVERY else "")
            + "; sweep the activations it has instead"
        )


def _sweep_name(patch_fn: Callable) -> str:
    """The ``get_act_patch_*`` name TransformerLens gives a partial (partials carry no ``__name__``)."""
    from transformer_lens import patching

    return next((n for n, f in vars(patching).items() if f is patch_fn), "")


def _index_axes(
    patch_fn: Callable, name: str, model: HookedModel, clean_cache, kwargs: dict
) -> tuple[list[str], list[int]]:
    """The sweep's index axes and their sizes on this model, once ``patch_fn`` is known to be one of
    TransformerLens's sweeps and every option in ``kwargs`` one it takes."""
    if not hasattr(patch_fn, "keywords") or "index_axis_names" not in patch_fn.keywords:
        raise ValueError(
            f"patch_fn: {name or repr(patch_fn)} is not one of TransformerLens's sweeps over index axes "
            f"(get_act_patch_* partials) or their stacks ({', '.join(EVERY)}); the direct-path "
            "functions patch one source-to-destination path with their own arguments: call them on "
            "the model yourself"
        )
    _check_hook(patch_fn, name, model)
    accepted = inspect.signature(getattr(patch_fn, "func", patch_fn)).parameters
    if unknown := sorted(set(kwargs) - set(accepted)):
        raise ValueError(
            f"{', '.join(unknown)}: not an option of TransformerLens {version('transformer-lens')}'s "
            "patching functions (reduce and baseline came with TransformerLens 4)"
        )
    axes = list(patch_fn.keywords["index_axis_names"])
    n_resid = clean_cache["blocks.0.hook_resid_pre"].shape[1]  # residual columns (linear model: 2n + 1)
    sizes = {
        "layer": model.cfg.n_layers,
        "pos": n_resid,
        "src_pos": n_resid,
        "dest_pos": n_resid,
        "head": model.cfg.n_heads,
        "head_index": model.cfg.n_heads,
    }
    unknown = [a for a in axes if a not in sizes]
    if unknown:
        raise ValueError(f"patch_fn: unsupported index axes {unknown}")
    return axes, [sizes[a] for a in axes]


def tl_patching(
    patch_fn: Callable,
    model: HookedModel,
    corrupted: Tensor,
    clean_cache,
    metric: Callable[[Tensor], Tensor],
    results_dtype: Optional[torch.dtype] = None,
    **kwargs,
) -> Any:
    """Run one of TransformerLens's ``patching.get_act_patch_*`` functions on our model.

    TransformerLens infers the position axis from the input's *last* dimension (token ids
    ``[batch, pos]``); our prompts are ``[batch, pos, d_model]``, so this builds ``index_df`` from
    the residual stream's position axis (its columns: ``2n + 1`` for the linear model) and returns the table shaped by
    its axes, e.g. ``[layer, pos]``;
    TransformerLens stores the metric in torch's default dtype: ``results_dtype=torch.float64`` makes that
    the default for the duration of the call (process-wide, restored after it; nothing changes unasked). With
    ``reduce="none"`` (TransformerLens 4) a ``PatchingResult`` whose ``values`` are ``[*axes, batch]``.
    Calling ``patch_fn`` on the model directly raises (it would read ``d_model`` as the position count)::

        from transformer_lens import patching
        table = tl_patching(patching.get_act_patch_resid_pre, model, corrupted, clean_cache,
                            lambda values: values[:, -1].mean())
    """
    from transformer_lens.patching import make_df_from_ranges

    name = getattr(patch_fn, "__name__", "") or _sweep_name(patch_fn)
    if name in EVERY:
        return _every(name, model, corrupted, clean_cache, metric, results_dtype, **kwargs)
    axes, shape = _index_axes(patch_fn, name, model, clean_cache, kwargs)
    previous = torch.get_default_dtype()
    if results_dtype is not None:
        torch.set_default_dtype(results_dtype)
    try:
        with token_patching_allowed():
            flat = patch_fn(
                model,
                corrupted,
                clean_cache,
                metric,
                index_axis_names=None,
                index_df=make_df_from_ranges(shape, axes),
                **kwargs,
            )
    finally:
        torch.set_default_dtype(previous)
    if isinstance(flat, Tensor):
        return flat.view(*shape)
    # TransformerLens 4's PatchingResult (reduce="none", baseline=True or several metrics): the same
    # cells, with the flat row axis unfolded into the named axes
    lead = 1 if flat.has_metric_axis else 0
    values = flat.values.reshape(*flat.values.shape[:lead], *shape, *flat.values.shape[lead + 1 :])
    return dataclasses.replace(flat, values=values, axis_names=axes)
