"""Interpretability methods as small registered objects, and the built-in ones.

A ``Method`` has a ``name``, a ``kind`` and a ``run(problem) -> output``, where ``problem`` is the case's
``cases.Problem``: its own copy of the model, the tasks and the questions, never the planted answer (the truth stays
with the scorer). An edge method returns ``EdgeOutput`` (a score per edge of ``build_graph(problem.model)``, higher
meaning "more likely in the circuit", and optionally the circuit it found); a direction method returns
``DirectionOutput`` (a direction in the residual stream per ``(variable, site)`` it reads); a feature method returns
``FeatureOutput`` (per site an encoder of the residual stream into latents and the latents' decoder directions),
scored on the cases with superposed features. ``register_method`` adds one to ``METHODS``; an outside method is one
file that calls it (docs/methods_benchmark.md, "Score your own method"). The benchmark scores outputs, never the
method's own claims.

Built in (the graph adapter of ``ictd_interp.analyses.methods_benchmark.graph`` in the place of ``auto-circuit``'s
patchable model):

* ``activation-patching`` — exact edge patching, the reference: each edge alone carries the corrupted
  sender's output; score ``mean_tasks |Δ prediction|``.
* ``activation-patching-signed`` — the same patching ranked by ``|mean_tasks Δ prediction|``, the convention of
  EAP-IG's reference code: effects of opposite sign on different tasks cancel.
* ``edge-attribution-patching`` (EAP, Syed et al. 2023) — the first-order estimate of the same:
  ``|(out_u(corrupted) − out_u(clean)) · ∂ prediction / ∂ input_v|``, two forwards and one backward.
* ``eap-ig`` (Hanna et al. 2024) — EAP with the gradient averaged along the straight path from the clean to
  the corrupted read-in (``IG_STEPS`` midpoints).
* ``acdc`` (Conmy et al. 2023) — iterative pruning: destinations from the output backwards, each incoming edge
  patched for good when the normalised error ``mean|pred − pred_clean| / mean|pred_corrupted − pred_clean|``
  grows by less than ``ACDC_TAU``; the circuit is what remains, the ranking each edge's growth at its test.
* ``random`` — a seeded random ranking, the chance baseline (AUROC 0.5).
* ``linear-probe`` — least squares of the variable on the residual stream at each site, fitted on the case's
  ``fit`` tasks (``ictd_interp.analyses.metrics.site_probes.fit_probes``); its weight vector is the direction found.
* ``das`` — distributed alignment search through pyvene (``das``): the value variable only.
* ``pca`` — the principal directions of the residual stream at each site (fit tasks), as latents: the dense
  linear baseline a feature method must beat (at most ``d_model`` latents for more features than dimensions).
* ``weight-units`` — the weights alone for features: every MLP unit's write direction a ReLU latent (a
  reference row, as ``weight-reader`` for edges).
* ``random-dictionary`` — the chance baseline of a feature method: as many latents as the SAE plugin's
  (``DICTIONARY_WIDTH × d_model``), each a seeded random unit direction read through a ReLU whose bias makes it
  fire as often as the planted units are built to (``Problem.feature_rate`` of the fit positions); what the
  matching alone gives a dictionary that wide.

Sparse autoencoders trained with SAELens (``sae``, ``sae-features``) are a plugin, ``analyses/methods_benchmark/
sae_plugin.py``: SAELens needs ``transformer-lens<4``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional, Union

import torch
from jaxtyping import Float
from torch import Tensor

from ictd_interp.analyses.methods_benchmark.cases import Case, Problem, residual_sites
from ictd_interp.analyses.methods_benchmark.graph import Edge, build_graph, run_graph
from ictd_interp.analyses.methods_benchmark.mask_selection import STEPS as PRUNE_STEPS
from ictd_interp.analyses.methods_benchmark.mask_selection import prune_edges
from ictd_interp.analyses.methods_benchmark.weight_reader import unit_directions, weight_scores
from ictd_interp.analyses.metrics import interchange
from ictd_interp.analyses.metrics.draws import case_seed
from ictd_interp.analyses.metrics.site_probes import fit_probes, residual_stack

EDGES, DIRECTIONS, FEATURES = "edges", "directions", "features"
IG_STEPS = 8
ACDC_TAU = 0.005


@dataclass
class EdgeOutput:
    scores: dict[Edge, float]
    circuit: Optional[frozenset[Edge]] = None


@dataclass
class DirectionOutput:
    directions: dict[tuple[str, str], Float[Tensor, "d_model"]] = field(default_factory=dict)


@dataclass
class Encoder:
    """A site's latents as data, not code: ``activation((x - center) @ weight.T + bias)`` for residual activations
    ``x [samples, d_model]``; ``weight [k, d_model]``, ``bias [k]`` (None: 0), ``center [d_model]`` (None: 0; an
    SAE's ``b_dec``, PCA's mean), ``activation`` ``identity`` or ``relu``. Sent to the scorer as plain tensors, so a
    method's own code never runs there."""

    weight: Tensor
    bias: Optional[Tensor] = None
    center: Optional[Tensor] = None
    activation: str = "identity"

    def __post_init__(self) -> None:
        if self.activation not in ENCODER_ACTIVATIONS:
            raise ValueError(f"encoder activation: one of {ENCODER_ACTIVATIONS}, got {self.activation!r}")
        k, d = self.weight.shape
        if self.bias is not None and tuple(self.bias.shape) != (k,):
            raise ValueError(f"encoder bias: shape ({k},) for a weight of {k} latents, got {tuple(self.bias.shape)}")
        if self.center is not None and tuple(self.center.shape) != (d,):
            raise ValueError(f"encoder center: shape ({d},) for a weight over {d} dims, got {tuple(self.center.shape)}")

    def __call__(self, x: Float[Tensor, "sample d_model"]) -> Float[Tensor, "sample latent"]:
        x = x.double() - (0.0 if self.center is None else self.center.double())
        pre = x @ self.weight.double().T + (0.0 if self.bias is None else self.bias.double())
        return torch.relu(pre) if self.activation == "relu" else pre

    def tensors(self) -> list[Tensor]:
        return [t for t in (self.weight, self.bias, self.center) if t is not None]


