"""Where does a model keep its value estimate, and the quantities TD needs? Linear probes per layer
(docs/theory.md §10), for any architecture.

A *site* is the residual stream after ``l`` blocks: site 0 is ``blocks.0.hook_resid_pre`` (the
embedding), site ``l + 1`` is ``blocks.{l}.hook_resid_post``. A probe is an affine read-out
``w . resid + b`` fitted by least squares on tasks held apart from the ones it is scored on, well-posed:
in float64, with a rank-revealing solve whose cut-off follows the precision the residual stream was
computed in (``RCOND``: singular values below that fraction of the largest are rounding noise, not
directions), and the rank it found reported per site (``LinearProbes.rank``). A float32 embedding of
rank 5 in 32 dimensions is then read in its 5 directions, not fitted to its rounding noise.

* **Value probes** (tuned-lens style): at every site and position, the model's own final value
  (``target="output"``), the true ``v_pi`` (``"v_pi"``) or, for the stylised model, the value row the
  layer stores (``"stored"``). Their error against ``v_pi`` per site is the standard model's error vs
  depth; on the stylised model the stored-row probe is the row itself.
* **TD-quantity probes**: at each context column ``j < n`` (the column of transition ``k = j + 1``),
  the reward ``R_{j+1}``, ``v_pi(S_j)`` (current), ``v_pi(S_{j+1})`` (next) and the TD error
  ``delta_{j+1} = R_{j+1} + gamma v_pi(S_{j+1}) - v_pi(S_j)``; scored by R² per site.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.config.fields import check_choice
from ictd_interp.models.registry import HookedModel, holds_theta_star
from ictd_interp.tasks.sampling import TaskBatch

VALUE_TARGETS = ("output", "v_pi", "stored")
# Relative singular-value cut-off of the probe's design per dtype the residual stream was computed in:
# ~100x that dtype's machine epsilon, so rounding noise (float32: ~1e-7 relative) never counts as a direction.
RCOND = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 1e-2, torch.float16: 1e-3}


@dataclass
class LinearProbes:
    """One affine probe per site: ``predict(resid)[s] = resid[s] @ weights[s] + bias[s]``."""

    weights: Float[Tensor, "site d_model"]
    bias: Float[Tensor, "site"]
    target: str
    rank: tuple[int, ...] = ()  # numerical rank of each site's design (columns: d_model + the bias)

    def predict(self, resid: Float[Tensor, "site batch pos d_model"]) -> Float[Tensor, "site batch pos"]:
        return torch.einsum("sbpd,sd->sbp", resid.double(), self.weights) + self.bias[:, None, None]

    def unit_directions(self) -> Float[Tensor, "site d_model"]:
        """``w / |w|^2``: moving the residual by it raises the probed quantity by exactly 1."""
        return self.weights / self.weights.pow(2).sum(-1, keepdim=True).clamp_min(1e-30)


@torch.no_grad()
def residual_stack(model: HookedModel, prompt: Tensor) -> Float[Tensor, "site batch pos d_model"]:
    """The residual stream at every site (embedding, then after each block), float64 on the CPU."""
    device = model.device
    _, cache = model.run_with_cache(prompt.to(device), names_filter=lambda n: "hook_resid_p" in n)
    sites = [cache["resid_pre", 0]] + [cache["resid_post", l] for l in range(model.cfg.n_layers)]
    return torch.stack(sites).double().cpu()


def fit_probes(
    resid: Float[Tensor, "site batch pos d_model"],
    target: Float[Tensor, "site batch pos"],
    name: str,
    source_dtype: torch.dtype = torch.float64,
) -> LinearProbes:
    """Least squares per site, rank-revealing (``numpy.linalg.lstsq`` with ``RCOND[source_dtype]``: the
    minimum-norm solution on the directions the residual stream really has)."""
    weights, bias, ranks = [], [], []
    for site in range(resid.shape[0]):
        X = resid[site].reshape(-1, resid.shape[-1]).double().numpy()
        design = np.concatenate([X, np.ones((X.shape[0], 1))], axis=1)
        coef, _, rank, _ = np.linalg.lstsq(
            design, target[site].reshape(-1).double().numpy(), rcond=RCOND.get(source_dtype, 1e-5)
        )
        weights.append(coef[:-1])
        bias.append(coef[-1])
        ranks.append(int(rank))
    return LinearProbes(torch.tensor(np.stack(weights)), torch.tensor(bias), name, tuple(ranks))


def _dtype(model: HookedModel) -> torch.dtype:
    return next(model.parameters()).dtype


def value_targets(
    model: HookedModel, tasks: TaskBatch, target: str, resid: Float[Tensor, "site batch pos d_model"]
) -> Float[Tensor, "site batch pos"]:
    check_choice("target", target, VALUE_TARGETS)
    n_sites = resid.shape[0]
    if target == "stored":
        if not holds_theta_star(model):
            raise ValueError("target: 'stored' needs the stylised model (a standard model stores no value row)")
        return resid[..., model.layout.current]
    if target == "v_pi":
        return tasks.v_true.double().expand(n_sites, -1, -1)
    with torch.no_grad():
        out = model(tasks.prompt.to(model.device)).double().cpu()
    return out.expand(n_sites, -1, -1)


def value_probes(model: HookedModel, fit_tasks: TaskBatch, target: str = "output") -> LinearProbes:
    """A value probe at every site, fitted on ``fit_tasks`` (keep them apart from the scored tasks)."""
    resid = residual_stack(model, fit_tasks.prompt)
    return fit_probes(resid, value_targets(model, fit_tasks, target, resid), target, _dtype(model))


def probed_values(model: HookedModel, probes: LinearProbes, tasks: TaskBatch) -> Float[Tensor, "site batch pos"]:
    return probes.predict(residual_stack(model, tasks.prompt))


def probe_errors_by_depth(model: HookedModel, probes: LinearProbes, tasks: TaskBatch) -> list[float]:
    """MSVE against ``v_pi`` of the probed values at each site (site 0: before any block)."""
    values = probed_values(model, probes, tasks)
    return (values - tasks.v_true.double()).pow(2).mean((1, 2)).tolist()


def td_quantities(tasks: TaskBatch, gamma: float) -> dict[str, Float[Tensor, "batch key_pos"]]:
    """The TD quantities of each context column ``j < n`` (module docstring)."""
    v = tasks.v_true.double()
    reward = tasks.rewards.double()
    return {
        "reward": reward,
        "v_current": v[:, :-1],
        "v_next": v[:, 1:],
        "td_error": reward + gamma * v[:, 1:] - v[:, :-1],
    }


def quantity_probes(model: HookedModel, fit_tasks: TaskBatch) -> dict[str, LinearProbes]:
    """A probe per TD quantity and site, fitted on the context columns of ``fit_tasks``."""
    resid = residual_stack(model, fit_tasks.prompt)[:, :, :-1]
    return {
        name: fit_probes(resid, target.expand(resid.shape[0], -1, -1), name, _dtype(model))
        for name, target in td_quantities(fit_tasks, model.cfg.gamma).items()
    }


def quantity_r2(model: HookedModel, probes: dict[str, LinearProbes], tasks: TaskBatch) -> dict[str, list[float]]:
    """Held-out R² of each quantity probe per site: 1 = linearly present, 0 = no better than its mean."""
    resid = residual_stack(model, tasks.prompt)[:, :, :-1]
    out = {}
    for name, target in td_quantities(tasks, model.cfg.gamma).items():
        err = (probes[name].predict(resid) - target).pow(2).mean((1, 2))
        out[name] = (1 - err / target.var(unbiased=False).clamp_min(1e-30)).tolist()
    return out
