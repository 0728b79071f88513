"""Benchmark cases: standard-architecture models with a planted circuit whose ground truth is known exactly.

Each case starts from θ*'s circuit in a standard block (``standard_theta_star``: per layer one TD head that
attends with the softmax-TD kernel and adds ``α K (R − v)`` to the value; the bootstrap path cut), then
hides it:

* **distractors** — *silent* heads (random queries, keys and values, ``W_O = 0``: they compute and write
  nothing); *junk* heads and MLP units that read the whole residual stream and write only into extra
  ``junk`` dimensions that nothing on the circuit reads (their activations vary, their effect on the output
  is exactly 0); *cancelling pairs* of heads with equal queries, keys and values and opposite ``W_O`` writing
  into the circuit's own dimensions (together they add 0 to rounding error, one alone does not);
* **superposed features** (``mlp_active > 0``): the junk MLP units are ReLU units, each biased to be active on
  a share ``mlp_active`` of the fit prompts' positions (calibrated layer by layer), writing into fewer junk
  dimensions than there are units — more sparse quantities than dimensions, off the circuit's path;
* **a random orthogonal change of residual basis** ``Q`` (``W_E → W_E Q``, readers ``W → Qᵀ W``, writers
  ``W_O → W_O Q``, ``W_U → Qᵀ W_U``): without LayerNorm the function is unchanged (to 1e-12 in float64), and
  the variables' directions are the rows of ``Q`` — known only through the rotation;
* **leak heads**, **the TD update split over two heads** and **LayerNorm held near θ*'s map by an anchor**: the
  weight-level steps are ``planting``'s, each derived there.

The ground truth each case exports: the circuit's edges (``planting.circuit_edges``: ``embed`` → every TD
head, every TD head → every later TD head and → ``output``; fewer when the update is split), every node's role,
and each variable's direction in the residual stream with the hook names where the variable lies exactly on it
(``reward`` everywhere; ``value``, the current-value row, after each block; none where leaks or LayerNorm move
the values off θ*'s); in a superposed case also ``features``: at each block's output the activations of every
junk unit written so far (``feature_values``) and their unit write directions.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.analyses.methods_benchmark.case_specs import THETA_STAR, CaseSpec, source_name
from ictd_interp.analyses.methods_benchmark.graph import Edge, head_name, mlp_name
from ictd_interp.analyses.methods_benchmark.planting import (
    anchor_layer_norm,
    circuit_edges,
    entangle_units,
    feature_writes,
    mean_fixing_rotation,
    plant_distractors,
    plant_null_paths,
    random_rotation,
    rotate,
    split_td_head,
)
from ictd_interp.analyses.methods_benchmark.sealed import SEALED
from ictd_interp.analyses.metrics.interchange import row_swapped
from ictd_interp.analyses.metrics.site_probes import residual_stack
from ictd_interp.config import ICTDConfig
from ictd_interp.config.standard import StandardConfig
from ictd_interp.models.hook_names import get_act_name
from ictd_interp.models.standard.model import HookedStandardTransformer
from ictd_interp.models.standard.theta_star import standard_theta_star, theta_star_weights
from ictd_interp.models.stylised.model import HookedICTDTransformer
from ictd_interp.models.stylised.state_space import state_space_unavailable
from ictd_interp.tasks import TaskBatch, sample_from


@dataclass(frozen=True)
class GroundTruth:
    """What the case planted: the circuit's ``edges`` (a subset of ``build_graph(model).edges``), each node's
    ``role``, each variable's unit ``directions`` in the residual stream and the ``sites`` (hook names) where the
    variable equals ``resid · direction`` exactly (none in a case with leak heads: no direction is scored there)."""

    edges: frozenset[Edge]
    roles: dict[str, str]
    directions: dict[str, Float[Tensor, "d_model"]]
    sites: dict[str, tuple[str, ...]] = field(default_factory=dict)
    features: dict[str, Float[Tensor, "feature d_model"]] = field(default_factory=dict)  # site -> unit directions

    @property
    def nodes(self) -> frozenset[str]:
        """The circuit's nodes (``embed`` and the TD heads)."""
        return frozenset(u for u, _ in self.edges)


@dataclass
class Case:
    """A built case: the model, its ground truth, clean and corrupted tasks (and two more batches for probes)."""

    spec: CaseSpec
    seed: int
    model: HookedStandardTransformer
    truth: GroundTruth
    clean: TaskBatch
    corrupted: TaskBatch
    fit: TaskBatch
    held_out: TaskBatch
    rotation: Float[Tensor, "d_model d_model"]
    reference: HookedStandardTransformer  # the source's circuit alone, unrotated (``standard_theta_star``)