ENCODER_ACTIVATIONS = ("identity", "relu")


@dataclass
class FeatureOutput:
    """Per site (hook name): ``encoders[site]`` (an ``Encoder``) maps residual activations ``[samples, d_model]``
    to latents ``[samples, k]``; ``decoders[site]`` ``[k, d_model]`` is each latent's direction."""

    encoders: dict[str, Encoder] = field(default_factory=dict)
    decoders: dict[str, Tensor] = field(default_factory=dict)


@dataclass(frozen=True)
class Method:
    """``run(problem)`` returns an ``EdgeOutput`` (``kind="edges"``), a ``DirectionOutput`` (``"directions"``) or a
    ``FeatureOutput`` (``"features"``: scored only on cases with superposed features)."""

    name: str
    kind: str
    run: Callable[[Problem], Union[EdgeOutput, DirectionOutput, FeatureOutput]]
    summary: str = ""

    def __post_init__(self) -> None:
        if self.kind not in (EDGES, DIRECTIONS, FEATURES):
            raise ValueError(
                f"method {self.name!r}: kind must be {EDGES!r}, {DIRECTIONS!r} or {FEATURES!r}, got {self.kind!r}"
            )
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"method name: letters, digits, '-' and '_' only, got {self.name!r}")


METHODS: dict[str, Method] = {}


def register_method(method: Method) -> Method:
    """Add ``method`` to ``METHODS`` (a second method under a taken name is refused, unless it is the same method
    from the same file loaded twice: a plugin imported as a module and through ``--plugin``)."""
    if method.name in METHODS and not _same(METHODS[method.name], method):
        raise ValueError(f"method {method.name!r}: already registered")
    METHODS[method.name] = method
    return method


def _same(a: Method, b: Method) -> bool:
    """The same method, or the same function of the same file under the same name, kind and summary."""
    if a is b:
        return True
    where = lambda m: (m.kind, m.summary, m.run.__code__.co_filename, m.run.__code__.co_qualname)  # noqa: E731
    return hasattr(a.run, "__code__") and hasattr(b.run, "__code__") and where(a) == where(b)


@dataclass
class Runs:
    """A case's clean and corrupted forwards through the graph (node outputs and query predictions)."""

    clean: dict[str, Tensor]
    corrupted: dict[str, Tensor]
    pred: Float[Tensor, "batch"]
    pred_corrupted: Float[Tensor, "batch"]


@torch.no_grad()
def runs(case: Union[Case, Problem]) -> Runs:
    clean, pred = run_graph(case.model, case.clean.prompt)
    corrupted, pred_corrupted = run_graph(case.model, case.corrupted.prompt)
    return Runs(clean, corrupted, pred, pred_corrupted)


@torch.no_grad()
def patched_prediction(
    case: Union[Case, Problem], r: Runs, edges: frozenset[Edge] | set[Edge]
) -> Float[Tensor, "batch"]:
    """The query prediction with every edge in ``edges`` carrying its sender's corrupted output."""
    return run_graph(case.model, case.clean.prompt, patched={e: r.corrupted[e[0]] for e in edges})[1]


def edge_patching(case: Problem) -> EdgeOutput:
    r = runs(case)
    return EdgeOutput(
        {e: float((patched_prediction(case, r, {e}) - r.pred).abs().mean()) for e in build_graph(case.model).edges}
    )


