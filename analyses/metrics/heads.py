"""Which heads look like the TD circuit? Per-head kernels and update signatures (docs/theory.md §10),
for any architecture.

* **Kernel.** A head's pattern over the context sources ``[query_pos, key_pos < n]`` is compared
  with the softmax-TD kernel ``K[j, i] = softmax_i <x(S_i), x(S_j)>`` (θ*'s own pattern) and with
  the tabular kernel (even weight on the sources in the target's own state, the sharp limit a
  model that recognises states can reach): Pearson correlation over every task, target and source,
  and the kernel diagonality (attention mass a target puts on sources in its own state).
* **Signature.** θ*'s head writes ``delta = R + gamma v(next) - v(current)`` into the value: the
  (+, +, -) signature. In general, perturb the head's input (``blocks.{l}.hook_resid_pre`` at every
  context column) along a direction that raises the reward, the next value or the current value by
  one, and measure how the head's output moves the value read at the layer's output
  (``readout . result``, summed over positions, averaged over tasks): three directional derivatives,
  normalised by the reward's magnitude. The directions and read-out are given (e.g. θ*'s rows) or
  come from the probes of ``ictd_interp.analyses.metrics.site_probes``. A head's output may reach the value only through
  a later MLP, so the **layer signature** also measures the whole layer's update of the probed value
  (``readout_out . resid_post - readout_in . resid_pre``), MLPs and all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.analyses.metrics.algorithm_id import MAX_CONDITION
from ictd_interp.analyses.metrics.site_probes import LinearProbes
from ictd_interp.models.hook_names import get_act_name
from ictd_interp.models.registry import HookedModel
from ictd_interp.models.stylised.theta_star import SIGNATURE_SIGNS
from ictd_interp.reference.metrics import cosine, kernel_diagonality, query_rows
from ictd_interp.reference.td import same_state_kernel, softmax_kernel
from ictd_interp.tasks.sampling import TaskBatch


@dataclass
class HeadKernel:
    """One head's attention against the kernels (``head_kernels``): its correlation with θ*'s softmax-TD kernel
    and with the tabular same-state kernel, and its diagonality."""

    layer: int
    head: int
    td_kernel_correlation: float
    tabular_kernel_correlation: Optional[float] = None
    diagonality: Optional[float] = None


@dataclass(kw_only=True)  # fields in summary.json's order
class Signature:
    """A head's direct effect (``head`` set) or a layer's whole update (``head`` None) on the probed value, as
    (reward, next value, current value) weights: ``raw``, ``normalised`` by the reward's, and whether TD's signs."""

    layer: int
    head: Optional[int] = None
    raw: list[Optional[float]]
    normalised: list[Optional[float]]
    matches_td: bool


SIGNATURE = ("reward", "v_next", "v_current")  # value_probes' quantity names, in SIGNATURE_INPUTS' order


def td_kernel(tasks: TaskBatch) -> Float[Tensor, "batch query_pos key_pos"]:
    """θ*'s pattern: ``softmax_i <x(S_i), x(S_j)>`` over the sources ``i < n``, for every target ``j``."""
    return softmax_kernel(tasks.x.double()).transpose(1, 2)


def tabular_kernel(tasks: TaskBatch) -> Float[Tensor, "batch query_pos key_pos"]:
    """The same-state kernel (tabular TD's, ``td.same_state_kernel``) as a pattern ``[target, source]``."""
    return same_state_kernel(tasks.states).transpose(1, 2)


def most_like(rows: list[HeadKernel]) -> dict[str, float]:
    """The highest correlation any head reaches with each reference kernel (study tables)."""
    return {
        "max_td_kernel_correlation": max(r.td_kernel_correlation for r in rows),
        "max_tabular_kernel_correlation": max(r.tabular_kernel_correlation for r in rows),
    }


def correlation(a: Tensor, b: Tensor) -> float:
    """Pearson correlation of two tensors' entries: the cosine of the centred entries (0 when either is
    constant)."""
    return cosine(a.double() - a.double().mean(), b.double() - b.double().mean())