@dataclass(frozen=True)
class Problem:
    """What a method receives (``problem_of``): the questions, never the answers. Its own copy of the model (an
    edit cannot reach the scorer or the next method), the clean, corrupted and fit tasks (the held-out ones stay
    with the scorer), where each causal variable is to be looked for (``variable_sites``) and where the residual
    stream is to be decomposed (``feature_sites``), the planted units' designed firing rate (``feature_rate``), and
    the high-level causal model's values on the fit tasks, the supervision a probe or DAS trains on (as MIB gives
    its causal model): each variable at every residual site (``fit_values``) and the query prediction when a
    variable at a site takes the next task's value (``fit_counterfactuals``). The edges, directions, features
    and rotation of the planted circuit are not in it."""

    name: str
    seed: int
    model: HookedStandardTransformer
    clean: TaskBatch
    corrupted: TaskBatch
    fit: TaskBatch
    variable_sites: dict[str, tuple[str, ...]]
    feature_sites: tuple[str, ...]
    feature_rate: float
    fit_values: dict[str, Float[Tensor, "site batch pos"]]
    fit_counterfactuals: dict[tuple[str, str], Float[Tensor, "batch"]]


def problem_of(case: Case, sealed_seed: Optional[int] = None) -> Problem:
    """The ``Problem`` a method is given on ``case``: fresh copies of the model and the task batches each call.
    ``sealed_seed`` (the private split, ``sealed.Split``): the problem is named ``sealed`` and carries this seed,
    not the case's name and seed."""
    counterfactuals = {  # every tensor its own copy: an in-place edit reaches neither the scorer nor the next method
        (name, site): counterfactual_labels(case, case.fit, name, site).clone()
        for name, sites in case.truth.sites.items()
        for site in sites
    }
    return Problem(
        case.spec.name if sealed_seed is None else SEALED,
        case.seed if sealed_seed is None else sealed_seed,
        _model_copy(case.model, sealed_seed),
        copy.deepcopy(case.clean),
        copy.deepcopy(case.corrupted),
        copy.deepcopy(case.fit),
        dict(case.truth.sites),
        tuple(case.truth.features),
        case.spec.mlp_active,
        {name: values.clone() for name, values in variable_values(case, case.fit).items()},
        counterfactuals,
    )


def _model_copy(model: HookedStandardTransformer, sealed_seed: Optional[int]) -> HookedStandardTransformer:
    """A copy of the case's model; sealed, its config (shared by its modules) carries the sealed seed, not the
    case's (its ``cfg.seed`` would rebuild the case)."""
    copied = copy.deepcopy(model)
    if sealed_seed is not None:
        old, new = copied.cfg, replace(copied.cfg, seed=sealed_seed)
        for module in copied.modules():
            if getattr(module, "cfg", None) is old:
                module.cfg = new
    return copied


def _truth(spec: CaseSpec, model: HookedStandardTransformer, Q: Tensor) -> GroundTruth:
    layout = model.layout
    roles = {"embed": "embed"}
    for layer in range(spec.n_layers):
        roles |= {head_name(layer, h): role for h, role in enumerate(spec.roles)}
        if spec.d_mlp:
            roles[mlp_name(layer)] = "mlp-junk"
    sites = tuple(residual_sites(model))
    features = {}
    if spec.mlp_active:  # after block l, the features of blocks 0..l, each along its (rotated) write direction
        writes = [feature_writes(spec, b.mlp.W_out.detach()) for b in model.blocks]
        features = {sites[l + 1]: torch.cat(writes[: l + 1]) for l in range(spec.n_layers)}
    exact = {"reward": sites, "value": sites[-1:] if spec.relayed else sites[1:]} if spec.exact_variables else {}
    return GroundTruth(
        circuit_edges(spec),
        roles,
        {"reward": Q[layout.reward].clone(), "value": Q[layout.current].clone()},
        exact,
        features,
    )


def circuit_source(spec: CaseSpec, seed: int = 0) -> HookedICTDTransformer:
    """The stylised model whose layers the case's TD heads carry (float64): θ* of the spec's depth, or the
    shipped model ``source_name(spec, seed)``, refused, naming why, where its layer is not a fixed map or does
    not fit."""
    if spec.source == THETA_STAR:
        return HookedICTDTransformer.from_theta_star(
            ICTDConfig(d_features=spec.d_features, n_layers=spec.n_layers, dtype="float64")
        )
    name = source_name(spec, seed)
    model = HookedICTDTransformer.from_pretrained(name, dtype="float64")
    reason = state_space_unavailable(model.cfg)
    if reason is not None:
        raise ValueError(f"case {spec.name!r}: source {name!r} is not a fixed map of the prompt ({reason})")
    if (model.cfg.d_features, model.cfg.n_layers) != (spec.d_features, spec.n_layers):
        raise ValueError(
            f"case {spec.name!r}: source {name!r} has d_features={model.cfg.d_features}, "
            f"n_layers={model.cfg.n_layers}; the case says {spec.d_features}, {spec.n_layers}"
        )
    return model