def edge_patching_signed(case: Problem) -> EdgeOutput:
    """Exact edge patching ranked by ``|mean_tasks Δ prediction|``: the convention of EAP-IG's reference
    implementation, where effects of opposite sign on different tasks cancel."""
    r = runs(case)
    return EdgeOutput(
        {e: float((patched_prediction(case, r, {e}) - r.pred).mean().abs()) for e in build_graph(case.model).edges}
    )


def _input_gradients(case: Problem, embed: Optional[Tensor] = None) -> dict[str, Tensor]:
    """``∂ prediction_b / ∂ input_v`` for every destination ``v`` (one backward: task ``b``'s prediction depends
    on task ``b``'s inputs alone)."""
    graph = build_graph(case.model)
    shape = case.clean.prompt.shape[:2] + (case.model.cfg.d_model,)
    probes = {v: torch.zeros(shape, dtype=torch.float64, requires_grad=True) for v in graph.destinations}
    _, pred = run_graph(case.model, case.clean.prompt, embed=embed, probes=probes)
    grads = torch.autograd.grad(pred.sum(), list(probes.values()), allow_unused=True)
    return {v: torch.zeros(shape, dtype=torch.float64) if g is None else g for v, g in zip(probes, grads)}


def _attribution(case: Problem, r: Runs, grads: dict[str, Tensor]) -> EdgeOutput:
    return EdgeOutput(
        {
            (u, v): float(((r.corrupted[u] - r.clean[u]) * grads[v]).sum((1, 2)).abs().mean())
            for u, v in build_graph(case.model).edges
        }
    )


def edge_attribution_patching(case: Problem) -> EdgeOutput:
    return _attribution(case, runs(case), _input_gradients(case))


def eap_ig(case: Problem) -> EdgeOutput:
    r = runs(case)
    start, end = r.clean["embed"], r.corrupted["embed"]
    total: dict[str, Tensor] = {}
    for k in range(IG_STEPS):
        alpha = (k + 0.5) / IG_STEPS
        for v, g in _input_gradients(case, embed=start + alpha * (end - start)).items():
            total[v] = total.get(v, 0) + g / IG_STEPS
    return _attribution(case, r, total)


def acdc(case: Problem, tau: float = ACDC_TAU) -> EdgeOutput:
    r = runs(case)
    scale = float((r.pred_corrupted - r.pred).abs().mean())
    error = lambda removed: float((patched_prediction(case, r, removed) - r.pred).abs().mean()) / scale  # noqa: E731
    graph, removed, scores = build_graph(case.model), set(), {}
    current = 0.0
    for v in reversed(graph.destinations):
        for e in reversed([e for e in graph.edges if e[1] == v]):
            trial = error(removed | {e})
            scores[e] = trial - current
            if trial - current < tau:
                removed.add(e)
                current = trial
    return EdgeOutput(scores, frozenset(graph.edges) - removed)


def edge_pruning(case: Problem) -> EdgeOutput:
    """Every edge's mask trained jointly (``mask_selection.prune_edges``)."""
    return EdgeOutput(*prune_edges(case))


def weight_reader(case: Problem) -> EdgeOutput:
    """The model's weights alone, never a forward pass (``weight_reader.weight_scores``)."""
    return EdgeOutput(weight_scores(case.model))


def random_ranking(case: Problem) -> EdgeOutput:
    gen = torch.Generator().manual_seed(case.seed)
    edges = build_graph(case.model).edges
    return EdgeOutput(dict(zip(edges, torch.rand(len(edges), generator=gen, dtype=torch.float64).tolist())))


def linear_probe(case: Problem) -> DirectionOutput:
    resid = residual_stack(case.model, case.fit.prompt)
    out = DirectionOutput()
    for name, target in case.fit_values.items():
        probes = fit_probes(resid, target, name)
        for s, site in enumerate(residual_sites(case.model)):
            if site in case.variable_sites[name]:
                out.directions[(name, site)] = probes.weights[s]
    return out


def pca(case: Problem) -> FeatureOutput:
    """The principal directions of the residual stream at each feature site, projections onto them the latents."""
    resid, sites, out = residual_stack(case.model, case.fit.prompt), residual_sites(case.model), FeatureOutput()
    for site in case.feature_sites:
        acts = resid[sites.index(site)].reshape(-1, resid.shape[-1])
        mean = acts.mean(0)
        components = torch.linalg.svd(acts - mean, full_matrices=False).Vh  # [d_model, d_model], rows orthonormal
        out.encoders[site] = Encoder(components, center=mean)
        out.decoders[site] = components
    return out


