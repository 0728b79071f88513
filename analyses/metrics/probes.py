"""Cosine-similarity probes of a model against theta* (docs/theory.md §7), in weight and in function space.

Weight space compares the trainable, identifiable entries of ``A`` and ``V`` and the ``QK``/``OV``
circuits; function space compares what the two models compute on the same prompts, which is what a
reparametrisation cannot hide (von Oswald et al.'s prediction gap and sensitivity cosine).
"""

from __future__ import annotations

from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.models import HookedICTDTransformer
from ictd_interp.models.registry import HookedModel
from ictd_interp.reference.metrics import cosine, weight_cosines
from ictd_interp.tasks.sampling import TaskBatch

__all__ = ["weight_cosines", "circuit_cosines", "prediction_gap", "sensitivity_cosine", "activation_cosines"]
Star = Optional[HookedICTDTransformer]  # θ* built once by the caller and passed in; None builds it here


def _star(model: HookedModel, star: Star) -> HookedICTDTransformer:
    return star if star is not None else HookedICTDTransformer.from_theta_star(model.cfg).to(model.device)


def circuit_cosines(model: HookedICTDTransformer, star: Star = None) -> dict[str, list[list[float]]]:
    """Per layer and head, cosine of the full ``QK`` and ``OV`` circuit matrices with theta*'s."""
    star = _star(model, star)
    out: dict[str, list[list[float]]] = {}
    for name in ("QK", "OV"):
        mine, ref = getattr(model, name).AB.detach(), getattr(star, name).AB
        out[name] = [[cosine(mine[l, h], ref[l, h]) for h in range(mine.shape[1])] for l in range(mine.shape[0])]
    return out


@torch.no_grad()
def prediction_gap(model: HookedModel, tasks: TaskBatch, star: Star = None) -> dict[str, float]:
    """How far the model's query predictions are from theta*'s (of the model's depth) and from ``v_pi``."""
    star, prompt = _star(model, star), tasks.prompt.to(model.device)
    return query_gap(model(prompt)[:, -1], star(prompt)[:, -1], tasks)


def query_gap(mine: Float[Tensor, "batch"], ref: Float[Tensor, "batch"], tasks: TaskBatch) -> dict[str, float]:
    """``prediction_gap`` from the two query predictions."""
    mine, ref, truth = mine.double().cpu(), ref.double().cpu(), tasks.v_true[:, -1]
    return {
        "rms_gap_to_theta_star": float((mine - ref).pow(2).mean().sqrt()),
        "mean_abs_gap_to_theta_star": float((mine - ref).abs().mean()),
        "rms_error_model": float((mine - truth).pow(2).mean().sqrt()),
        "rms_error_theta_star": float((ref - truth).pow(2).mean().sqrt()),
    }


GRAD_BYTES = 2**30  # the most the autograd graph of one ``query_sensitivity`` chunk may hold


def query_sensitivity(model: HookedICTDTransformer, prompt: Tensor) -> Float[Tensor, "batch d_feat"]:
    """``d v^(query) / d x(S_n)``: how the prediction moves with the query state's features. The graph keeps every
    layer's attention pattern (about three tensors of ``[batch, head, pos, pos]`` a layer), so the tasks go through
    in chunks that fit ``GRAD_BYTES`` (192 layers, 256 tasks at n = 300 held 22 GB at once); each task's gradient is
    its own, so chunks change nothing but rounding."""
    per_task = 3 * model.cfg.n_layers * model.cfg.n_heads * prompt.shape[1] ** 2 * model.blocks[0].attn.A.element_size()
    chunks = prompt.detach().split(max(1, GRAD_BYTES // per_task))
    return torch.cat([_sensitivity(model, chunk) for chunk in chunks])


def _sensitivity(model: HookedICTDTransformer, prompt: Tensor) -> Float[Tensor, "batch d_feat"]:
    prompt = prompt.clone().requires_grad_(True)
    with torch.enable_grad():
        model(prompt)[:, -1].sum().backward()
    return prompt.grad[:, -1, model.layout.features]


def sensitivity_cosine(model: HookedICTDTransformer, tasks: TaskBatch, star: Star = None) -> float:
    """Mean over tasks of the cosine between the model's and theta*'s query sensitivities."""
    prompt = tasks.prompt.to(model.device).to(model.blocks[0].attn.A.dtype)
    mine, ref = query_sensitivity(model, prompt), query_sensitivity(_star(model, star), prompt)
    return float(torch.nn.functional.cosine_similarity(mine.double(), ref.double(), dim=-1).mean())


CACHE_BYTES = 2**30  # the most the two caches of ``activation_cosines`` may hold at once


@torch.no_grad()
def activation_cosines(model: HookedICTDTransformer, tasks: TaskBatch, star: Star = None) -> dict[str, float]:
    """Per hook, cosine of the flattened activations of the model and theta* on the same prompts. Where the two
    caches of every hook would pass ``CACHE_BYTES`` (deep models on long contexts: 192 layers, 256 tasks at n = 100
    would hold about 10 GB), the tasks go through in chunks and the cosine is summed from the chunks' dot products
    and squared norms (float64; equal to the one-pass cosine to float rounding)."""
    prompt, star = tasks.prompt.to(model.device), _star(model, star)
    _, one = model.run_with_cache(prompt[:1])
    per_task = 2 * sum(t.numel() * t.element_size() for t in one.values())
    chunk = max(1, CACHE_BYTES // per_task)
    if chunk >= len(prompt):
        _, mine = model.run_with_cache(prompt)
        _, ref = star.run_with_cache(prompt)
        return {name: cosine(_finite(mine[name]), _finite(ref[name])) for name in mine.keys()}
    sums: dict[str, Tensor] = {}  # per hook: (a·b, a·a, b·b)
    for start in range(0, len(prompt), chunk):
        _, mine = model.run_with_cache(prompt[start : start + chunk])
        _, ref = star.run_with_cache(prompt[start : start + chunk])
        for name in mine.keys():
            a, b = _finite(mine[name]).flatten().double(), _finite(ref[name]).flatten().double()
            sums[name] = sums.get(name, 0) + torch.stack([a @ b, a @ a, b @ b])
    return {name: float(ab / (aa * bb).sqrt()) if aa * bb > 0 else 0.0 for name, (ab, aa, bb) in sums.items()}


def _finite(activation: Tensor) -> Tensor:
    """A masked score of ``-inf`` (a pattern's logit before the softmax) counts as 0."""
    return activation.nan_to_num(neginf=0.0)
