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
from ictd_interp.models.registry import ICTDModel
from ictd_interp.reference.metrics import cosine, weight_cosines
from ictd_interp.tasks.sampling import TaskBatch

__all__ = ["weight_cosines", "circuit_cosines", "prediction_gap", "sensitivity_cosine", "activation_cosines"]
Star = Optional[HookedICTDTransformer]  # θ* built once by the caller and passed in; None builds it here


def _star(model: ICTDModel, star: Star) -> HookedICTDTransformer:
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
def prediction_gap(model: ICTDModel, tasks: TaskBatch, star: Star = None) -> dict[str, float]:
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


def query_sensitivity(model: HookedICTDTransformer, prompt: Tensor) -> Float[Tensor, "batch d_feat"]:
    """``d v^(query) / d x(S_n)``: how the prediction moves with the query state's features."""
    prompt = prompt.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        model(prompt)[:, -1].sum().backward()
    return prompt.grad[:, -1, model.layout.features]


def sensitivity_cosine(model: HookedICTDTransformer, tasks: TaskBatch, star: Star = None) -> float:
    """Mean over tasks of the cosine between the model's and theta*'s query sensitivities."""
    prompt = tasks.prompt.to(model.device).to(model.blocks[0].attn.A.dtype)
    mine, ref = query_sensitivity(model, prompt), query_sensitivity(_star(model, star), prompt)
    return float(torch.nn.functional.cosine_similarity(mine.double(), ref.double(), dim=-1).mean())


@torch.no_grad()
def activation_cosines(model: HookedICTDTransformer, tasks: TaskBatch, star: Star = None) -> dict[str, float]:
    """Per hook, cosine of the flattened activations of the model and theta* on the same prompts."""
    prompt = tasks.prompt.to(model.device)
    _, mine = model.run_with_cache(prompt)
    _, ref = _star(model, star).run_with_cache(prompt)
    return {name: cosine(mine[name].nan_to_num(neginf=0.0), ref[name].nan_to_num(neginf=0.0)) for name in mine.keys()}