def weight_units(case: Problem) -> FeatureOutput:
    """The weights alone: at the site after block ``l``, every unit of blocks ``0..l`` a latent
    ``relu(x · w)`` along its write direction ``w`` (``weight_reader.unit_directions``), ``w`` its decoder row."""
    sites, out = residual_sites(case.model), FeatureOutput()
    for site in case.feature_sites:
        directions = unit_directions(case.model, sites.index(site))
        out.encoders[site] = Encoder(directions, activation="relu")
        out.decoders[site] = directions
    return out


DICTIONARY_WIDTH = 4  # a dictionary's latents per residual dimension: the SAE plugin's and its random baseline's


def random_dictionary(case: Problem) -> FeatureOutput:
    """``DICTIONARY_WIDTH × d_model`` seeded random unit directions per feature site, each a ReLU latent
    ``relu(x · w − b)`` with ``b`` its ``1 − a`` quantile over the fit positions, ``a`` the planted units' designed
    firing rate (``case.feature_rate``: the kindest chance; a little less where positions with equal residuals
    tie at the threshold); the directions are the decoder rows. Nothing is
    learned: the MCC a dictionary this wide reaches by chance."""
    resid, sites, out = residual_stack(case.model, case.fit.prompt), residual_sites(case.model), FeatureOutput()
    gen = torch.Generator().manual_seed(case.seed)
    for site in case.feature_sites:
        acts = resid[sites.index(site)].reshape(-1, resid.shape[-1])
        w = torch.randn(DICTIONARY_WIDTH * acts.shape[-1], acts.shape[-1], generator=gen, dtype=acts.dtype)
        w = torch.nn.functional.normalize(w, dim=-1)
        bias = torch.quantile(acts @ w.T, 1 - case.feature_rate, dim=0)
        out.encoders[site] = Encoder(w, bias=-bias, activation="relu")
        out.decoders[site] = w
    return out


def das(case: Problem) -> DirectionOutput:
    """Distributed alignment search (Geiger et al. 2024) through pyvene (``interchange.fit_das``): a
    one-dimensional ``LowRankRotatedSpaceIntervention`` at each site, trained so that interchanging the rotated
    coordinate between base and source prompts (each fit task with the next) gives the counterfactual predictions
    of the causal model (the value variable swapped, ``cases.counterfactual_labels``); ``DAS_RESTARTS`` random
    initialisations, the one with the lowest training loss kept. Its learned axis is the direction found."""
    out = DirectionOutput()
    for site in case.variable_sites["value"]:
        seeds = [case_seed(case.seed, k) for k in range(interchange.DAS_RESTARTS)]
        labels = case.fit_counterfactuals[("value", site)]
        out.directions[("value", site)] = interchange.fit_das(case.model, site, case.fit, labels, seeds)
    return out


TRUTH = "truth"  # the true edges ranked first: a reference row the scorer computes (no method), CMD's reference point
# chance, weights alone and exact patching for edges, chance and weights alone for features: always run (a feature
# method only where features are planted)
REFERENCES = ("random", "weight-reader", "activation-patching", "random-dictionary", "weight-units")

for _method in (
    Method("activation-patching", EDGES, edge_patching, "exact edge patching (the reference)"),
    Method(
        "activation-patching-signed",
        EDGES,
        edge_patching_signed,
        "exact edge patching ranked by |mean effect| (EAP-IG's convention)",
    ),
    Method("edge-attribution-patching", EDGES, edge_attribution_patching, "EAP: gradient × activation difference"),
    Method("eap-ig", EDGES, eap_ig, f"EAP with integrated gradients over the read-in ({IG_STEPS} steps)"),
    Method("acdc", EDGES, acdc, f"ACDC-style iterative pruning (τ = {ACDC_TAU} of the corrupted error)"),
    Method("edge-pruning", EDGES, edge_pruning, f"every edge's mask trained jointly (Adam, {PRUNE_STEPS} steps)"),
    Method("random", EDGES, random_ranking, "a seeded random ranking (chance)"),
    Method("weight-reader", EDGES, weight_reader, "weights alone, never a forward: |writer × reader| × best path"),
    Method("linear-probe", DIRECTIONS, linear_probe, "least-squares probe per site"),
    Method(
        "das",
        DIRECTIONS,
        das,
        f"DAS through pyvene (1-D, {interchange.DAS_STEPS} Adam steps, best of {interchange.DAS_RESTARTS})",
    ),
    Method("pca", FEATURES, pca, "principal directions per site (the dense linear baseline)"),
    Method("weight-units", FEATURES, weight_units, "weights alone: each MLP unit's write direction as a latent"),
    Method(
        "random-dictionary",
        FEATURES,
        random_dictionary,
        f"{DICTIONARY_WIDTH}× wide random ReLU directions, firing as often as the planted units (chance)",
    ),
):
    register_method(_method)