def _weights(spec: CaseSpec, cfg: StandardConfig, star: HookedICTDTransformer, gen: torch.Generator):
    """The case's state dict and its change of basis ``Q`` (``planting``'s steps in order)."""
    weights = theta_star_weights(star, replace(cfg, layer_norm=False))
    if spec.split_td:
        split_td_head(weights, spec.n_layers, star.layout.current)
    plant_distractors(spec, weights, gen)
    if spec.entangled:
        entangle_units(spec, weights, gen)
    plant_null_paths(spec, weights, gen)
    if spec.layer_norm:
        norms = {k: v for k, v in HookedStandardTransformer(cfg).state_dict().items() if ".ln" in k or "ln_" in k}
        weights |= {k: v.to(torch.float64) for k, v in norms.items()}
        anchor_layer_norm(spec, weights, cfg.d_model)
        Q = mean_fixing_rotation(cfg.d_model, gen, spec.rotate)
    else:
        Q = random_rotation(cfg.d_model, gen) if spec.rotate else torch.eye(cfg.d_model, dtype=torch.float64)
    rotate(weights, Q)
    return weights, Q


def build_case(spec: CaseSpec, seed: int) -> Case:
    """The case's model and tasks for one benchmark seed (everything drawn from ``seed``)."""
    gen = torch.Generator().manual_seed(seed)
    m = spec.d_features + 3
    cfg = StandardConfig(
        d_features=spec.d_features,
        d_model=spec.d_model,
        d_head=m,
        n_heads=spec.n_heads,
        n_layers=spec.n_layers,
        d_mlp=spec.d_mlp,
        layer_norm=spec.layer_norm,
        dtype="float64",
        seed=seed,
        act_fn="relu" if spec.mlp_active or spec.closed_units else "gelu",
    )
    star = circuit_source(spec, seed)
    weights, Q = _weights(spec, cfg, star, gen)
    model = HookedStandardTransformer(cfg)
    model.load_state_dict(weights)
    draw = lambda k: sample_from(spec.tasks, spec.n_tasks, seed=seed * 4 + k)  # noqa: E731
    fit = draw(2)
    if spec.mlp_active:
        _calibrate_sparsity(model, fit, spec.mlp_active)
    return Case(spec, seed, model, _truth(spec, model, Q), draw(0), draw(1), fit, draw(3), Q, standard_theta_star(star))


@torch.no_grad()
def _calibrate_sparsity(model: HookedStandardTransformer, fit: TaskBatch, active: float) -> None:
    """Each junk unit's bias set, block by block, so that the unit is active (pre-activation > 0) on a share
    ``active`` of the fit prompts' positions (the earlier blocks already calibrated)."""
    for l, block in enumerate(model.blocks):
        block.mlp.b_in.zero_()
        name = f"blocks.{l}.mlp.hook_pre"
        _, cache = model.run_with_cache(fit.prompt, names_filter=name)
        pre = cache[name].reshape(-1, block.mlp.b_in.shape[0])
        block.mlp.b_in.copy_(-torch.quantile(pre, 1.0 - active, dim=0))


@torch.no_grad()
def feature_values(case: Case, tasks: TaskBatch) -> dict[str, Float[Tensor, "sample feature"]]:
    """A superposed case's true features at each site where they lie (``truth.features``): the junk units'
    activations (``hook_post`` of blocks 0..l after block l; entangled, each pair's first unit), one row per prompt
    position."""
    names = [f"blocks.{l}.mlp.hook_post" for l in range(case.spec.n_layers)]
    _, cache = case.model.run_with_cache(tasks.prompt, names_filter=lambda n: n in names)
    acts = [cache[n].reshape(-1, case.spec.d_mlp)[:, :: 1 + case.spec.entangled] for n in names]
    return {site: torch.cat(acts[: l + 1], dim=1) for l, site in enumerate(case.truth.features)}


def residual_sites(model: HookedStandardTransformer) -> list[str]:
    """The hook names of ``ictd_interp.analyses.metrics.site_probes.residual_stack``'s sites, in order."""
    return [get_act_name("resid_pre", 0)] + [get_act_name("resid_post", l) for l in range(model.cfg.n_layers)]


@torch.no_grad()
def variable_values(case: Case, tasks: TaskBatch) -> dict[str, Float[Tensor, "site batch pos"]]:
    """The true variables at every residual site, computed without the planted model: the reward from the
    prompt, the value from the unrotated θ* circuit (``case.reference``)'s current-value row."""
    resid = residual_stack(case.reference, tasks.prompt)
    current, reward = case.reference.layout.current, case.reference.layout.reward
    return {"reward": tasks.prompt[..., reward].double().expand(resid.shape[0], -1, -1), "value": resid[..., current]}


VARIABLE_ROWS = {"reward": "reward", "value": "current"}  # each variable's row of the unrotated prompt layout


def counterfactual_labels(case: Case, tasks: TaskBatch, variable: str, site: str) -> Float[Tensor, "batch"]:
    """The query prediction when ``variable`` at ``site`` takes its value from the source prompt, everything
    else the base prompt's: computed on the unrotated θ* circuit (``case.reference``), where the variable is
    one row of the residual stream."""
    return row_swapped(case.reference, tasks, getattr(case.reference.layout, VARIABLE_ROWS[variable]), site)