@torch.no_grad()
def head_kernels(model: HookedModel, tasks: TaskBatch) -> list[HeadKernel]:
    """Per layer and head: correlation with the softmax-TD kernel (θ*'s) and with the tabular
    same-state kernel, and kernel diagonality. A model whose layer is unchanged by a sign flip of its
    pattern (the linear model with the identity activation) is read through ``pattern_sign``, so the
    correlations do not depend on which of the two equal weightings training reached."""
    reference, tabular, n_states = td_kernel(tasks), tabular_kernel(tasks), tasks.mrp.n_states
    rows: dict[int, list[HeadKernel]] = {}

    def read(pattern: Tensor, hook) -> None:  # each layer's pattern read as it is computed, not cached
        layer = hook.layer()
        sign = model.pattern_sign(layer) if hasattr(model, "pattern_sign") else 1.0
        pattern = sign * query_rows(pattern, tasks.states.shape[1]).double().cpu()
        rows[layer] = [
            HeadKernel(
                layer,
                head,
                correlation(pattern[:, head, :, :-1], reference),
                correlation(pattern[:, head, :, :-1], tabular),
                kernel_diagonality(pattern[:, head], tasks.states, n_states).mean().item(),
            )
            for head in range(pattern.shape[1])
        ]

    patterns = [(name, read) for name in model.hook_dict if name.endswith("hook_pattern")]
    model.run_with_hooks(tasks.prompt.to(model.device), fwd_hooks=patterns)
    return [row for layer in sorted(rows) for row in rows[layer]]


def _perturbed_run(
    model: HookedModel, tasks: TaskBatch, layer: int, directions: dict[str, Tensor], keep: str
) -> tuple[Tensor, Tensor, Tensor]:
    """Run ``tasks`` with ``eps @ dual`` (``eps`` zeros, requiring grad; one scalar per entry of ``SIGNATURE``;
    ``dual`` the dual basis of ``directions``: ``eps_k`` moves probe ``k``'s reading by ``eps_k`` and the others'
    not at all) added to the layer's input at every context column. Returns ``eps``, the perturbed input and the
    activation at hook ``keep``."""
    device, dtype = model.device, next(model.parameters()).dtype
    dirs = dual_basis(directions)[0].to(device, dtype)
    eps = torch.zeros(len(SIGNATURE), dtype=dtype, device=device, requires_grad=True)
    captured = {}

    def perturb(resid: Tensor, hook) -> Tensor:
        resid = resid.clone()
        resid[:, :-1] = resid[:, :-1] + eps @ dirs
        captured["in"] = resid
        return resid

    def capture(act: Tensor, hook) -> None:
        captured["out"] = act

    model.run_with_hooks(
        tasks.prompt.to(device), fwd_hooks=[(get_act_name("resid_pre", layer), perturb), (keep, capture)]
    )
    return eps, captured["in"], captured["out"]


def dual_basis(directions: dict[str, Tensor]) -> tuple[Float[Tensor, "quantity d_model"], float]:
    """``(U U^T)^{-1} U`` for the unit probe directions ``U`` (rows in ``SIGNATURE``'s order): row ``k`` changes
    probe ``k``'s reading by 1 and every other probe's by 0, however close the directions lie; and ``U``'s
    condition number, which says how far that separation can be trusted."""
    U = torch.stack([torch.nn.functional.normalize(directions[name].double(), dim=0) for name in SIGNATURE])
    singular = torch.linalg.svdvals(U)
    condition = float(singular[0] / singular[-1]) if singular[-1] > 0 else float("inf")
    return torch.linalg.pinv(U).T, condition


def readable(directions: dict[str, Tensor]) -> bool:
    """The probe directions are separable: their condition number is at most ``MAX_CONDITION`` (the TD-family
    regressions' gate); above it the dual basis amplifies probe error and the signature is n/a."""
    return dual_basis(directions)[1] <= MAX_CONDITION


