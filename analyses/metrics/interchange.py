"""Interchange interventions at a residual site: a causal model's counterfactual, a move's accuracy, and DAS.

An **interchange pair** is a base prompt and a source prompt: task ``b`` of a batch is the base, task ``b + 1``
its source (``source_prompts``). A **move** rewrites the base's residual stream at a site from the source's
(``[batch, pos, d_model]`` both); its **interchange-intervention accuracy** (IIA) is ``1 − MSE / Var`` of the
moved model's query prediction against the **counterfactual** of a high-level causal model: that model's
prediction when one of its variables, one row of its residual stream, takes the source's value (``row_swapped``).
IIA is 1 when the move does to the model what the swap does to the causal model, and below 0 when the moved
prediction is further from the counterfactual than the counterfactual's mean.

**DAS** (distributed alignment search, Geiger et al. 2024), through pyvene: a one-dimensional
``LowRankRotatedSpaceIntervention`` at the site trained so that interchanging its coordinate gives the
counterfactuals (``fit_das``); the learned axis is the direction found, and ``swap_move`` of it the move scored.
The methods benchmark uses these on planted circuits (``methods_benchmark``), the checkpoint track's readings on
trained checkpoints against θ* (``readings``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.models.registry import HookedModel
from ictd_interp.tasks.sampling import TaskBatch

DAS_STEPS, DAS_LR, DAS_RESTARTS = 400, 0.05, 3

Move = Callable[[Tensor, Tensor], Tensor]  # (base, source) residuals [batch, pos, d_model] -> the base's new one


def source_prompts(tasks: TaskBatch) -> Float[Tensor, "batch pos d_prompt"]:
    """The source of each interchange pair: the next task's prompt (task ``b`` takes ``b + 1``'s variable)."""
    return tasks.prompt.roll(-1, dims=0)


@torch.no_grad()
def row_swapped(model: HookedModel, tasks: TaskBatch, row: int, site: str) -> Float[Tensor, "batch"]:
    """``model``'s query prediction when its residual ``row`` at ``site`` (every position) takes the source
    prompt's value, everything else the base prompt's: a causal model's counterfactual where the variable is
    that row."""
    _, cache = model.run_with_cache(source_prompts(tasks), names_filter=site)
    source = cache[site][..., row]

    def swap(resid: Tensor, hook) -> Tensor:
        resid = resid.clone()
        resid[..., row] = source
        return resid

    return model.run_with_hooks(tasks.prompt, fwd_hooks=[(site, swap)])[:, -1]


def swap_move(direction: Tensor) -> Move:
    """The interchange: the base's component along ``direction`` replaced by the source's."""
    u = direction.double() / direction.double().norm()
    return lambda base, source: base + (source @ u - base @ u)[..., None] * u


@torch.no_grad()
def moved_predictions(model: HookedModel, tasks: TaskBatch, site: str, moves: dict[str, Move]) -> dict[str, Tensor]:
    """Each move's query prediction on ``tasks``' pairs ``[batch]``; the source residual computed once."""
    _, cache = model.run_with_cache(source_prompts(tasks), names_filter=site)
    source = cache[site]
    hooked = {name: (lambda resid, hook, move=move: move(resid, source)) for name, move in moves.items()}
    return {name: model.run_with_hooks(tasks.prompt, fwd_hooks=[(site, hook)])[:, -1] for name, hook in hooked.items()}


def move_accuracies(
    model: HookedModel, tasks: TaskBatch, site: str, labels: Float[Tensor, "batch"], moves: dict[str, Move]
) -> dict[str, float]:
    """Each move's IIA on ``tasks``' pairs against ``labels``, the causal model's counterfactuals on the same
    pairs."""
    preds = moved_predictions(model, tasks, site, moves)
    return {name: 1.0 - float((p - labels).pow(2).mean() / labels.var(unbiased=False)) for name, p in preds.items()}


def pyvene_component(site: str) -> str:
    """A hook name as pyvene's component string: ``blocks.1.hook_resid_post`` → ``blocks[1].hook_resid_post.output``."""
    head, _, rest = site.partition(".")
    layer, _, hook = rest.partition(".")
    return f"{head}[{layer}].{hook}.output" if hook else f"{site}.output"


def _das_run(
    model: HookedModel, site: str, base: Tensor, source: Tensor, labels: Tensor, seed: int, steps: int
) -> tuple[float, Float[Tensor, "d_model"]]:
    """One DAS run from a seeded random rotation: (final training loss, the learned axis)."""
    import pyvene

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        inter = pyvene.LowRankRotatedSpaceIntervention(embed_dim=model.cfg.d_model, low_rank_dimension=1).to(
            next(model.parameters()).dtype
        )
    wrapped = pyvene.IntervenableModel(
        {"component": pyvene_component(site), "intervention": lambda b, s=None: inter(b, s)}, model=model
    )
    wrapped.disable_model_gradients()
    opt = torch.optim.Adam(inter.parameters(), lr=DAS_LR)
    for _ in range(steps):
        _, intervened = wrapped(base={"prompt": base}, sources=[{"prompt": source}])
        loss = (intervened[:, -1] - labels).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return float(loss.detach()), inter.rotate_layer.weight[:, 0].detach().clone()


def fit_das(
    model: HookedModel,
    site: str,
    tasks: TaskBatch,
    labels: Float[Tensor, "batch"],
    seeds: Sequence[int],
    steps: Optional[int] = None,
) -> Float[Tensor, "d_model"]:
    """The DAS axis at ``site`` fitted on ``tasks``' pairs to ``labels``: one run of ``steps`` Adam steps (default
    ``DAS_STEPS``) per seed (single runs stall in local minima on about a third of the seeds of the planted cases),
    the one with the lowest training loss kept. The model's own ``requires_grad`` flags are restored."""
    steps = DAS_STEPS if steps is None else steps
    trainable = [p.requires_grad for p in model.parameters()]
    try:
        runs = [_das_run(model, site, tasks.prompt, source_prompts(tasks), labels, seed, steps) for seed in seeds]
    finally:
        for p, flag in zip(model.parameters(), trainable):
            p.requires_grad_(flag)
    return min(runs, key=lambda r: r[0])[1]