def _signature_row(raw: list[float], layer: int, head: Optional[int] = None, read: bool = True) -> Signature:
    """Raw directional derivatives, normalised by the reward's magnitude (all None where the probes cannot be
    separated: ``read`` false), and whether their signs are TD's (never when unread)."""
    scale = abs(raw[0]) if raw[0] != 0 else 1.0
    normalised = [g / scale if read else None for g in raw]
    return Signature(
        layer=layer,
        head=head,
        raw=raw,
        normalised=normalised,
        matches_td=read and all((g > 0) == (s > 0) and g != 0 for g, s in zip(normalised, SIGNATURE_SIGNS)),
    )


def head_signatures(
    model: HookedModel,
    tasks: TaskBatch,
    layer: int,
    directions: dict[str, Float[Tensor, "d_model"]],
    readout: Float[Tensor, "d_model"],
) -> list[Signature]:
    """Per head of ``layer``: the directional derivatives of ``readout . result_h`` (summed over
    positions, averaged over tasks) along each of ``directions`` (keys ``SIGNATURE``) added to the
    layer's input at every context column; ``normalised`` divides by the reward's magnitude."""
    with torch.enable_grad():
        eps, _, result = _perturbed_run(model, tasks, layer, directions, get_act_name("result", layer, "attn"))
        moved = torch.einsum("bphd,d->h", result, readout.to(result)) / len(tasks)
        heads = torch.eye(len(moved), dtype=moved.dtype, device=moved.device)
        (grads,) = torch.autograd.grad(moved, eps, grad_outputs=heads, is_grads_batched=True)  # [head, 3]
    read = readable(directions)
    return [_signature_row(raw, layer=layer, head=h, read=read) for h, raw in enumerate(grads.double().cpu().tolist())]


def layer_signature(
    model: HookedModel,
    tasks: TaskBatch,
    layer: int,
    directions: dict[str, Tensor],
    readout_in: Tensor,
    readout_out: Tensor,
) -> Signature:
    """The whole layer's update of the probed value (attention, MLP and residual path together):
    directional derivatives of ``readout_out . resid_post - readout_in . resid_pre`` (summed over
    positions, averaged over tasks) along ``directions`` at every context column of the layer's input.
    θ* with its own rows gives ``(+1, +1, -1)`` after normalisation, as its update ``delta`` does."""
    with torch.enable_grad():
        eps, resid_in, resid_out = _perturbed_run(model, tasks, layer, directions, get_act_name("resid_post", layer))
        update = (resid_out @ readout_out.to(resid_out) - resid_in @ readout_in.to(resid_in)).sum() / len(tasks)
        (grad,) = torch.autograd.grad(update, eps)
    return _signature_row(grad.double().cpu().tolist(), layer=layer, read=readable(directions))


def probed_layer_signatures(
    model: HookedModel, tasks: TaskBatch, quantity: dict[str, LinearProbes], value: LinearProbes
) -> list[Signature]:
    """``layer_signature`` of every layer, with the probes' directions and read-outs."""
    return [
        layer_signature(
            model,
            tasks,
            layer,
            {n: quantity[n].unit_directions()[layer] for n in SIGNATURE},
            value.weights[layer],
            value.weights[layer + 1],
        )
        for layer in range(model.cfg.n_layers)
    ]


def probed_signatures(
    model: HookedModel,
    tasks: TaskBatch,
    quantity: dict[str, LinearProbes],
    value: LinearProbes,
    layers: Optional[list[int]] = None,
) -> list[Signature]:
    """``head_signatures`` with directions from the TD-quantity probes at each layer's input (site
    ``l``) and the read-out from the value probe at its output (site ``l + 1``)."""
    rows = []
    for layer in range(model.cfg.n_layers) if layers is None else layers:
        directions = {name: quantity[name].unit_directions()[layer] for name in SIGNATURE}
        rows += head_signatures(model, tasks, layer, directions, value.weights[layer + 1])
    return rows
